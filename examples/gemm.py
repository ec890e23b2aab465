"""The GEMM of DESIGN.md, compiled for the default device and checked against numpy.

    python examples/gemm.py                  # on the default device (a GPU, else the OpenCL CPU)
    XEJIT_INTERPRET=1 python examples/gemm.py  # in numpy on the host, one workgroup at a time
    python examples/gemm.py --size 512 --ir  # also print the XeTile IR

Prints GFLOP/s (median of several runs after a warm-up) and the max error against float64 numpy.
"""
import argparse
import statistics
import time

import numpy as np

import xejit
import xejit.language as xl
from xejit import options
from xejit.device_launch import resolve_target
from xejit.runtime import default_device, usm


@xejit.kernel
def matmul_kernel(a, b, c, M, N, K,
                  BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])      # a: 2D array argument; base shape/strides come from it
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, K, BK):                   # runtime bounds; loop-carried values are found by the frontend
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


# Tile sizes per compile target: DESIGN.md's for Xe GPUs, small register tiles for the CPU device.
CONFIGS = {
    "pvc": dict(BM=256, BN=256, BK=32, num_subgroups=32),
    "bmg": dict(BM=256, BN=256, BK=32, num_subgroups=32),
    "lnl": dict(BM=128, BN=128, BK=32, num_subgroups=16),
    "dg2": dict(BM=128, BN=128, BK=32, num_subgroups=16),
    "generic": dict(BM=6, BN=16, BK=16, num_subgroups=1),  # docs/compiler.md, "Generic target performance"
}
# Under XEJIT_EMULATE the GPU path runs on the OpenCL CPU device to prove results, not for speed:
# its driver's build grows superlinearly with the tile per subgroup (fp32 on pvc, FMA fallback,
# benchmarks/bench_build_time.py --only examples: 256x256x32 / 32 subgroups 27 s CPU, 64x64x16 / 4
# 4.8 s, 32x32x16 / 4 1.2 s), so the emulated run takes a small tile of the same code path.
EMULATED = dict(BM=32, BN=32, BK=16, num_subgroups=4)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, nargs=3, default=[1000, 1000, 1000], metavar=("M", "N", "K"))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ir", action="store_true", help="print the XeTile IR")
    args = p.parse_args()
    M, N, K = args.size
    interpret = options.current().interpret
    dev = default_device()
    target, emulated = resolve_target(dev)        # XEJIT_EMULATE=pvc compiles pvc's code for the CPU device
    cfg = EMULATED if emulated else CONFIGS[target]
    rng = np.random.default_rng(0)
    # USM arrays: numpy arrays the device reads and writes without copies.
    a = usm.asarray(rng.standard_normal((M, K)).astype(np.float32))
    b = usm.asarray(rng.standard_normal((K, N)).astype(np.float32))
    c = usm.empty((M, N), np.float32)
    c[:] = np.nan                                 # poisoned: unwritten elements would show
    grid = (xejit.cdiv(M, cfg["BM"]), xejit.cdiv(N, cfg["BN"]))
    if args.ir:
        print(matmul_kernel.ir_text(a, b, c, M, N, K, **cfg))
    where = ("numpy interpreter (host)" if interpret else
             f"{dev.name} [{dev.filter_string}], target {target}{' (emulated)' if emulated else ''}")
    print(f"GEMM {M}x{N}x{K} fp32 on {where}, tiles {cfg}")

    t0 = time.perf_counter()
    matmul_kernel[grid](a, b, c, M, N, K, **cfg)   # first call: compile (or load from cache) and run
    first = time.perf_counter() - t0
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.abs(c - ref).max() / np.abs(ref).max())
    times = []
    for _ in range(0 if interpret else args.repeats):
        t0 = time.perf_counter()
        matmul_kernel[grid](a, b, c, M, N, K, **cfg)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    a @ b
    t_np = time.perf_counter() - t0
    flop = 2.0 * M * N * K
    print(f"first call (compile + run): {first:.2f} s")
    if times:
        t = statistics.median(times)
        print(f"xejit: {flop / t / 1e9:.1f} GFLOP/s (median of {len(times)}); numpy: {flop / t_np / 1e9:.1f} GFLOP/s")
    print(f"max relative error vs numpy float64: {err:.2e}")
    if not err < 1e-5:
        raise SystemExit(f"FAILED: error {err:.2e} above the fp32 bound 1e-5")


if __name__ == "__main__":
    main()
