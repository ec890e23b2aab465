"""How long the CPU device's driver takes to build GEMM kernels of the generic target.

    python benchmarks/bench_build_time.py                  # fp32, fp16, bf16, int8; fp32/fp16 column-major B
    python benchmarks/bench_build_time.py --tile 32 32 32  # (fp16 column-major B 32x32x32: ~150 s before
                                                           #  the k loops of docs/compiler.md, now ~5 s)

For each case the kernel is compiled (frontend -> SPIR-V, timed) and then built by the OpenCL
CPU driver (``xejit.runtime.build_program``, timed), each in a fresh process so that no build
is reused. fp32 is the reference: the figures are comparable within one run only (the machine
may be shared). Prints a table; nothing is launched.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
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
t2 = time.perf_counter()
print(json.dumps({{"compile_s": t1 - t0, "build_s": t2 - t1, "spv_bytes": len(ck.spv)}}))
"""

CASES = [("fp32", False), ("fp16", False), ("bf16", False), ("int8", False), ("fp32", True), ("fp16", True)]


def run(dtype: str, col_b: bool, bm: int, bn: int, bk: int, timeout: float) -> dict:
    code = ONE.format(root=str(ROOT), dtype=dtype, col_b=col_b, bm=bm, bn=bn, bk=bk)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                             check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": (out.stderr.strip().splitlines() or ["?"])[-1][:120]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tile", nargs=3, type=int, default=[16, 32, 32], metavar=("BM", "BN", "BK"))
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args()
    cases = CASES
    print(f"GEMM {args.tile[0]}x{args.tile[1]}x{args.tile[2]} tiles, generic target, OpenCL CPU driver")
    print(f"{'dtype':6} {'B':4} {'compile s':>9} {'build s':>8} {'vs fp32':>8} {'SPIR-V B':>9}")
    ref = None
    for dtype, col_b in cases:
        r = run(dtype, col_b, *args.tile, args.timeout)
        if "error" in r:
            print(f"{dtype:6} {'col' if col_b else 'row':4} ERROR {r['error']}")
            continue
        ref = ref if ref is not None else r["build_s"]
        print(f"{dtype:6} {'col' if col_b else 'row':4} {r['compile_s']:9.2f} {r['build_s']:8.1f} "
              f"{r['build_s'] / ref:7.1f}x {r['spv_bytes']:9d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
