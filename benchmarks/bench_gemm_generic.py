"""fp32 GEMM on the `generic` target (the CPU device) vs numpy in the same run, and compile time
per stage, cold and warm.

    python benchmarks/bench_gemm_generic.py [--sizes 512 1024 2048] [--reps 5]
        [--configs BM,BN,BK,NSG ...] [--bf16]
    python benchmarks/bench_gemm_generic.py --matmul [--sizes 1024 2048] [--rounds 9]
        [--strip-max-k K]

``--matmul``: ``xejit.matmul`` (the packed path: pack_b, pack_a, the strip or K-blocked GEMM) on
plain fp32 numpy operands against numpy's ``a @ b``, interleaved round by round in one process;
per size the median wall ratio (numpy / xejit: >= 1 is at numpy's speed), the median of the
per-round ratios, GFLOP per CPU-second of the process (``time.process_time``; less sensitive to
other processes' load than wall time) and each kernel's share of the call. This is the
one-command check of issue 15's fp32 GEMM figures (run it on a quiet machine).

Every config at every size (plus its build time); GFLOP/s are medians of ``--reps`` runs after
one warm-up, xejit then numpy back to back; operands live in USM shared memory (zero-copy for
the kernel, plain numpy arrays for numpy). ``--bf16``: bf16 x bf16 -> f32 against torch. Timings vary with machine load: the
ratio against numpy, measured in the same run, is the figure to compare.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import xejit  # noqa: E402
import xejit.jit  # noqa: E402
from xejit import device_launch, launch_plan  # noqa: E402
from xejit.codegen.compiler import compile_kernel  # noqa: E402
from xejit.runtime import build_program, usm  # noqa: E402
from tests.kernels import matmul  # noqa: E402


# (BM, BN, BK, num_subgroups). The CPU device here compiles for AVX2 (16 ymm registers): a
# subgroup of 16 lanes holds a 16-column group in 2 ymm, so a 6 x 16 tile per subgroup is the
# register-blocked microkernel (12 accumulators + 2 for a B row + 1 broadcast of A).
CONFIGS = [(6, 16, 16, 1), (6, 16, 8, 1), (6, 16, 32, 1), (12, 16, 16, 2), (4, 32, 8, 1)]


def median_time(f, reps):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def paired_medians(f, g, reps):
    """Medians of f and of g (``reps`` runs each after a warm-up), measured back to back. Not
    interleaved run by run: the OpenCL runtime's TBB workers keep spinning for a while after a
    kernel and would slow the BLAS threads; a pause lets them sleep first."""
    tf = median_time(f, reps)
    time.sleep(0.5)
    tg = median_time(g, reps)
    time.sleep(0.2)
    return tf, tg


def gemm_runner(n, cfg, a, b, c):
    bm, bn, bk, ns = cfg
    grid = (-(-n // bm), -(-n // bn))
    return lambda: matmul[grid](a, b, c, n, n, n, BM=bm, BN=bn, BK=bk, num_subgroups=ns)


def build_times(cfg, like):
    """(compile_kernel seconds, driver build seconds) of one config, built fresh."""
    bm, bn, bk, ns = cfg
    mod = matmul.compile_ir(like, like, like, 1, 1, 1, BM=bm, BN=bn, BK=bk, num_subgroups=ns)
    t0 = time.perf_counter()
    ck = compile_kernel(mod, "generic")
    t1 = time.perf_counter()
    build_program(ck.spv, validate=False)
    return t1 - t0, time.perf_counter() - t1


def matmul_vs_numpy(sizes, rounds):
    """The ``--matmul`` report (module docstring)."""
    per_kernel = {}
    launch = launch_plan.LaunchPlan.launch

    def timed_launch(self, args, mems, grid):   # wall time of each launch (they are synchronous)
        t = time.perf_counter()
        ok = launch(self, args, mems, grid)
        per_kernel[self.name] = per_kernel.get(self.name, 0.0) + time.perf_counter() - t
        return ok
    rng = np.random.default_rng(0)
    print(f"xejit.matmul vs numpy a @ b, fp32, {rounds} interleaved rounds (medians)")
    print(f"{'size':>6} {'xejit GF/s':>10} {'numpy GF/s':>10} {'ratio':>6} {'paired':>7} "
          f"{'xejit GF/cpu-s':>14} {'numpy GF/cpu-s':>14} {'max rel err':>11}  kernel share of the call")
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        out = np.full((n, n), np.nan, np.float32)
        xejit.matmul(a, b, out=out)   # builds, and warms the scratch buffers
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        wall = {"x": [], "n": []}
        cpu = {"x": [], "n": []}
        per_kernel.clear()
        launch_plan.LaunchPlan.launch = timed_launch
        try:
            for _ in range(rounds):
                for who, f in (("x", lambda: xejit.matmul(a, b, out=out)), ("n", lambda: a @ b)):
                    time.sleep(0.2)   # let the other library's spinning threads sleep
                    t, c = time.perf_counter(), time.process_time()
                    f()
                    wall[who].append(time.perf_counter() - t)
                    cpu[who].append(time.process_time() - c)
        finally:
            launch_plan.LaunchPlan.launch = launch
        gf = 2 * n ** 3 / 1e9
        wx, wn = np.median(wall["x"]), np.median(wall["n"])
        paired = np.median(np.array(wall["n"]) / np.array(wall["x"]))
        share = ", ".join(f"{k} {v / sum(wall['x']) * 100:.0f}%" for k, v in per_kernel.items())
        print(f"{n:>6} {gf / wx:>10.1f} {gf / wn:>10.1f} {wn / wx:>6.2f} {paired:>7.2f} "
              f"{gf / np.median(cpu['x']):>14.1f} {gf / np.median(cpu['n']):>14.1f} {err:>11.1e}  {share}",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--configs", nargs="*", default=None, help="BM,BN,BK,num_subgroups ...")
    ap.add_argument("--bf16", action="store_true", help="also bf16 x bf16 -> f32 vs torch bf16")
    ap.add_argument("--matmul", action="store_true", help="xejit.matmul vs numpy only (module docstring)")
    ap.add_argument("--rounds", type=int, default=9, help="--matmul: interleaved rounds")
    ap.add_argument("--strip-max-k", type=int, default=None,
                    help="--matmul: override xejit.matmul's STRIP_MAX_K (strip kernel up to this K)")
    args = ap.parse_args()
    if args.matmul:
        if args.strip_max_k is not None:
            sys.modules["xejit.matmul"].STRIP_MAX_K = args.strip_max_k
        matmul_vs_numpy(args.sizes if "--sizes" in sys.argv else [1024, 2048], args.rounds)
        return
    configs = [tuple(int(v) for v in c.split(",")) for c in args.configs] if args.configs else CONFIGS
    os.environ["XEJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="xejit-bench-")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; "
          f"device: CPU OpenCL runtime (generic target)")
    rng = np.random.default_rng(0)
    x = np.zeros((16, 16), np.float32)
    build_program(compile_kernel(matmul.compile_ir(x, x, x, 1, 1, 1, BM=1, BN=16, BK=1), "generic").spv,
                  validate=False)  # the first build in a process pays the driver's start-up
    print("build time per config (compile_kernel + driver build, seconds):")
    for cfg in configs:
        tc, tb = build_times(cfg, x)
        print(f"  {cfg}: compile {tc:.2f}  driver build {tb:.2f}")

    print(f"\nfp32 (medians of {args.reps} runs after a warm-up, xejit and numpy back to back)")
    print(f"{'size':>6} {'BM,BN,BK,nsg':>16} {'xejit GFLOP/s':>14} {'numpy GFLOP/s':>14} {'ratio':>7} {'max rel err':>12}")
    best = {}
    for n in args.sizes:
        a = usm.empty((n, n), np.float32); a[:] = rng.standard_normal((n, n))
        b = usm.empty((n, n), np.float32); b[:] = rng.standard_normal((n, n))
        c = usm.empty((n, n), np.float32)
        an, bn_ = np.array(a), np.array(b)
        ref = an.astype(np.float64) @ bn_
        for cfg in configs:
            c[:] = np.nan
            tx, tn = paired_medians(gemm_runner(n, cfg, a, b, c), lambda: an @ bn_, args.reps)
            err = np.abs(c - ref).max() / np.abs(ref).max()
            gx, gn = 2 * n**3 / tx / 1e9, 2 * n**3 / tn / 1e9
            print(f"{n:>6} {','.join(map(str, cfg)):>16} {gx:>14.1f} {gn:>14.1f} {gx / gn:>7.2f} {err:>12.1e}",
                  flush=True)
            if n not in best or gx / gn > best[n][0]:
                best[n] = (gx / gn, cfg)
    print("best per size:", {n: v[1] for n, v in best.items()})

    if args.bf16:
        import torch
        print(f"\nbf16 x bf16 -> f32 vs torch bf16 matmul (torch threads {torch.get_num_threads()})")
        print(f"{'size':>6} {'BM,BN,BK,nsg':>16} {'xejit GFLOP/s':>14} {'torch GFLOP/s':>14} {'ratio':>7} {'max rel err':>12}")
        for n in args.sizes:
            if n > 1024:
                print(f"{n:>6}  skipped (torch bf16 takes about a minute per run without AVX512-BF16)")
                continue
            a16 = usm.empty((n, n), np.int16); b16 = usm.empty((n, n), np.int16)
            ta, tb = torch.from_numpy(a16).view(torch.bfloat16), torch.from_numpy(b16).view(torch.bfloat16)
            ta.copy_(torch.randn(n, n)); tb.copy_(torch.randn(n, n))
            c = usm.empty((n, n), np.float32)
            ref = ta.double() @ tb.double()
            t0 = time.perf_counter()
            ta @ tb
            tt = time.perf_counter() - t0  # torch without AVX512-BF16 is very slow: time it once
            if tt < 1.0:
                tt = median_time(lambda: ta @ tb, args.reps)
            for cfg in configs:
                c[:] = np.nan
                time.sleep(0.2)
                tx = median_time(gemm_runner(n, cfg, ta, tb, c), args.reps)
                err = float((torch.from_numpy(c).double() - ref).abs().max() / ref.abs().max())
                gx, gt = 2 * n**3 / tx / 1e9, 2 * n**3 / tt / 1e9
                print(f"{n:>6} {','.join(map(str, cfg)):>16} {gx:>14.1f} {gt:>14.1f} {gx / gt:>7.2f} {err:>12.1e}",
                      flush=True)

    cfg = best[max(best)][1]
    # compile time per stage, cold (first compile in the process) and warm (same kernel again)
    bm, bn, bk, ns = cfg
    bk *= 3  # a kernel not built in this process yet (not a sweep config): the cold driver build is real
    print("\ncompile time per stage (ms), kernel", (bm, bn, bk, ns))
    x = np.zeros((16, 16), np.float32)
    rows = []
    for label in ("cold", "warm"):
        mod = matmul.compile_ir(x, x, x, 1, 1, 1, BM=bm, BN=bn, BK=bk, num_subgroups=ns)
        t0 = time.perf_counter()
        ck = compile_kernel(mod, "generic")
        total = time.perf_counter() - t0
        t0 = time.perf_counter()
        build_program(ck.spv, validate=False) if label == "cold" else None
        drv = time.perf_counter() - t0
        rows.append((label, dict(ck.timings), total, drv))
    stages = list(rows[0][1])
    print(f"{'':>6} " + " ".join(f"{s:>10}" for s in stages) + f" {'compile':>10} {'driver':>10}")
    for label, tm, total, drv in rows:
        print(f"{label:>6} " + " ".join(f"{tm[s] * 1e3:>10.1f}" for s in stages)
              + f" {total * 1e3:>10.1f} {drv * 1e3:>10.1f}")
    print("(warm driver build: 0 — programs are cached per process; a warm launch also hits the "
          "SPIR-V disk cache and skips compile_kernel entirely)")
    # launch through the disk cache in a fresh memo: measures the warm launch path
    device_launch.clear_memory_caches()
    n = 256
    a = usm.empty((n, n), np.float32); b = usm.empty((n, n), np.float32); c = usm.empty((n, n), np.float32)
    t0 = time.perf_counter()
    gemm_runner(n, cfg, a, b, c)()
    print(f"warm launch via the SPIR-V cache (program already built): {(time.perf_counter() - t0) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
