"""Runtime costs on the current device: program build (cold, warm), launch overhead, compile
latency and the first ``xejit.matmul`` of a fresh process.

Launch overhead compares the xejit paths (``Kernel.launch`` of a built program; ``kernel[grid]``
of a DSL kernel, a prepared launch) with a bare dpctl submit+wait of the same kernel on the same
USM buffers, measured in the same run; medians of N launches after a warm-up. ``xejit.matmul``
64^3 on a cached shape is compared with ``kernel[grid]`` of the GEMM config it chose. The first
call and compile figures are those of ``benchmarks/run.py``, repeated: median and range.
Run: ``python benchmarks/bench_runtime.py [--launches 1000] [--repeats 3]``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # for tests.runtime.kernels

_BUILD_PROBE = r"""
import time, json
t0 = time.perf_counter()
import xejit
from xejit.runtime import build_program, default_device, program
from tests.runtime import kernels
dev = default_device()
t1 = time.perf_counter()
a, b = kernels.vadd_f32(), kernels.block_read_rotate()
t2 = time.perf_counter(); build_program(a, dev, validate=False); t3 = time.perf_counter()
build_program(b, dev, validate=False); t4 = time.perf_counter()
build_program(a, dev, validate=False); t5 = time.perf_counter()
print(json.dumps({"import_and_device_s": t1 - t0, "first_build_s": t3 - t2,
                  "second_build_s": t4 - t3, "rebuild_same_module_s": t5 - t4,
                  "from_spirv": program.build_stats.from_spirv, "from_binary": program.build_stats.from_binary}))
"""


def build_times(repeats: int) -> dict:
    """Medians over fresh processes: with an empty cache directory each (the driver compiles),
    and with the directory the first left (the driver's binaries are loaded from disk)."""
    import os
    import tempfile

    out = {}
    with tempfile.TemporaryDirectory() as warm_dir:
        for label in ("cold", "warm"):
            runs = []
            for _ in range(repeats):
                with tempfile.TemporaryDirectory() as cold_dir:
                    env = {**os.environ, "XEJIT_CACHE_DIR": cold_dir if label == "cold" else warm_dir}
                    if label == "warm" and not runs and not os.listdir(warm_dir):
                        subprocess.run([sys.executable, "-c", _BUILD_PROBE], env=env, check=True,
                                       capture_output=True)   # fills the warm directory
                    runs.append(json.loads(subprocess.run([sys.executable, "-c", _BUILD_PROBE], env=env,
                                                          capture_output=True, text=True, check=True).stdout))
            out[label] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return out


def launch_overhead(n: int) -> dict:
    import xejit  # noqa: F401
    from xejit.runtime import build_program, usm
    from tests.runtime import kernels

    k = build_program(kernels.vadd_f32()).kernel("vadd", ["ptr_in", "ptr_in", "ptr", "i32", "f32"])
    size = 1024
    a, b, c = (usm.empty(size, np.float32) for _ in range(3))
    a[:] = 1; b[:] = 2
    np_a, np_b, np_c = (np.ones(size, np.float32) for _ in range(3))
    import ctypes
    import dpctl.memory as dm
    q = k.device.queue
    bufs = [dm.MemoryUSMShared(size * 4, queue=q) for _ in range(3)]
    raw_args = [*bufs, ctypes.c_int32(size), ctypes.c_float(1.0)]

    def timed(fn):
        for _ in range(50):
            fn()
        out = []
        for _ in range(n):
            t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
        return statistics.median(out) * 1e6

    bare = timed(lambda: q.submit(k.sycl_kernel, raw_args, [size], [64]).wait())
    usm_path = timed(lambda: k.launch((size // 64,), (64,), a, b, c, size, 1.0))
    numpy_path = timed(lambda: k.launch((size // 64,), (64,), np_a, np_b, np_c, size, 1.0))
    return {"bare_dpctl_us": bare, "xejit_usm_us": usm_path, "xejit_numpy_copy_us": numpy_path,
            "overhead_usm_us": usm_path - bare, "launches": n}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--launches", type=int, default=1000)
    p.add_argument("--build-repeats", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3, help="runs of the DSL launch, compile and first-call figures")
    args = p.parse_args()
    from xejit.runtime import default_device
    print(f"device: {default_device()}")
    bt = build_times(args.build_repeats)
    lo = launch_overhead(args.launches)
    for label, how in (("cold", "empty cache: the driver compiles"), ("warm", "warm cache: driver binaries loaded")):
        b = bt[label]
        print(f"program build, {how} (median of {args.build_repeats} fresh processes; {b['from_spirv']:.0f} "
              f"compiled, {b['from_binary']:.0f} loaded): first in process {b['first_build_s'] * 1e3:.1f} ms, "
              f"a second module {b['second_build_s'] * 1e3:.1f} ms, same module again "
              f"{b['rebuild_same_module_s'] * 1e6:.1f} us (in-process cache); import + device "
              f"{b['import_and_device_s'] * 1e3:.0f} ms")
    print(f"launch, median of {lo['launches']}: bare dpctl submit+wait {lo['bare_dpctl_us']:.1f} us, "
          f"xejit with USM arrays {lo['xejit_usm_us']:.1f} us (+{lo['overhead_usm_us']:.1f} us), "
          f"xejit with numpy arrays (copied in/out) {lo['xejit_numpy_copy_us']:.1f} us")
    from benchmarks import run

    def spread(values: list[float], scale: float, unit: str) -> str:
        return (f"{statistics.median(values) * scale:.1f} {unit} (range {min(values) * scale:.1f}-"
                f"{max(values) * scale:.1f}, {len(values)} runs)")

    dsl = [run.launch_overhead(args.launches) for _ in range(args.repeats)]
    print("kernel[grid] (prepared launch) / bare dpctl submit+wait, same run: " + ", ".join(
        f"{d['xejit_us']:.1f}/{d['bare_dpctl_us']:.1f} us = {d['xejit_us'] / d['bare_dpctl_us']:.2f}x" for d in dsl))
    print("xejit.matmul 64^3 cached shape / its GEMM kernel[grid]: " + ", ".join(
        f"{d['matmul_64_us']:.1f}/{d['gemm_kernel_launch_64_us']:.1f} us = "
        f"{d['matmul_64_us'] / d['gemm_kernel_launch_64_us']:.2f}x" for d in dsl))
    cl = run.compile_latency(args.repeats, (8, 32, 8, 2), (4, 32, 16, 1))
    for label in ("cold", "warm"):
        if label in cl:
            fe = sum(v for k, v in cl[label].items() if k not in ("driver_build", "total"))
            print(f"compile GEMM {label} (median of {args.repeats} processes): frontend -> SPIR-V {fe * 1e3:.1f} ms ("
                  + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in cl[label].items() if k != "total")
                  + " ms)")
    fc = [run.first_call_latency(False) for _ in range(args.repeats)]
    fc = [f for f in fc if "cold" in f]
    if fc:
        print("first xejit.matmul 512^3 in a fresh process: cold cache "
              + spread([f["cold"]["first_call_s"] for f in fc], 1e3, "ms")
              + ", warm cache " + spread([f["warm"]["first_call_s"] for f in fc], 1e3, "ms"))
    print(json.dumps({"build": bt, "launch": lo, "dsl_launch": dsl, "compile": cl, "first_call": fc}))


if __name__ == "__main__":
    main()
