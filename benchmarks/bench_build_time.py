"""How long the CPU device's driver takes to build the kernels of the library, tests and examples.

    python benchmarks/bench_build_time.py                  # GEMMs, attention, examples (the table below)
    python benchmarks/bench_build_time.py --only gemm      # fp32, fp16, bf16, int8; fp32/fp16 column-major B
    python benchmarks/bench_build_time.py --tile 32 32 32  # (fp16 column-major B 32x32x32: ~150 s before
                                                           #  the k loops of docs/compiler.md, now ~5 s)

Sections: ``gemm`` (``xejit.kernels.gemm`` on the generic target, ``--tile``), ``attention``
(``xejit.attention``'s kernels: every generic candidate config of the forward, dq and dk/dv at
fp32 D=64 causal, and the first config of each under ``XEJIT_EMULATE=pvc`` / ``dg2`` at fp16, as
the tests build them), ``examples`` (each script of ``examples/`` run on the CPU device, default
and under ``XEJIT_EMULATE=pvc`` / ``dg2``; every driver build it makes, the slowest shown).
Each case runs in a fresh process with a fresh cache. ``wall s`` is the build's elapsed time,
``cpu s`` its thread's CPU time (the figure to compare on a loaded machine); the goal is 5 s.

For each case the kernel is compiled (frontend -> SPIR-V, timed) and then built by the OpenCL
CPU driver (``xejit.runtime.build_program``, timed), each in a fresh process so that no build
is reused. fp32 is the reference: the figures are comparable within one run only (the machine
may be shared). Prints a table; nothing is launched.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, {root!r})
from xejit.kernels.gemm import gemm_kernel
from xejit.runtime import build_program, default_device
dtype, col_b, bm, bn, bk = {dtype!r}, {col_b!r}, {bm}, {bn}, {bk}
np_dt = {{"fp32": np.float32, "fp16": np.float16, "int8": np.int8}}.get(dtype)
if dtype == "bf16":
    import torch
    a = torch.zeros((64, 64), dtype=torch.bfloat16)
    b = torch.zeros((64, 64), dtype=torch.bfloat16)
    b = b.T if col_b else b
    c = torch.zeros((64, 64), dtype=torch.float32)
else:
    a = np.zeros((64, 64), np_dt)
    b = np.zeros((64, 64), np_dt).T if col_b else np.zeros((64, 64), np_dt)
    c = np.zeros((64, 64), np.int32 if dtype == "int8" else np.float32)
import xejit.ir.core as irc
acc = irc.i32 if dtype == "int8" else irc.f32
t0 = time.perf_counter()
ck = gemm_kernel.compile(a, b, a, c, 64, 64, 64, BM=bm, BN=bn, BK=bk, ACC=acc, target="generic")
t1 = time.perf_counter()
build_program(ck.spv, default_device(), cache=False)   # the driver's build, not a cached binary
from xejit.runtime import program
wall, cpu, size = program.build_stats.spirv_builds[-1]
print(json.dumps({{"compile_s": t1 - t0, "build_s": wall, "cpu_s": cpu, "spv_bytes": size}}))
"""

CASES = [("fp32", False), ("fp16", False), ("bf16", False), ("int8", False), ("fp32", True), ("fp16", True)]

ATTENTION = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
from xejit.kernels import attention as ka
from xejit.runtime import program
kind, target, dtype, i = {kind!r}, {target!r}, {dtype!r}, {i}
cfg = ka.configs_for(target, kind, 64)[i]
t0 = time.perf_counter()
ck = ka.compile_for(kind, target, 64, dtype, cfg, causal=True, B=2, H=4, G=2, Sq=37, Sk=45,
                    emulate=target != "generic")
t1 = time.perf_counter()
program.build_program(ck.spv, cache=False, options=ck.build_options("opencl"))   # emulated: unoptimised
wall, cpu, size = program.build_stats.spirv_builds[-1]
print(json.dumps({{"config": str(cfg.kwargs), "compile_s": t1 - t0, "build_s": wall, "cpu_s": cpu, "spv_bytes": size}}))
"""

EXAMPLE = r"""
import json, os, runpy, sys
sys.path.insert(0, {root!r})
sys.argv = [{path!r}]
from xejit.runtime import program
runpy.run_path({path!r}, run_name="__main__")
b = program.build_stats.spirv_builds
worst = max(b, key=lambda x: x[1]) if b else (0.0, 0.0, 0)
print(json.dumps({{"builds": len(b), "build_s": worst[0], "cpu_s": worst[1], "spv_bytes": worst[2],
                  "total_cpu_s": sum(x[1] for x in b)}}))
