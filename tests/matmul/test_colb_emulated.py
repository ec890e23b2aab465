"""The library GEMM with a column-major B (``a @ b.T``, b stored [N, K]: transposed 2D block loads)
under ``XEJIT_EMULATE=pvc`` (and ``bmg``: its blocks of one array view take the same coordinates
plus immediate offsets) on the CPU device, against float64 numpy: in-bounds and edge tiles,
fp16 / bf16 / int8 / tf32."""
import numpy as np
import pytest

import xejit
from tests.helpers import check, f64, poisoned, rand, use_mode
from xejit.ir.core import i32
from xejit.kernels.gemm import configs_for, gemm_kernel


def _config(bm, bn, bk, nsg):
    return next(c for c in configs_for("pvc") if (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"],
                                                  c.num_subgroups) == (bm, bn, bk, nsg))


@pytest.mark.parametrize("target,dtype,tile,shape", [
    ("pvc", "f16", (64, 64, 16, 4), (64, 64, 64)),       # 32x32 subgroup tiles, in bounds
    ("pvc", "f16", (64, 64, 16, 4), (80, 72, 40)),       # M / N edges, a K tail
    ("pvc", "bf16", (64, 64, 16, 4), (64, 96, 48)),
    ("pvc", "f32", (64, 64, 16, 4), (72, 64, 40)),       # tf32: B blocks 8 deep
    ("pvc", "i8", (64, 128, 32, 8), (72, 100, 96)),      # int8: B blocks 32 deep; M / N edges
    ("bmg", "f16", (64, 64, 16, 4), (80, 72, 40)),
    ("bmg", "i8", (64, 128, 32, 8), (72, 100, 96)),
    # tf32's decode pick (8x64 subgroup tiles, BK=32, 256 GRF): an M edge, N past the first
    # workgroup (subgroups 88 columns in, partly and wholly out), a K tail of 8
    ("pvc", "f32", (8, 512, 32, 8), (5, 600, 72)),
    # the decode picks (autotuner.decode_b_kstep_limit: 8 KB of B a k-step), an M edge, N past the
    # first workgroup, several k-steps and a K tail: int8 8x128 subgroup tiles at BK=64 (a tail of
    # 16, half a DPAS K-block), fp16 at BK=32 (a tail of 8)
    ("pvc", "i8", (8, 512, 64, 4), (5, 600, 400)),
    ("pvc", "f16", (8, 512, 32, 4), (5, 600, 104)),
    ("pvc", "f32", (8, 512, 16, 4), (5, 600, 56)),       # tf32's: 8x128 tiles at BK=16, a tail of 8
    # tf32 on bmg (emulation does not version the loop: the fast version's coordinates are
    # tested in tests/codegen/xegpu/test_block_coords.py)
    pytest.param("bmg", "f32", (64, 64, 16, 4), (72, 64, 40), marks=pytest.mark.slow),
])
def test_library_gemm_column_major_b(monkeypatch, target, dtype, tile, shape):
    use_mode(monkeypatch, target)
    cfg = _config(*tile)
    M, N, K = shape
    rng = np.random.default_rng(M * 7 + N + K)
    a = rand(rng, (M, K), dtype)
    bt = rand(rng, (N, K), dtype)
    b = bt.T                                              # column-major view, no copy
    out_t = "i32" if dtype == "i8" else "f32" if dtype == "f32" else dtype
    c = poisoned((M, N), out_t)
    kw = dict(ACC=i32) if dtype == "i8" else dict(PRECISION="tf32") if dtype == "f32" else {}
    gemm_kernel[(xejit.cdiv(M, cfg.kwargs["BM"]), xejit.cdiv(N, cfg.kwargs["BN"]))](
        a, b, a, c, M, N, K, **cfg.kwargs, **kw, num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    ref = f64(a) @ f64(b)
    if dtype == "f32":     # tf32 inputs: 10-bit mantissas
        assert np.abs(f64(c) - ref).max() <= 1e-3 * np.abs(ref).max()
    else:
        check(c, ref, "int" if dtype == "i8" else dtype, scale_by_max=True)
