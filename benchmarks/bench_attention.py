"""FlashAttention forward and backward: xejit.attention vs torch's SDPA on the same inputs in the
same run (the CPU device here, target ``generic``; any device xejit picks otherwise).

    python benchmarks/bench_attention.py [--quick] [--reps 5] [--dtype float32]
    python benchmarks/bench_attention.py --device-code [pvc bmg lnl dg2] [--jobs 2]

Per shape: the first call (autotuning + driver builds, cached on disk afterwards), then the
median of ``--reps`` runs after one warm-up for xejit and for torch back to back; the backward is
``loss.backward()`` of ``(out * w).sum()`` (xejit: its DSL kernels; torch: SDPA's CPU backward).
GFLOP/s count 4*B*H*Sq*Sk*D for the forward (2.5x that for the backward), halved when causal.
Writes ``benchmarks/results/attention-<target>-<date>.json``. Timings vary with machine load; the
ratio against torch in the same run is the figure to compare.

``--device-code``: the GPU compile report, no GPU needed: for each target, kernel (forward, dq,
dk/dv), head dim 64 and 128 and fp16 / bf16, the candidate configs in order through Intel's
compiler until one neither spills nor uses private memory in its hot loop (the autotuner's
verdict, so the config the library takes untuned): GRF mode and count, spill and private bytes,
DPAS per step (hot loop, and by the tile arithmetic), 2D block loads and instructions per DPAS in
the hot loop. Writes ``benchmarks/results/attention-device-code.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch
import torch.nn.functional as F

import xejit
from xejit.autotuner import current_target

#        B  H  Hkv Sq    Sk    D    causal  name
SHAPES = [
    (1, 8, 8, 512, 512, 64, False, "prefill 512, D=64"),
    (1, 8, 8, 512, 512, 64, True, "prefill 512, D=64, causal"),
    (1, 8, 2, 512, 512, 128, True, "prefill 512, D=128, GQA 4:1, causal"),
    (4, 8, 8, 1, 2048, 64, False, "decode, 2048 keys"),
]
QUICK = [(1, 4, 4, 128, 128, 64, True, "prefill 128, D=64, causal (quick)")]


def median(fn, reps: int) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def flops(B, H, Sq, Sk, D, causal) -> float:
    f = 4.0 * B * H * Sq * Sk * D
    return f / 2 if causal and Sq == Sk else f


def run_shape(shape, dtype, reps, backward):
    B, H, Hkv, Sq, Sk, D, causal, name = shape
    g = torch.Generator().manual_seed(0)
    mk = lambda *s: (torch.randn(*s, generator=g) + 0.1).to(dtype)
    q, k, v, w = mk(B, H, Sq, D), mk(B, Hkv, Sk, D), mk(B, Hkv, Sk, D), mk(B, H, Sq, D)
    row = {"shape": name, "B": B, "H": H, "Hkv": Hkv, "Sq": Sq, "Sk": Sk, "D": D, "causal": causal}
    t = time.perf_counter()
    with torch.no_grad():
        out = xejit.attention(q, k, v, causal=causal)
    row["first_call_s"] = time.perf_counter() - t
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=True)
    row["max_rel_err"] = float((out.double() - ref).abs().max() / ref.abs().max())
    with torch.no_grad():
        tx = median(lambda: xejit.attention(q, k, v, causal=causal), reps)
        tt = median(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True), reps)
    fl = flops(B, H, Sq, Sk, D, causal)
    row.update(fwd_xejit_ms=tx * 1e3, fwd_torch_ms=tt * 1e3, fwd_xejit_gflops=fl / tx / 1e9,
               fwd_torch_gflops=fl / tt / 1e9, fwd_ratio=tt / tx)
    if backward:
        def bwd(fn):
            qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
            return lambda: (fn(qq, kk, vv) * w).sum().backward()
        xf = bwd(lambda a, b, c: xejit.attention(a, b, c, causal=causal))
        tf = bwd(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal, enable_gqa=True))
        t = time.perf_counter()
        xf()
        row["bwd_first_call_s"] = time.perf_counter() - t
        tbx, tbt = median(xf, reps), median(tf, reps)
        row.update(fwdbwd_xejit_ms=tbx * 1e3, fwdbwd_torch_ms=tbt * 1e3, fwdbwd_ratio=tbt / tbx,
                   fwdbwd_xejit_gflops=3.5 * fl / tbx / 1e9, fwdbwd_torch_gflops=3.5 * fl / tbt / 1e9)
    return row


# --- the GPU compile report (Intel's compiler; no GPU needed) -----------------------------------

DEVICE_TARGETS = ["pvc", "bmg", "lnl", "dg2"]
KINDS = ["fwd", "dq", "dkdv"]


def device_row(job):
    from xejit.kernels.attention import compile_report
    return compile_report(*job)


def device_table(rows) -> str:
    head = (f"{'target':6} {'kernel':6} {'D':>4} {'dtype':8} {'config':12} {'grf':7} {'GRF':>4} {'spill':>6} "
            f"{'priv':>5} {'dpas':>5} {'tile':>5} {'ld2d':>5} {'/dpas':>6}  chosen")
    out = [head, "-" * len(head)]
    for r in rows:
        lead = f"{r['target']:6} {r['kind']:6} {r['D']:>4} {r['dtype']:8} {r['config']:12} {r['grf_mode']:7}"
        if "error" in r:
            out.append(f"{lead} ERROR {r['error']}")
            continue
        out.append(f"{lead} {r['grf']:>4} {r['spill']:>6} {r['private']:>5} {r['dpas']:>5} {r['tile_dpas']:>5} "
                   f"{r['block_loads']:>5} {r['per_dpas']!s:>6}  {'<- chosen' if r.get('chosen') else ''}")
    return "\n".join(out)


def device_report(targets, jobs: int) -> list[dict]:
    from concurrent.futures import ProcessPoolExecutor

    from xejit.codegen.intel_compiler import require_toolchain
    tc = require_toolchain()
    work = [(t, k, d, dt) for t in targets for k in KINDS for d in (64, 128) for dt in ("float16", "bfloat16")]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        rows = [r for rs in pool.map(device_row, work) for r in rs]
    print(f"# Intel's compiler: {tc.describe()}; {len(rows)} builds in {time.perf_counter() - t0:.0f} s")
    print("# dpas / ld2d / per-dpas: the hot loop (innermost, fast copy); tile: DPAS of one step by the tile "
          "arithmetic; chosen: the first candidate without spill (else the least bad)")
    print(device_table(rows))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one small shape")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--shapes", type=int, nargs="*", help="indices into SHAPES")
    ap.add_argument("--device-code", nargs="*", metavar="TARGET",
                    help=f"print the GPU compile report instead (targets: default {' '.join(DEVICE_TARGETS)})")
    ap.add_argument("--jobs", type=int, default=1, help="parallel builds of the GPU compile report")
    args = ap.parse_args()
    if args.device_code is not None:
        rows = device_report(args.device_code or DEVICE_TARGETS, args.jobs)
        out_dir = os.path.join(os.path.dirname(__file__), "results")
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "attention-device-code.json"), "w") as f:
            json.dump(rows, f, indent=1)
        return
    dtype = getattr(torch, args.dtype)
    shapes = QUICK if args.quick else [SHAPES[i] for i in (args.shapes if args.shapes else range(len(SHAPES)))]
    target = current_target()
    meta = {"target": target, "dtype": args.dtype, "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "date": time.strftime("%Y-%m-%d %H:%M")}
    print(f"# xejit.attention vs torch SDPA, {args.dtype}, target {target}, {meta['cpus']} CPUs, "
          f"torch {torch.__version__} ({meta['torch_threads']} threads)")
    rows = []
    for s in shapes:
        r = run_shape(s, dtype, args.reps, not args.no_backward and s[3] > 1)   # no decode backward
        rows.append(r)
        line = (f"{r['shape']:<40} fwd xejit {r['fwd_xejit_ms']:8.2f} ms ({r['fwd_xejit_gflops']:6.2f} GF/s) "
                f"torch {r['fwd_torch_ms']:8.2f} ms ({r['fwd_torch_gflops']:6.2f}) ratio {r['fwd_ratio']:.2f}x")
        if "fwdbwd_xejit_ms" in r:
            line += (f" | fwd+bwd xejit {r['fwdbwd_xejit_ms']:8.2f} ms torch {r['fwdbwd_torch_ms']:8.2f} ms "
                     f"ratio {r['fwdbwd_ratio']:.2f}x")
        line += f" | first call {r['first_call_s']:.1f} s, err {r['max_rel_err']:.1e}"
        print(line, flush=True)
    out_dir = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"attention-{target}-{time.strftime('%Y%m%d-%H%M')}.json")
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(f"# wrote {path}")


if __name__ == "__main__":
    main()