"""


def run(dtype: str, col_b: bool, bm: int, bn: int, bk: int, timeout: float) -> dict:
    return _fresh(ONE.format(root=str(ROOT), dtype=dtype, col_b=col_b, bm=bm, bn=bn, bk=bk), timeout)


def _fresh(code: str, timeout: float, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh process with a fresh compile cache; its last JSON line."""
    with tempfile.TemporaryDirectory(prefix="xejit-build-time-") as cache:
        env = {**os.environ, "XEJIT_CACHE_DIR": cache, **(env or {})}
        try:
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                                 check=False, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"over {timeout:.0f} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": (out.stderr.strip().splitlines() or ["?"])[-1][:120]}


GOAL_S = 5.0


def _row(name: str, r: dict) -> str:
    if "error" in r:
        return f"{name:44} ERROR {r['error']}"
    flag = "" if r["cpu_s"] <= GOAL_S else "  over 5 s"
    return f"{name:44} {r['build_s']:7.1f} {r['cpu_s']:6.1f} {r['spv_bytes']:9d}{flag}"


def gemm_section(tile: list[int], timeout: float) -> None:
    print(f"GEMM {tile[0]}x{tile[1]}x{tile[2]} tiles, generic target, OpenCL CPU driver")
    print(f"{'dtype':6} {'B':4} {'compile s':>9} {'wall s':>7} {'cpu s':>6} {'vs fp32':>8} {'SPIR-V B':>9}")
    ref = None
    for dtype, col_b in CASES:
        r = run(dtype, col_b, *tile, timeout)
        if "error" in r:
            print(f"{dtype:6} {'col' if col_b else 'row':4} ERROR {r['error']}")
            continue
        ref = ref if ref is not None else r["cpu_s"]
        print(f"{dtype:6} {'col' if col_b else 'row':4} {r['compile_s']:9.2f} {r['build_s']:7.1f} {r['cpu_s']:6.1f} "
              f"{r['cpu_s'] / ref:7.1f}x {r['spv_bytes']:9d}")


def attention_section(timeout: float) -> None:
    from xejit.kernels import attention as ka   # the candidate lists only (nothing is built here)
    print(f"\n{'xejit.attention kernel (D=64, causal)':44} {'wall s':>7} {'cpu s':>6} {'SPIR-V B':>9}")
    for kind in ("fwd", "dq", "dkdv"):
        for i, cfg in enumerate(ka.configs_for("generic", kind, 64)):
            code = ATTENTION.format(root=str(ROOT), kind=kind, target="generic", dtype="float32", i=i)
            name = f"{kind} generic fp32 " + "x".join(str(cfg.kwargs[k]) for k in ("BM", "BN"))
            print(_row(name + (" (untuned)" if i == 0 else ""), _fresh(code, timeout)), flush=True)
    for target in ("pvc", "dg2"):
        for kind in ("fwd", "dq", "dkdv"):
            code = ATTENTION.format(root=str(ROOT), kind=kind, target=target, dtype="float16", i=0)
            print(_row(f"{kind} emulated {target} fp16 (first config)", _fresh(code, timeout)), flush=True)


def examples_section(timeout: float) -> None:
    print(f"\n{'example (slowest build of the run)':44} {'wall s':>7} {'cpu s':>6} {'SPIR-V B':>9} builds")
    for path in sorted((ROOT / "examples").glob("*.py")):
        for emulate in ("", "pvc", "dg2"):
            code = EXAMPLE.format(root=str(ROOT), path=str(path))
            r = _fresh(code, timeout, {"XEJIT_EMULATE": emulate} if emulate else None)
            row = _row(f"{path.name} {'XEJIT_EMULATE=' + emulate if emulate else 'default'}", r)
            print(row + (f" {r['builds']}" if "builds" in r else ""), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tile", nargs=3, type=int, default=[16, 32, 32], metavar=("BM", "BN", "BK"))
    p.add_argument("--only", choices=["gemm", "attention", "examples"], nargs="*")
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args()
    only = set(args.only or ["gemm", "attention", "examples"])
    if "gemm" in only:
        gemm_section(args.tile, args.timeout)
    if "attention" in only:
        attention_section(args.timeout)
    if "examples" in only:
        examples_section(args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
