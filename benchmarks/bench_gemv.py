"""Skinny GEMMs (decode GEMV, small batches) on the CPU device against numpy, in one process.

``xejit.matmul(a, b)`` and numpy's ``a @ b`` on the same fp32 numpy operands, interleaved round
by round (REPS calls of each per round, each series after a --settle sleep of 0.2 s so that it does
not start while the last series's runtime threads still spin), float64 error checked: per shape the median and best
round of wall time per call, CPU milliseconds per call over the whole run (``time.process_time``:
on a shared machine the figure that survives load better than wall time, but spinning runtime
threads count in it, numpy's and the OpenCL runtime's alike) and the GB/s of ``b`` at the median.
Also, interleaved with them: ``xejit_fresh_a``, ``xejit.matmul`` with a new numpy ``a`` every call
(copies made before the timed calls), as a decode step gets its activations; ``kernel``, the skinny kernel's launch alone (``_gemv_partials``:
no result array, no host sum of the K slices), so host overhead = xejit - kernel; and per series
the CPU time of the busiest thread against all the others (``/proc/self/task``, Linux): whether
the OpenCL runtime's worker thread shares the work with the launching thread, which runs
work-groups itself while it waits.
Run: ``python benchmarks/bench_gemv.py [--M 1 8] [--N 2048] [--K 2048] [--rounds 9]`` (prints the
M = 1 and M = 8 ratios to numpy); one runtime thread: ``CL_CONFIG_CPU_TBB_NUM_WORKERS=1
OPENBLAS_NUM_THREADS=1`` (per-core rate).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import xejit
import xejit.language as xl
from xejit.matmul import _gemv_partials


def _thread_ticks() -> dict[str, int]:
    """CPU clock ticks (user + system) of each thread of this process (empty where /proc is not)."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[t] = int(fields[11]) + int(fields[12])
    return out


def measure(M: int, N: int, K: int, rounds: int, reps: int, settle: float = 0.2) -> dict:
    rng = np.random.default_rng(M * 7919 + N + K)
    a = rng.uniform(0.5, 1.5, (M, K)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (K, N)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = xejit.matmul(a, b)
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    # decode as it runs: a new activation array every call (made before the timed calls)
    fresh = iter([a.copy() for _ in range(rounds * reps)])
    fns = {"xejit": lambda: xejit.matmul(a, b), "xejit_fresh_a": lambda: xejit.matmul(next(fresh), b),
           "kernel": lambda: _gemv_partials(a, b, xl.float32), "numpy": lambda: a @ b}
    wall = {name: [] for name in fns}
    cpu = {name: 0.0 for name in fns}
    ticks = {name: {} for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(settle)   # the previous series' spinning threads (OpenBLAS's, TBB's) go idle
            k0, p0, t0 = _thread_ticks(), time.process_time(), time.perf_counter()
            for _ in range(reps):
                fn()
            wall[name].append((time.perf_counter() - t0) / reps)
            cpu[name] += time.process_time() - p0
            for t, v in _thread_ticks().items():
                ticks[name][t] = ticks[name].get(t, 0) + v - k0.get(t, v)
    calls = rounds * reps
    tick_ms = 1e3 / os.sysconf("SC_CLK_TCK")
    row = {"M": M, "N": N, "K": K, "rel_err": err}
    for name in wall:
        med = float(np.median(wall[name]))
        per_thread = sorted(ticks[name].values(), reverse=True) or [0]
        row[name] = {"median_ms": med * 1e3, "best_ms": min(wall[name]) * 1e3,
                     "cpu_ms_per_call": cpu[name] / calls * 1e3, "b_gb_s": K * N * 4 / med / 1e9,
                     "busiest_thread_cpu_ms": per_thread[0] * tick_ms / calls,
                     "other_threads_cpu_ms": sum(per_thread[1:]) * tick_ms / calls}
    row["speed_vs_numpy"] = row["numpy"]["median_ms"] / row["xejit"]["median_ms"]
    row["fresh_a_speed_vs_numpy"] = row["numpy"]["median_ms"] / row["xejit_fresh_a"]["median_ms"]
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--M", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--N", type=int, default=2048)
    ap.add_argument("--K", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--reps", type=int, default=0, help="calls per round (default: ~60 ms of numpy work)")
    ap.add_argument("--settle", type=float, default=0.2,
                    help="seconds of sleep before each series: numpy's threads spin after its last call and "
                         "slowed a series right after it by up to 1.5x")
    args = ap.parse_args(argv)
    rows = []
    for M in args.M:
        reps = args.reps or max(10, 400 // M)
        r = measure(M, args.N, args.K, args.rounds, reps, args.settle)
        x, k, n = r["xejit"], r["kernel"], r["numpy"]
        print(f"{M}x{args.N}x{args.K}: xejit {x['median_ms']:.3f} ms (best {x['best_ms']:.3f}, CPU {x['cpu_ms_per_call']:.3f}, "
              f"{x['b_gb_s']:.0f} GB/s) | kernel alone {k['median_ms']:.3f} (best {k['best_ms']:.3f}) | numpy "
              f"{n['median_ms']:.3f} ms (best {n['best_ms']:.3f}, CPU {n['cpu_ms_per_call']:.3f}) | "
              f"{r['speed_vs_numpy']:.2f}x numpy | rel err {r['rel_err']:.1e}", flush=True)
        f = r["xejit_fresh_a"]
        print(f"    a new numpy a each call: xejit {f['median_ms']:.3f} ms (best {f['best_ms']:.3f}, CPU "
              f"{f['cpu_ms_per_call']:.3f}) | {r['fresh_a_speed_vs_numpy']:.2f}x numpy (numpy on one a)")
        for name in ("xejit", "numpy"):
            print(f"    {name} CPU ms per call: busiest thread {r[name]['busiest_thread_cpu_ms']:.3f}, "
                  f"other threads {r[name]['other_threads_cpu_ms']:.3f}")
        rows.append(r)
    return rows


if __name__ == "__main__":
    main()
