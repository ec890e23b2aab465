"""Skinny GEMMs (decode GEMV, small batches) on the CPU device against numpy, in one process.

``xejit.matmul(a, b)`` and numpy's ``a @ b`` on the same fp32 numpy operands, interleaved round
by round (REPS calls of each per round), float64 error checked: per shape the median and best
round of wall time per call, CPU milliseconds per call over the whole run (``time.process_time``:
on a shared machine the figure that survives load better than wall time, but spinning runtime
threads count in it, numpy's and the OpenCL runtime's alike) and the GB/s of ``b`` at the median.
Run: ``python benchmarks/bench_gemv.py [--M 1 8] [--N 2048] [--K 2048] [--rounds 7]``; one
runtime thread: ``CL_CONFIG_CPU_TBB_NUM_WORKERS=1 OPENBLAS_NUM_THREADS=1`` (per-core rate).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import xejit


def measure(M: int, N: int, K: int, rounds: int, reps: int) -> dict:
    rng = np.random.default_rng(M * 7919 + N + K)
    a = rng.uniform(0.5, 1.5, (M, K)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (K, N)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = xejit.matmul(a, b)
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    wall = {"xejit": [], "numpy": []}
    cpu = {"xejit": 0.0, "numpy": 0.0}
    for _ in range(rounds):
        for name, fn in (("xejit", lambda: xejit.matmul(a, b)), ("numpy", lambda: a @ b)):
            p0, t0 = time.process_time(), time.perf_counter()
            for _ in range(reps):
                fn()
            wall[name].append((time.perf_counter() - t0) / reps)
            cpu[name] += time.process_time() - p0
    calls = rounds * reps
    row = {"M": M, "N": N, "K": K, "rel_err": err}
    for name in wall:
        med = float(np.median(wall[name]))
        row[name] = {"median_ms": med * 1e3, "best_ms": min(wall[name]) * 1e3,
                     "cpu_ms_per_call": cpu[name] / calls * 1e3, "b_gb_s": K * N * 4 / med / 1e9}
    row["speed_vs_numpy"] = row["numpy"]["median_ms"] / row["xejit"]["median_ms"]
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--M", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--N", type=int, default=2048)
    ap.add_argument("--K", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=0, help="calls per round (default: ~60 ms of numpy work)")
    args = ap.parse_args(argv)
    rows = []
    for M in args.M:
        reps = args.reps or max(10, 400 // M)
        r = measure(M, args.N, args.K, args.rounds, reps)
        x, n = r["xejit"], r["numpy"]
        print(f"{M}x{args.N}x{args.K}: xejit {x['median_ms']:.3f} ms (best {x['best_ms']:.3f}, CPU {x['cpu_ms_per_call']:.3f}, "
              f"{x['b_gb_s']:.0f} GB/s) | numpy {n['median_ms']:.3f} ms (best {n['best_ms']:.3f}, CPU "
              f"{n['cpu_ms_per_call']:.3f}) | {r['speed_vs_numpy']:.2f}x numpy | rel err {r['rel_err']:.1e}", flush=True)
        rows.append(r)
    return rows


if __name__ == "__main__":
    main()
