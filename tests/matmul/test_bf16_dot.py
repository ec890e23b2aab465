"""bf16 GEMMs by the CPU's bf16 dot products (xejit.cpu_simd_gemm, codegen/cpu_bf16_dot.py):
results against float64 references with poisoned outputs, every edge of the blocking (rows past
a multiple of MR, columns past a panel, odd K, K = 1, strided and column-major operands), the
route ``xejit.matmul`` takes, and what happens where the instruction or the driver's support is
missing. The kernels' tests skip, saying why, on a CPU without AVX512_BF16."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xejit
from xejit import cpu_simd_gemm
from xejit.codegen import cpu_bf16_dot, cpu_simd, spirv
from xejit.errors import BuildError
from tests.matmul.backend import requires_device
from tests.matmul.helpers import check, poisoned, rand, reference

xm = sys.modules["xejit.matmul"]   # (xejit.matmul is also the function)
BF16 = cpu_bf16_dot.INTRINSIC


@pytest.fixture
def dot_kernels():
    """Skip unless the default device runs the bf16 dot-product kernels."""
    if not cpu_simd_gemm.available():
        pytest.skip("the CPU device here has no bf16 dot products (AVX512_BF16) or its driver does not resolve them")


@pytest.fixture
def dot_calls(monkeypatch):
    seen = []
    real = cpu_simd_gemm.gemm
    monkeypatch.setattr(cpu_simd_gemm, "gemm", lambda a, b, c: seen.append((a.shape, b.shape)) or real(a, b, c))
    monkeypatch.setattr(xm, "_RECIPES", {})   # (remembered choices would skip the spy's count)
    return seen


def _bf16(rng, shape, layout="C"):
    """Random non-zero bf16 values as a numpy array (ml_dtypes) of the given memory layout."""
    import ml_dtypes
    x = (rng.standard_normal(shape) + 0.1).astype(ml_dtypes.bfloat16)
    return np.asfortranarray(x) if layout == "F" else x


def _check(c, a, b):
    check(c.astype(np.float32), a.astype(np.float64) @ b.astype(np.float64), "bfloat16")


def test_the_modules_call_the_intrinsic_by_name_and_pass_spirv_val():
    """The placeholder import is renamed to the intrinsic in the SPIR-V (OpName and the linkage
    literal), nothing else named after it is left, and every module is valid."""
    for name in cpu_simd.MODULES:
        spv = cpu_simd.spirv_module(name)
        spirv.validate(spv)
        text = spirv.disassemble(spv)
        if name.startswith("dot_") and name != "dot_bf16_pack_b" and "f32" not in name:   # (the packing, the
            # GEMVs and fp32 FMAs call nothing)
            assert f'LinkageAttributes "{BF16}" Import' in text, name
        assert cpu_bf16_dot._PLACEHOLDER not in text, name
        assert spirv.entry_points(spv) == [name]


def test_rename_imports_leaves_other_names_and_rewrites_word_counts():
    spv = cpu_simd.spirv_module("dot_bf16_probe")
    back = spirv.rename_imports(spv, {BF16: cpu_bf16_dot._PLACEHOLDER})
    assert spirv.rename_imports(back, {cpu_bf16_dot._PLACEHOLDER: BF16}) == spv
    assert len(back) < len(spv)   # a shorter literal: fewer words, the counts rewritten
    spirv.validate(back)
    assert spirv.rename_imports(spv, {"no such name": "x"}) == spv


@requires_device
@pytest.mark.parametrize("M,N,K,a_layout,b_layout,lib", [
    (100, 90, 270, "C", "C", "numpy"),     # rows past a multiple of MR, columns past a panel
    (300, 130, 301, "C", "F", "numpy"),    # an odd K; a column-major b packed by 32-bit words
    (64, 256, 64, "strided", "C", "torch"),   # a's rows longer than K; whole panels; torch tensors
])
def test_bf16_gemms_take_the_dot_kernels(M, N, K, a_layout, b_layout, lib, dot_kernels, dot_calls):
    rng = np.random.default_rng(M + N + K)
    a = _bf16(rng, (M, K + 7))[:, 3:K + 3] if a_layout == "strided" else _bf16(rng, (M, K), a_layout)
    b = _bf16(rng, (K, N), b_layout)
    a0, b0 = a.copy(), b.copy()
    if lib == "torch":
        import torch
        a, b = (torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16) for x in (a, b))
    out = poisoned((M, N), "bfloat16", lib) if lib == "torch" else np.full((M, N), np.nan, a0.dtype)
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b) if lib == "torch" else a0.astype(np.float64) @ b0.astype(np.float64), "bfloat16")
    assert dot_calls and dot_calls[0] == ((M, K), (K, N))
    if lib == "numpy":
        np.testing.assert_array_equal(a.view(np.uint16), a0.view(np.uint16))   # operands not written
        np.testing.assert_array_equal(b.view(np.uint16), b0.view(np.uint16))
        _check(xejit.matmul(a, b), a0, b0)   # the repeated call (the packed recipe), the scratch reused


@pytest.fixture
def launched(monkeypatch):
    """The names of the kernels cpu_simd_gemm runs."""
    seen = []
    real = cpu_simd_gemm._run
    monkeypatch.setattr(cpu_simd_gemm, "_run", lambda launch, *args: seen.append(launch.name) or real(launch, *args))
    monkeypatch.setattr(cpu_simd_gemm._SCRATCH, "plans", {})
    return seen


PACKED = ["dot_bf16_pack_b", "dot_bf16_gemm"]
ROWS = ["dot_bf16_gemm_rows"]


@requires_device
@pytest.mark.parametrize("M,N,K,b_cols,kernels", [
    (1, 1, 1, None, PACKED),      # K = 1: only the odd tail; a partial panel's per-element stores
    (7, 65, 1, None, PACKED),
    (65, 64, 2, None, PACKED),    # one pair; a row past MR; above ROWS_MAX_M rows
    (13, 17, 3, None, PACKED),
    (1, 200, 1000, None, PACKED),
    (6, 64, 2, None, ROWS),       # b in place: one pair
    (3, 32, 1, None, ROWS),       # in place, K = 1 (the single-row pair)
    (9, 96, 37, 130, ROWS),       # in place, odd K, b's rows longer than N (a column slice)
    (64, 32, 300, None, ROWS),    # ROWS_MAX_M rows
])
def test_gemm_at_the_edges(M, N, K, b_cols, kernels, dot_kernels, launched):
    """Directly (no size threshold), both ways: B packed, or (at most ROWS_MAX_M rows, a
    row-major B whose N is a multiple of ROWS_NR) read in place."""
    rng = np.random.default_rng(M * 31 + N + K)
    a = _bf16(rng, (M, K))
    b = _bf16(rng, (K, b_cols))[:, 5:5 + N] if b_cols else _bf16(rng, (K, N))
    c = np.full((M, N), np.nan, a.dtype)
    cpu_simd_gemm.gemm(a, b, c)
    _check(c, a, b)
    assert launched == kernels


@requires_device
@pytest.mark.parametrize("M,N,K,kernels", [(70, 64, 41, PACKED), (9, 96, 40, ROWS)])
@pytest.mark.parametrize("b_kind", ["slice", "every_other", "broadcast"])
def test_gemm_takes_any_pitch(M, N, K, kernels, b_kind, dot_kernels, launched):
    """Rows of a and c longer than K and N (c's other columns stay poisoned), and b a column
    slice (row pitch past N), every other row and third column (the element packing over whole
    panels), or one row broadcast (row stride 0); both kernels where they apply."""
    rng = np.random.default_rng(M + N + K)
    a_wide = _bf16(rng, (M, K + 9))
    a = a_wide[:, 4:4 + K]
    if b_kind == "slice":
        b = _bf16(rng, (K, N + 40))[:, 7:7 + N]
    elif b_kind == "every_other":
        b = _bf16(rng, (2 * K, 3 * N))[::2, ::3]
    else:
        b = np.broadcast_to(_bf16(rng, (1, N)), (K, N))
    c_wide = np.full((M, N + 11), np.nan, a.dtype)
    c = c_wide[:, 6:6 + N]
    cpu_simd_gemm.gemm(a, b, c)
    _check(c, a, b)
    rest = np.concatenate([c_wide[:, :6], c_wide[:, 6 + N:]], axis=1).astype(np.float32)
    assert np.isnan(rest).all()   # nothing stored outside c
    in_place = b_kind != "every_other" and kernels == ROWS
    assert launched == (ROWS if in_place else PACKED)


@requires_device
def test_gemm_of_an_empty_sum_is_zeros(dot_kernels):
    import ml_dtypes
    c = np.full((5, 7), np.nan, ml_dtypes.bfloat16)
    cpu_simd_gemm.gemm(np.ones((5, 0), c.dtype), np.ones((0, 7), c.dtype), c)
    assert (c.astype(np.float32) == 0).all()


@requires_device
@pytest.mark.parametrize("M,b_layout,route", [(2, "C", "gemv"), (3, "C", "dot"), (8, "C", "dot"),
                                              (8, "F", "bt"), (9, "F", "bt")])
def test_few_rows_take_the_dot_kernels_only_where_b_is_read_in_place(M, b_layout, route, dot_kernels, dot_calls,
                                                                    bt_calls, monkeypatch):
    """From _DOT_BF16_MIN_M rows; up to GEMV_MAX_M only with a row-major b (packing b would cost
    more than a GEMV kernel: below, the explicit-SIMD GEMV; a column-major b takes the kernels that read it in place,
    up to _BT_MAX_M rows), results against float64 either way."""
    import torch
    from tests.matmul.helpers import spy_gemv_calls
    gemv = spy_gemv_calls(monkeypatch, "_gemv", "_gemv_simd")
    rng = np.random.default_rng(M)
    a, b = rand(rng, (M, 1024), "bfloat16", "torch"), rand(rng, (1024, 256), "bfloat16", "torch")
    if b_layout == "F":
        b = b.t().contiguous().t()
    out = poisoned((M, 256), "bfloat16", "torch")
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), "bfloat16")
    assert (len(dot_calls), len(gemv), len(bt_calls)) == {"dot": (1, 0, 0), "gemv": (0, 1, 0),
                                                          "bt": (0, 0, 1)}[route], (dot_calls, gemv, bt_calls)
    assert isinstance(out, torch.Tensor)


@requires_device
@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 150), K=st.integers(1, 90), b_layout=st.sampled_from("CF"),
       seed=st.integers(0, 2 ** 16))
def test_gemm_matches_float64(M, N, K, b_layout, seed):
    if not cpu_simd_gemm.available():
        pytest.skip("no bf16 dot products on this CPU device")
    rng = np.random.default_rng(seed)
    a, b = _bf16(rng, (M, K)), _bf16(rng, (K, N), b_layout)
    c = np.full((M + 2, N), np.nan, a.dtype)
    cpu_simd_gemm.gemm(a, b, c[1:M + 1])
    _check(c[1:M + 1], a, b)
    assert np.isnan(c[0].astype(np.float32)).all() and np.isnan(c[M + 1].astype(np.float32)).all()   # no row past c


def test_gemm_rejects_what_it_cannot_take():
    import ml_dtypes
    a, b = np.ones((8, 8), ml_dtypes.bfloat16), np.ones((8, 8), ml_dtypes.bfloat16)
    with pytest.raises(TypeError, match="bfloat16"):
        cpu_simd_gemm.gemm(a, b, np.empty((8, 8), np.float16))
    with pytest.raises(ValueError, match="unit column strides"):
        cpu_simd_gemm.gemm(np.asfortranarray(a), b, np.empty((8, 8), a.dtype))
    with pytest.raises(ValueError, match="matching shapes"):
        cpu_simd_gemm.gemm(a, b, np.empty((8, 9), a.dtype))


@requires_device
def test_without_the_dot_kernels_bf16_takes_the_fp32_packed_kernels(monkeypatch, dot_calls):
    """Where the CPU has no bf16 dot products (here: said so), the packed kernels widen
    bf16 to fp32 as before; the result is the same within the bf16 tolerance."""
    monkeypatch.setattr(cpu_simd_gemm, "available", lambda: False)
    rng = np.random.default_rng(5)
    import torch
    a, b = rand(rng, (100, 130), "bfloat16", "torch"), rand(rng, (130, 90), "bfloat16", "torch")
    out = poisoned((100, 90), "bfloat16", "torch")
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), "bfloat16")
    assert dot_calls == []
    assert isinstance(out, torch.Tensor)


@requires_device
def test_the_switch_and_a_foreign_target_arch_turn_the_dot_kernels_off(monkeypatch, dot_calls):
    """XEJIT_CPU_BF16_DOT=0 (read per call: the bf16 GEMM after it takes the fp32 kernels) and
    a CL_CONFIG_CPU_TARGET_ARCH (code for another CPU) turn them off."""
    rng = np.random.default_rng(3)
    a, b = rand(rng, (70, 80), "bfloat16", "torch"), rand(rng, (80, 96), "bfloat16", "torch")
    monkeypatch.setenv("XEJIT_CPU_BF16_DOT", "0")
    assert not cpu_bf16_dot.cpu_has_bf16_dot() and not cpu_simd_gemm.available()
    check(xejit.matmul(a, b), reference(a, b), "bfloat16")
    assert dot_calls == []
    monkeypatch.setenv("XEJIT_CPU_BF16_DOT", "1")
    monkeypatch.setenv("CL_CONFIG_CPU_TARGET_ARCH", "corei7-avx")   # code built for another CPU
    assert not cpu_bf16_dot.cpu_has_bf16_dot()


@requires_device
def test_a_driver_that_does_not_resolve_the_intrinsic_is_not_used(monkeypatch):
    """The probe's build failing (a driver without the intrinsic) or its result wrong means not
    available: bf16 GEMMs keep the fp32 kernels rather than fail."""
    def fails(*args):
        raise BuildError("the driver could not build the program")
    monkeypatch.setattr(cpu_simd_gemm, "_launch", fails)
    assert cpu_simd_gemm._probe() is False
    monkeypatch.setattr(cpu_simd_gemm, "_launch", lambda *args: None)   # runs, but leaves c as it was
    assert cpu_simd_gemm._probe() is False


@requires_device
@pytest.mark.parametrize("K", [64, 33])
def test_results_are_rounded_to_nearest_even(K, dot_kernels, monkeypatch):
    """Small integers: every sum is exact in fp32, so the result's bits are the nearest-even
    bf16 of the exact product (sums above 256 need rounding: ties included)."""
    import ml_dtypes
    from xejit.ir.core import f32_to_bf16_bits
    rng = np.random.default_rng(K)
    a = rng.integers(1, 16, (30, K)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-6, 16, (K, 70)).astype(ml_dtypes.bfloat16)
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert (np.abs(exact) > 256).mean() > 0.5   # (enough sums that bf16 cannot hold exactly)
    for rows in (0, 64):   # B packed, and read in place (N a multiple of ROWS_NR)
        cpu_simd_gemm._SCRATCH.plans = {}
        monkeypatch.setattr(cpu_simd_gemm, "ROWS_MAX_M", rows)
        c = np.full((30, 64), np.nan, a.dtype)
        cpu_simd_gemm.gemm(a, b[:, :64], c)
        np.testing.assert_array_equal(c.view(np.uint16), f32_to_bf16_bits(exact[:, :64]))
    c = np.full((30, 70), np.nan, a.dtype)
    cpu_simd_gemm.gemm(a, b, c)
    np.testing.assert_array_equal(c.view(np.uint16), f32_to_bf16_bits(exact))


# --- a column-major b: dot products of rows, b read in place (cpu_simd_gemm.gemm_bt) ---------

@pytest.fixture
def bt_calls(monkeypatch):
    seen = []
    real = cpu_simd_gemm.gemm_bt
    monkeypatch.setattr(cpu_simd_gemm, "gemm_bt", lambda a, b, c: seen.append((a.shape, b.shape)) or real(a, b, c))
    monkeypatch.setattr(xm, "_RECIPES", {})
    return seen


def _needs(dtype):
    if dtype == "bfloat16" and not cpu_simd_gemm.available():
        pytest.skip("no bf16 dot products on this CPU device")
    if not cpu_simd_gemm.fma_available():
        pytest.skip("the default device is not the CPU device")


@requires_device
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(1, 1, 2), (1, 70, 300), (2, 9, 31), (5, 33, 17), (4, 8, 64), (70, 45, 129)])
def test_gemm_bt_matches_float64(M, N, K, dtype):
    """Every edge: one row (the 1 x 8 block), rows and columns past the 4 x 4 blocks, K past
    the last whole vector (16 fp32 / 32 bf16 values of k) or below one; a and c with rows
    longer than K and N (c's other columns stay poisoned)."""
    import ml_dtypes
    _needs(dtype)
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    rng = np.random.default_rng(M * 100 + N + K)
    a = (rng.standard_normal((M, K + 3)) + 0.1).astype(dt)[:, 2:2 + K]
    w = (rng.standard_normal((N, K)) + 0.1).astype(dt)
    c_wide = np.full((M, N + 5), np.nan, dt)
    c = c_wide[:, 1:1 + N]
    cpu_simd_gemm.gemm_bt(a, w.T, c)
    check(c.astype(np.float32), a.astype(np.float64) @ w.T.astype(np.float64), dtype)
    assert np.isnan(c_wide[:, 0].astype(np.float32)).all() and np.isnan(c_wide[:, 1 + N:].astype(np.float32)).all()


@requires_device
@pytest.mark.parametrize("dtype,lib", [("float32", "numpy"), ("bfloat16", "torch"), ("float32", "torch")])
@pytest.mark.parametrize("M", [1, 8, 40])
def test_x_at_w_t_takes_the_dot_kernels(M, dtype, lib, bt_calls):
    """``x @ w.T`` (a torch Linear's weight) reads w in place, results against float64 with a
    poisoned out=; a repeated call (the remembered recipe) too, with w changed in place."""
    _needs(dtype)
    rng = np.random.default_rng(M)
    x, w = rand(rng, (M, 300), dtype, lib), rand(rng, (200, 300), dtype, lib)
    out = poisoned((M, 200), dtype, lib)
    xejit.matmul(x, w.T, out=out)
    check(out, reference(x, w.T), dtype)
    w[:5] *= -2
    check(xejit.matmul(x, w.T), reference(x, w.T), dtype)
    assert [tuple(s) for s, _ in bt_calls] == [(M, 300), (M, 300)]


def test_gemm_bt_rejects_what_it_cannot_take():
    a = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match="column-major b"):
        cpu_simd_gemm.gemm_bt(a, np.ones((8, 4), np.float32), np.empty((4, 4), np.float32))
    with pytest.raises(TypeError, match="float32 or bfloat16"):
        cpu_simd_gemm.gemm_bt(a.astype(np.float16), np.ones((4, 8), np.float16).T, np.empty((4, 4), np.float16))
