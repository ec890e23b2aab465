"""Cost of the bounds check of gathers and scatters (and of ``XEJIT_DEBUG=1``'s report).

    python benchmarks/bench_gather_bounds.py [--launches 30] [--rows 4096] [--chunks 64]

A gather/scatter-heavy kernel -- every program walks ``chunks`` tiles of indices, gathers the
elements of ``x`` they name, sums them and scatters twice the values into ``z`` -- is built three
times for the CPU device (``generic``): with the span check every gather and scatter has
(memory safety, the default), without it (``compile_kernel(_span_checks=False)``, a private
switch that exists for this measurement only: memory-unsafe), and in debug mode (the check plus
the out-of-range report). The three are launched in turns on the same USM arrays; the figures are
the medians of ``--launches`` launches after a warm-up, as ratios to the unchecked build measured
in the same run. Then the kernel is compiled for pvc with and without the check and built by
Intel's compiler (ocloc): total ISA instructions and those of the chunk loop. Prints a table and
one JSON line; no GPU is needed or used.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import xejit
import xejit.language as xl


@xejit.kernel
def gather_sum_scatter(x, idx, z, out, chunks, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(chunks):
        offs = xl.load_tile(xl.init_tile(idx, [m, k * BN], [BM, BN]))
        v = xl.load_gather(xl.init_tile(x, offs))
        acc = acc + v
        xl.store_scatter(xl.init_tile(z, offs), v * 2.0)
    xl.store_tile(xl.init_tile(out, [m, 0], [BM, BN]), acc)


BM, BN = 8, 16


def _inputs(rows: int, chunks: int, n: int, seed: int = 0):
    from xejit.runtime import usm
    rng = np.random.default_rng(seed)
    x = usm.asarray(rng.uniform(1, 2, n).astype(np.float32))
    idx = usm.asarray(rng.integers(0, n, (rows, chunks * BN)).astype(np.int64))
    z = usm.asarray(np.zeros(n, np.float32))
    out = usm.asarray(np.full((rows, BN), np.nan, np.float32))
    return x, idx, z, out


def cpu_times(rows: int, chunks: int, launches: int) -> dict:
    """Median launch time (ms) of each build on the CPU device, launched in turns."""
    from xejit.codegen.bounds_debug import new_buffer
    from xejit.codegen.compiler import compile_kernel
    from xejit.device_launch import expand_args
    from xejit.runtime import build_program, default_device

    dev = default_device()
    n = rows * BN
    x, idx, z, out = _inputs(rows, chunks, n)
    mod = gather_sum_scatter.compile_ir(x, idx, z, out, chunks, BM=BM, BN=BN)
    builds = {"checked": {}, "unchecked": {"_span_checks": False}, "debug": {"debug": True}}
    runs = {}
    for name, kw in builds.items():
        ck = compile_kernel(mod, "generic", **kw)
        rk = build_program(ck.spv, dev, validate=False).kernel(ck.name, ck.signature)
        buf = new_buffer()
        args = expand_args(ck.arg_plan, [x, idx, z, out, chunks], buf)
        grid, block = (rows // BM,), ck.block(1)
        runs[name] = (lambda rk=rk, args=args, grid=grid, block=block: rk.launch(grid, block, *args))
    ref = np.asarray(x)[np.asarray(idx)].reshape(rows // BM, BM, chunks, BN).sum(axis=2).reshape(rows, BN)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for name, run in runs.items():          # warm-up, and every build computes the same sums
        for _ in range(3):
            run()
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5)
        np.asarray(out)[...] = np.nan
    for _ in range(launches):
        for name, run in runs.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def pvc_instructions(rows: int, chunks: int) -> dict:
    """ISA instruction counts of the pvc build with and without the span check (Intel's compiler)."""
    from xejit.codegen import isa
    from xejit.codegen.compiler import compile_kernel

    x, idx = np.empty(rows * BN, np.float32), np.empty((rows, chunks * BN), np.int64)
    z, out = np.empty(rows * BN, np.float32), np.empty((rows, BN), np.float32)
    mod = gather_sum_scatter.compile_ir(x, idx, z, out, chunks, BM=BM, BN=BN)
    res = {}
    for name, kw in {"checked": {}, "unchecked": {"_span_checks": False}, "debug": {"debug": True}}.items():
        binary = compile_kernel(mod, "pvc", **kw).device_binary
        listing = isa.parse(binary.isa)
        loop = max(isa.loops(listing), key=lambda se: se[1] - se[0], default=None)
        in_loop = sum(isinstance(i, isa.Instruction) for i in listing[loop[0]:loop[1] + 1]) if loop else 0
        res[name] = {"total": sum(isinstance(i, isa.Instruction) for i in listing), "loop": in_loop,
                     "grf": binary.grf_count, "spill": binary.spill_bytes}
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launches", type=int, default=30)
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--chunks", type=int, default=64)
    a = p.parse_args()
    cpu = cpu_times(a.rows, a.chunks, a.launches)
    accesses = a.rows * a.chunks * BN * 2
    print(f"CPU device (generic), {a.rows}x{a.chunks * BN} indices, {accesses} gathered+scattered elements, "
          f"median of {a.launches} launches after warm-up:")
    for k, v in cpu.items():
        print(f"  {k:9} {v:8.2f} ms  {v / cpu['unchecked']:.3f}x unchecked")
    try:
        pvc = pvc_instructions(a.rows, a.chunks)
    except xejit.XejitError as e:   # Intel's compiler not installed
        pvc = {"error": str(e).splitlines()[0]}
    else:
        print("pvc (Intel's compiler): ISA instructions, whole kernel / chunk loop")
        for k, v in pvc.items():
            print(f"  {k:9} {v['total']:5} / {v['loop']:4}   GRF {v['grf']}, spill {v['spill']} B")
    print(json.dumps({"cpu_ms": cpu, "pvc_isa": pvc, "rows": a.rows, "chunks": a.chunks, "launches": a.launches}))


if __name__ == "__main__":
    main()
