"""Row softmax (tile_reduce max/sum along dim 1 + tile_broadcast) and split-K GEMM (fp32
atomic_rmw_tile add) through ``kernel[grid]`` on the pvc and dg2 code paths (DPAS and 2D block
IO emulated on the CPU device), against float64 numpy. Parameters as in
tests/codegen/test_device.py (the generic path)."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.helpers import check, f64, poisoned, rand
from tests.kernels import matmul_splitk, softmax


@pytest.fixture
def emulate(monkeypatch, request):
    monkeypatch.delenv("XEJIT_INTERPRET", raising=False)
    if request.param == "generic":
        monkeypatch.delenv("XEJIT_EMULATE", raising=False)
    else:
        monkeypatch.setenv("XEJIT_EMULATE", request.param)
    return request.param


@pytest.mark.parametrize("emulate", ["pvc", "dg2"], indirect=True)
@pytest.mark.parametrize("M,N,BM,BN,ns", [(37, 48, 4, 64, 1), (37, 20, 8, 32, 4)])
def test_softmax_emulated(emulate, M, N, BM, BN, ns):
    rng = np.random.default_rng(11 + M + N + ns)
    x = rand(rng, (M, N), "f32")   # non-zero, |x| in [0.5, 1.5]
    y = poisoned((M, N), "f32")
    softmax[(xejit.cdiv(M, BM),)](x, y, BM=BM, BN=BN, num_subgroups=ns)
    assert np.isfinite(y).all()
    e = np.exp(f64(x) - f64(x).max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max()
    check(y, ref, "f32")


@pytest.mark.parametrize("emulate", ["pvc", "dg2"], indirect=True)
@pytest.mark.parametrize("ns", [1, 2])
def test_gemm_split_k_atomics_emulated(emulate, ns):
    rng = np.random.default_rng(5 + ns)
    M, N, K, BM, BN, BK, KS = 20, 36, 64, 8, 16, 8, 4
    a, b = rand(rng, (M, K), "f32"), rand(rng, (K, N), "f32")
    c = np.zeros((M, N), np.float32)          # the kernel accumulates into c
    matmul_splitk[(xejit.cdiv(M, BM), xejit.cdiv(N, BN), KS)](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK,
                                                              KSPLIT=KS, num_subgroups=ns)
    check(c, f64(a) @ f64(b), "f32", scale_by_max=True)


@xejit.kernel
def _row_reductions(x, ymax, ymin, ysum, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN]))
    xl.store_tile(xl.init_tile(ymax, [m, 0], [BM, 1]), xl.max(t, 1))
    xl.store_tile(xl.init_tile(ymin, [m, 0], [BM, 1]), xl.min(t, 1))
    xl.store_tile(xl.init_tile(ysum, [m, 0], [BM, 1]), xl.sum(t, 1))


@pytest.mark.parametrize("emulate", ["pvc", "dg2", "generic"], indirect=True)
@pytest.mark.parametrize("dtype,BM,BN", [("i32", 8, 48), ("f32", 4, 16), ("f32", 16, 64), ("f16", 2, 32)])
def test_row_reductions_emulated(emulate, dtype, BM, BN):
    """Row max / min / sum of blocks of 2 to 16 rows and one to four
    16-lane column groups (and on the generic target): the transposing shuffle butterfly
    (lowering_base.reduce_rows_across_lanes) puts row r's total in lane r; padded columns and
    rows beyond the array stay out."""
    rng = np.random.default_rng(BM * 100 + BN)
    M, N = 2 * BM + 1, BN - 3
    x = rand(rng, (M, N), dtype)
    outs = [poisoned((M, 1), dtype) for _ in range(3)]
    _row_reductions[(xejit.cdiv(M, BM),)](x, *outs, BM=BM, BN=BN)
    ref = f64(x)
    kind = "int" if dtype == "i32" else dtype
    check(outs[0], ref.max(1, keepdims=True), kind)
    check(outs[1], ref.min(1, keepdims=True), kind)
    check(outs[2], ref.sum(1, keepdims=True), kind, scale_by_max=True)
