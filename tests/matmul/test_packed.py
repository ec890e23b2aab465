"""Large fp32 GEMMs on targets without 2D block IO take the packed, K-blocked kernel
(``pack_b_kernel`` + ``gemm_packed_kernel``): results against float64 references, outputs
poisoned; the size threshold is lowered so that small shapes exercise every edge."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import xejit
from tests.matmul.backend import requires_device
from tests.matmul.helpers import check, poisoned, rand, reference

xm = sys.modules["xejit.matmul"]   # (xejit.matmul is also the function)


@pytest.fixture
def packed_calls(monkeypatch):
    seen = []
    real = xm._packed
    monkeypatch.setattr(xm, "_packed", lambda a, b, c: seen.append((a.shape, b.shape)) or real(a, b, c))
    monkeypatch.setattr(xm, "_PACKED_MIN_WORK", 64 ** 3)
    monkeypatch.setattr(xm, "_BT_MAX_M", 0)   # (column-major b: not read in place, test_bf16_dot.py)
    monkeypatch.setattr(xm, "_RECIPES", {})   # (choices made under the lowered threshold end here)
    return seen


@pytest.fixture
def packed_kernels(monkeypatch):
    """The names of the GEMM kernels that _packed launches."""
    seen = []

    class Spy:
        def __init__(self, k):
            self.k = k

        def __getitem__(self, grid):
            seen.append(self.k.fn.__name__)
            return self.k[grid]
    for name in ("gemm_strip_kernel", "gemm_packed_kernel"):
        monkeypatch.setattr(xm, name, Spy(getattr(xm, name)))
    return seen


def _t(x):
    return x.mT if hasattr(x, "mT") and not isinstance(x, np.ndarray) else np.swapaxes(x, -1, -2)


@requires_device
@pytest.mark.parametrize("M,N,K,a_t,b_t,lib", [
    (200, 300, 530, False, False, "numpy"),   # M not a multiple of MC or 6, N of NC, K of KC
    (97, 270, 260, True, True, "numpy"),      # column-major a and b
    (130, 100, 300, False, True, "torch"),
])
def test_large_fp32_gemm_takes_the_packed_kernel(M, N, K, a_t, b_t, lib, packed_calls):
    from xejit.autotuner import current_target
    from xejit.codegen.targets import get_target
    rng = np.random.default_rng(M * N + K)
    a = _t(rand(rng, (K, M), "float32", lib)) if a_t else rand(rng, (M, K), "float32", lib)
    b = _t(rand(rng, (N, K), "float32", lib)) if b_t else rand(rng, (K, N), "float32", lib)
    out = poisoned((M, N), "float32", lib)
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), "float32")
    expected = [] if get_target(current_target()).has_block_io else [((M, K), (K, N))]
    assert [(tuple(x), tuple(y)) for x, y in packed_calls] == expected
    check(xejit.matmul(a, b), reference(a, b), "float32")   # the scratch buffer reused


@requires_device
@pytest.mark.parametrize("M,N,K", [(100, 130, 300), (70, 90, 1100)])   # strip kernel, K-blocked kernel
def test_repeated_packed_calls_reuse_the_choice(M, N, K, packed_calls, monkeypatch):
    """A repeated call with the dtypes, shapes and strides of an earlier one goes straight to the
    packed kernels (no full path: ``_matmul`` is not called again), reading its operands afresh:
    new arrays, ``b`` changed in place, a poisoned out=; results against float64."""
    full = []
    real = xm._matmul
    monkeypatch.setattr(xm, "_matmul", lambda *args, **kw: full.append(1) or real(*args, **kw))
    rng = np.random.default_rng(M + K)
    b = rand(rng, (K, N), "float32")
    for _ in range(2):
        a = rand(rng, (M, K), "float32")
        check(xejit.matmul(a, b), reference(a, b), "float32")
    b[K // 2] += 3.0
    check(xejit.matmul(a, b), reference(a, b), "float32")
    for _ in range(2):
        out = poisoned((M, N), "float32", "numpy")
        xejit.matmul(a, b, out=out)
        check(out, reference(a, b), "float32")
    assert len(full) == 2                          # the first call without and with out=
    assert len(packed_calls) == 5


@requires_device
def test_packed_path_skips_epilogues_and_int8(packed_calls):
    """bias / activation and int8 keep the tuned GEMM (the packed kernel sums into an fp32 c)."""
    rng = np.random.default_rng(5)
    a, b = rand(rng, (70, 80), "float32"), rand(rng, (80, 90), "float32")
    bias = rand(rng, (90,), "float32")
    check(xejit.matmul(a, b, bias=bias, activation="relu"), reference(a, b, bias, "relu"), "float32")
    a8, b8 = rand(rng, (70, 80), "int8"), rand(rng, (80, 90), "int8")
    check(xejit.matmul(a8, b8), reference(a8, b8), "int32")
    assert packed_calls == []


@requires_device
@pytest.mark.parametrize("dtype,lib,K", [("float16", "numpy", 270), ("bfloat16", "torch", 270),
                                         ("float16", "numpy", 1100)])   # K-blocked (above STRIP_MAX_K)
def test_16_bit_floats_take_the_packed_kernel(dtype, lib, K, packed_calls, monkeypatch):
    """fp16 / bf16 operands are widened to fp32 by the packing; the sums go to an fp32 scratch c,
    rounded once into the 16-bit result (edges: M, N, K not multiples of the blocks). (bf16
    takes the bf16 dot-product kernels where the CPU has them: test_bf16_dot.py; not here.)"""
    from xejit import cpu_simd_gemm
    from xejit.autotuner import current_target
    from xejit.codegen.targets import get_target
    monkeypatch.setattr(cpu_simd_gemm, "available", lambda: False)
    rng = np.random.default_rng(len(dtype) + K)
    a, b = rand(rng, (100, K), dtype, lib), rand(rng, (K, 90), dtype, lib)
    out = poisoned((100, 90), dtype, lib)
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), dtype)
    expected = [] if get_target(current_target()).has_block_io else [((100, K), (K, 90))]
    assert [(tuple(x), tuple(y)) for x, y in packed_calls] == expected


@requires_device
@pytest.mark.parametrize("M,N,K,max_k,kernel", [
    (70, 80, 1100, 2048, "gemm_strip_kernel"),    # the strip kernel over a long K (its tail past BK)
    (100, 90, 530, 256, "gemm_packed_kernel"),    # K above STRIP_MAX_K: K-blocked, c summed per slice
    (70, 200, 1100, None, "gemm_packed_kernel"),  # the default STRIP_MAX_K; N past whole NC blocks
])
def test_packed_kernel_by_k(M, N, K, max_k, kernel, packed_calls, packed_kernels, monkeypatch):
    """K up to STRIP_MAX_K sums all of K in registers (gemm_strip_kernel), longer K is blocked
    (gemm_packed_kernel, its last block of strips past M padded with zeros); both match float64."""
    from xejit.autotuner import current_target
    from xejit.codegen.targets import get_target
    if get_target(current_target()).has_block_io:
        pytest.skip("the packed kernels are for targets without 2D block IO")
    if max_k is not None:
        monkeypatch.setattr(xm, "STRIP_MAX_K", max_k)
    rng = np.random.default_rng(K)
    a, b = rand(rng, (M, K), "float32"), rand(rng, (K, N), "float32")
    out = poisoned((M, N), "float32", "numpy")
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), "float32")
    assert set(packed_kernels) == {kernel}
    # a whole block of NC columns, then the rest in a narrower one (N = 200 > NC, 90 < NC)
    assert len(packed_kernels) == (2 if N > 128 and N % 128 else 1)


@requires_device
@pytest.mark.parametrize("regs,bn", [((16, 32), 16), ((32, 64), 32)])
@pytest.mark.parametrize("M,N,K,kernel", [
    (70, 200, 250, "gemm_strip_kernel"),
    (100, 90, 530, "gemm_packed_kernel"),   # K-blocked (STRIP_MAX_K lowered): c summed per slice
])
def test_packed_microkernel_by_vector_registers(regs, bn, M, N, K, kernel, packed_calls, monkeypatch):
    """The packed path's microkernel follows the CPU's vector registers (AVX2: 6 x 16, AVX-512:
    6 x 32, PACKED_CONFIGS); both match float64 on ragged shapes whatever the machine has."""
    from xejit.autotuner import current_target
    from xejit.codegen import lower_generic
    from xejit.codegen.targets import get_target
    if get_target(current_target()).has_block_io:
        pytest.skip("the packed kernels are for targets without 2D block IO")
    monkeypatch.setattr(lower_generic, "VECTOR_REGS", regs[0])
    monkeypatch.setattr(lower_generic, "VECTOR_BYTES", regs[1])
    monkeypatch.setattr(xm, "STRIP_MAX_K", 256)
    seen = []

    class Spy:
        def __init__(self, k):
            self.k = k

        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((self.k.fn.__name__, kw["BN"])) or self.k[grid](*args, **kw)
    for name in ("gemm_strip_kernel", "gemm_packed_kernel"):
        monkeypatch.setattr(xm, name, Spy(getattr(xm, name)))
    rng = np.random.default_rng(M + K + bn)
    a, b = rand(rng, (M, K), "float32"), rand(rng, (K, N), "float32")
    out = poisoned((M, N), "float32", "numpy")
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), "float32")
    assert set(seen) == {(kernel, bn)}


@pytest.mark.parametrize("N,nc,bn", [(300, 256, 32), (256, 256, 32), (90, 128, 32), (1025, 128, 32), (17, 64, 16)])
def test_column_blocks_cover_n_in_whole_panels(N, nc, bn):
    """The packed kernels' launches cover columns 0..N once, in whole BN panels, and stop at b's
    last panel (a block past it ran its microkernels on the masked path over all of K)."""
    blocks = xm._column_blocks(N, nc, bn)
    cols = [n0 + i * width + j for n0, width, count in blocks for i in range(count) for j in range(width)]
    assert cols == list(range(len(cols)))
    assert all(width % bn == 0 for _, width, _ in blocks)
    assert N <= len(cols) < N + bn


@pytest.mark.parametrize("K", [256, 300, 1024, 1027, 1500, 2048, 4097])
def test_k_slices_pad_k_the_least(K):
    """gemm_packed_kernel's k slice is a multiple of BK near KC; K padded to whole slices by less
    than one slice, and by no more than the plain KC slicing."""
    kc = xm._k_slice(K, 256, 64)
    assert kc % 64 == 0 and 0 < kc <= 256
    padded = -(-K // kc) * kc
    assert padded - K < kc and padded <= -(-K // 256) * 256
