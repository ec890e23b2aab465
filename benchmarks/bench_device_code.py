"""What Intel's GPU compiler makes of the library GEMM: one row per target, dtype and config.

    python benchmarks/bench_device_code.py                 # pvc bmg lnl ptl dg2; fp16 bf16 fp32 int8
    python benchmarks/bench_device_code.py --targets pvc --dtypes fp16 --jobs 2
    python benchmarks/bench_device_code.py --variants colB bias_relu tf32 --targets pvc bmg

For each config of ``xejit.kernels.gemm.configs_for(target)`` (4096^3, or M x 4096 x 4096 with ``--M``; row-major operands) the
kernel is compiled for the target and built by Intel's compiler (ocloc) in the config's
``grf_mode``. ``--variants`` picks the cases: ``rowB`` (a @ b, row-major), ``colB`` (a @ b.T with b
stored [N, K]: transposed / VNNI-transposed 2D block loads), ``bias_relu`` (the bias + ReLU epilogue),
``tf32`` (fp32 operands on DPAS; the fp32 row of rowB runs on FMA), ``colB_tf32`` (both).
``--transposed-b-blocks 2`` loads two DPAS B blocks per transposed load of column-major B (the
fewest loads; Intel's compiler then moves their registers) instead of one. The row gives the static verdict of the autotuner's resource model, the compiler's
GRF count, spill and private bytes, and the hot k-loop's mix -- DPAS (next to the tile
arithmetic's count), 2D block loads, prefetches, spill sends, instructions per DPAS and the
ideal (each DPAS, load and prefetch once, plus four instructions of loop control). For
column-major B, ``ld/min`` gives the loads next to the fewest a k-step could take (the blocking
plan with each transposed load as tall as legal; these are the A and B loads, the hot loop's count
is what Intel's compiler issued). Writes
``benchmarks/results/device_code.json`` (and ``.png`` with matplotlib). No GPU is needed or used.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

# fp32: the library GEMM asks for no tf32, so DPAS targets run it on FMA (a reported fallback).
DTYPES = {"fp16": (np.float16, np.float16, "f32"), "bf16": ("bfloat16", "bfloat16", "f32"),
          "fp32": (np.float32, np.float32, "f32"), "int8": (np.int8, np.int32, "i32")}


VARIANTS = ("rowB", "colB", "bias_relu", "tf32", "colB_tf32")


def _arrays(dtype: str, M: int, N: int, K: int, col_b: bool = False):
    """Arrays of the dtypes and layouts to specialize on (compile only: nothing is launched)."""
    a_t, c_t, _ = DTYPES[dtype]
    if a_t == "bfloat16":
        import torch
        b = torch.empty((N, K), dtype=torch.bfloat16).T if col_b else torch.empty((K, N), dtype=torch.bfloat16)
        return torch.empty((M, K), dtype=torch.bfloat16), b, torch.empty((M, N), dtype=torch.bfloat16)
    b = np.empty((N, K), a_t).T if col_b else np.empty((K, N), a_t)
    return np.empty((M, K), a_t), b, np.empty((M, N), c_t)


def one(job: tuple) -> dict:
    target, dtype, index, variant, M, *per_load = job
    import xejit.ir.core as irc
    from xejit.codegen.passes import blocking
    if per_load:
        blocking.TRANSPOSED_B_BLOCKS_PER_LOAD = per_load[0]
    from xejit.autotuner import estimate_gemm
    from xejit.kernels.gemm import configs_for, gemm_kernel

    cfg = configs_for(target)[index]
    N = K = 4096
    a, b, c = _arrays(dtype, M, N, K, col_b=variant.startswith("colB"))
    acc = irc.i32 if dtype == "int8" else irc.f32
    kw = dict(cfg.kwargs)
    if variant == "bias_relu":
        kw.update(HAS_BIAS=True, ACT="relu")
    if variant.endswith("tf32"):
        kw.update(PRECISION="tf32")
    row = {"target": target, "dtype": dtype, "variant": variant, "M": M, "config": f"{kw['BM']}x{kw['BN']}x{kw['BK']}/{cfg.num_subgroups}sg",
           "grf_mode": cfg.grf_mode, "num_stages": cfg.num_stages, "cfg": str(cfg)}
    est = estimate_gemm(target, kw["BM"], kw["BN"], kw["BK"], cfg.num_subgroups, cfg.grf_mode, a, b, c, acc,
                        kw.get("PRECISION"))
    row["static"] = "; ".join(est["problems"]) or "fits"
    row["sg_tile"] = est["sg_tile"]
    # the fewest load messages a k-step could take (transposed loads as tall as legal)
    row["min_loads"] = est.get("min_loads_per_kstep")
    try:
        t0 = time.perf_counter()
        bias = c[0] if variant == "bias_relu" else a
        ck = gemm_kernel.compile(a, b, bias, c, M, N, K, target=target, ACC=acc, **kw,
                                 num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages, grf_mode=cfg.grf_mode)
        bin_ = ck.device_binary
        row.update(bin_.as_dict())
        row["compile_s"] = round(time.perf_counter() - t0, 2)
        row["fallbacks"] = len(ck.fallbacks)
        if est["sg_tile"]:
            from xejit.codegen.targets import get_target
            t = get_target(target)
            kk = t.dpas.k_of({"fp16": "fp16", "bf16": "bf16", "int8": "int8",
                              "fp32": "tf32" if variant.endswith("tf32") else ""}.get(dtype, ""))
            sm, sn = est["sg_tile"]
            row["dpas_per_kstep"] = (-(-sm // t.dpas.max_m)) * (sn // t.dpas.n) * (kw["BK"] // kk) if kk else None
    except Exception as e:  # a row that failed says so; the table is still printed
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return row


def _loads(r: dict) -> str:
    """The hot loop's 2D block loads, and where transposed (column-major B) loads could be fewer
    (as tall as the target allows: two DPAS B blocks a load), that minimum after a slash."""
    ld = (r.get("hot_loop") or {}).get("block_loads", "-")
    fewest = r.get("min_loads")
    if fewest is None or r["variant"] not in ("colB", "colB_tf32"):
        return str(ld)
    return f"{ld}/{fewest}"


def table(rows: list[dict]) -> str:
    head = (f"{'target':6} {'dtype':5} {'variant':9} {'config':18} {'grf':7} {'static':6} {'GRF':>4} {'spill':>6} {'priv':>5} "
            f"{'dpas':>5} {'tile':>5} {'ld/min':>6} {'pf':>3} {'spl':>4} {'instr':>6} {'/dpas':>6} {'ideal':>6}")
    out = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            # a config the autotuner's resource model prunes need not build: its reason, not an error
            what = f"pruned: {r['static']}" if r["static"] != "fits" else f"ERROR {r['error']}"
            out.append(f"{r['target']:6} {r['dtype']:5} {r['variant']:9} {r['config']:18} {r['grf_mode']:7} {what}")
            continue
        h = r.get("hot_loop") or {}
        out.append(
            f"{r['target']:6} {r['dtype']:5} {r['variant']:9} {r['config']:18} {r['grf_mode']:7} {'ok' if r['static'] == 'fits' else 'prune':6} "
            f"{r['grf_count']:>4} {r['spill_bytes']:>6} {r['private_bytes']:>5} {h.get('dpas', '-'):>5} "
            f"{str(r.get('dpas_per_kstep', '-')):>5} {_loads(r):>6} {h.get('prefetches', '-'):>3} "
            f"{h.get('spill_sends', '-'):>4} {h.get('instructions', '-'):>6} {str(h.get('per_dpas', '-')):>6} "
            f"{str(h.get('ideal_per_dpas', '-')):>6}")
    return "\n".join(out)


def picks(rows: list[dict]) -> list[dict]:
    """Per target, dtype and variant, the row of the config the autotuner launches for Mx4096x4096
    without timing runs (``XEJIT_MATMUL_TUNE=0``): of the configs neither its resource model, its
    shape prune nor Intel's compiler prunes (spill, private memory in the hot loop), the first by
    ``matmul._perf_model`` in ``configs_for`` order. With timing runs on a GPU it times these same
    configs."""
    from xejit.ir.core import f32, i32
    from xejit.kernels.gemm import configs_for
    from xejit.matmul import _perf_model, _shape_prune
    out, groups = [], {}
    for r in rows:
        groups.setdefault((r["target"], r["dtype"], r["variant"], r.get("M", 4096)), []).append(r)
    for (target, dtype, variant, M), grp in groups.items():
        shaped = {str(cfg) for cfg in _shape_prune(configs_for(target), {"M": M, "N": 4096})}
        ok = [r for r in grp if "error" not in r and r["static"] == "fits" and not r["spill_bytes"]
              and not ((r.get("hot_loop") or {}).get("private_sends")) and r["cfg"] in shaped]
        a, b, c = _arrays(dtype, M, 4096, 4096, col_b=variant.startswith("colB"))
        extra = {"PRECISION": "tf32"} if variant.endswith("tf32") else {}

        def cost(r: dict) -> float:
            bm, bn, bk = map(int, r["config"].split("/")[0].split("x"))
            return _perf_model(M, 4096, 4096, bm, bn, bk, int(r["config"].split("/")[1][:-2]), target=target,
                               a=a, b=b, c=c, ACC=i32 if dtype == "int8" else f32, grf_mode=r["grf_mode"], **extra)
        if ok:
            out.append(min(ok, key=cost))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", nargs="+", default=["pvc", "bmg", "lnl", "ptl", "dg2"])
    p.add_argument("--dtypes", nargs="+", default=["fp16", "bf16", "fp32", "int8"], choices=list(DTYPES))
    p.add_argument("--variants", nargs="+", default=["rowB"], choices=VARIANTS)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--M", type=int, default=4096, help="rows of A and C (8: decode; N = K = 4096)")
    p.add_argument("--transposed-b-blocks", type=int, choices=(1, 2), default=None,
                   help="DPAS B blocks per transposed load of column-major B (default: the compiler's)")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "device_code.json"))
    args = p.parse_args()
    from xejit.codegen.intel_compiler import require_toolchain
    from xejit.kernels.gemm import configs_for
    tc = require_toolchain()
    extra = (args.transposed_b_blocks,) if args.transposed_b_blocks else ()
    jobs = [(t, d, i, v, args.M, *extra) for v in args.variants for t in args.targets for d in args.dtypes
            for i in range(len(configs_for(t)))
            if not (v.endswith("tf32") and d != "fp32") and not (v == "colB" and d == "fp32")]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one, jobs))
    print(f"Intel's compiler: {tc.describe()}; {len(rows)} builds in {time.perf_counter() - t0:.0f} s")
    print(table(rows))
    print(f"\nthe autotuner's pick for {args.M}x4096x4096 (no timing runs: its perf model over the configs it keeps):")
    print(table(picks(rows)))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"toolchain": tc.describe(), "rows": rows, "picks": picks(rows)}, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        ok = [r for r in rows if "error" not in r and (r.get("hot_loop") or {}).get("per_dpas")]
        fig, ax = plt.subplots(figsize=(max(8, len(ok) * 0.25), 4))
        xs = range(len(ok))
        ax.bar(xs, [r["hot_loop"]["per_dpas"] for r in ok], label="instructions per DPAS (hot loop)")
        ax.scatter(xs, [r["hot_loop"]["ideal_per_dpas"] for r in ok], color="k", marker="_", s=80, label="ideal")
        ax.set_xticks(list(xs), [f"{r['target']} {r['dtype']} {r['variant']} {r['config']}" for r in ok], rotation=90, fontsize=6)
        ax.set_yscale("log")
        ax.legend()
        fig.tight_layout()
        fig.savefig(Path(args.out).with_suffix(".png"), dpi=120)
    except ImportError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
