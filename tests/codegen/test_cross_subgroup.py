"""tile_reduce over a dimension split across subgroups (cross-subgroup reduction through SLM),
compiled for the generic target and run on the CPU device against float64 numpy."""
from __future__ import annotations

import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.codegen.compiler import compile_kernel

from ..helpers import check, f64, poisoned, rand
from ..kernels import rowsum_layout


@xejit.kernel
def rowmax_layout(x, y, BM: xl.constexpr, BN: xl.constexpr, SGL: xl.constexpr, SGD: xl.constexpr):
    m = xl.program_id(0) * BM
    t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN], wg_map=xl.wg_map(SGL, SGD)))
    xl.store_tile(xl.init_tile(y, [m, 0], [BM, 1]), xl.max(t, 1))


@xejit.kernel
def colmin_layout(x, y, BM: xl.constexpr, BN: xl.constexpr, SGL: xl.constexpr, SGD: xl.constexpr):
    n = xl.program_id(0) * BN
    t = xl.load_tile(xl.init_tile(x, [0, n], [BM, BN], wg_map=xl.wg_map(SGL, SGD)))
    xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), xl.min(t, 0))


def cdiv(a, b):
    return -(-a // b)


@pytest.fixture
def rng(request):
    # str hash() changes per process: crc32 keeps each test's inputs the same on every run.
    import zlib
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


# (M, N, BM, BN, sg_layout, sg_data): the reduced dim (1) is split over the subgroups
ROW_CASES = [
    (19, 64, 8, 64, (1, 4), (8, 16)),    # 4 subgroups, one block each
    (19, 64, 8, 64, (1, 2), (8, 16)),    # 2 subgroups, two round-robin blocks each
    (16, 50, 4, 64, (2, 2), (2, 16)),    # 2 x 2: rows and columns split, columns masked
]


@pytest.mark.parametrize("M,N,BM,BN,sgl,sgd", ROW_CASES)
def test_rowsum_split_over_subgroups(rng, M, N, BM, BN, sgl, sgd):
    x = rand(rng, (M, N), "f32")
    y = poisoned((M, 1), "f32")
    rowsum_layout[(cdiv(M, BM),)](x, y, BM=BM, BN=BN, SGL=list(sgl), SGD=list(sgd),
                                  num_subgroups=sgl[0] * sgl[1])
    # A sum's fp32 error is bounded relative to the sum of magnitudes, not to the (possibly
    # cancelling) sum itself.
    assert np.isfinite(y).all(), "unwritten (poisoned) elements remain"
    err = np.abs(f64(y) - f64(x).sum(1, keepdims=True)) / np.abs(f64(x)).sum(1, keepdims=True)
    assert err.max() <= 1e-5, f"relative error {err.max():.3g}"


@pytest.mark.parametrize("M,N,BM,BN,sgl,sgd", ROW_CASES)
def test_rowmax_split_over_subgroups(rng, M, N, BM, BN, sgl, sgd):
    x = rand(rng, (M, N), "f32")
    y = poisoned((M, 1), "f32")
    rowmax_layout[(cdiv(M, BM),)](x, y, BM=BM, BN=BN, SGL=list(sgl), SGD=list(sgd),
                                  num_subgroups=sgl[0] * sgl[1])
    check(y, f64(x).max(1, keepdims=True), "f32")


@pytest.mark.parametrize("M,N,BM,BN,sgl,sgd", [
    (32, 40, 32, 16, (4, 1), (8, 16)),   # 4 subgroups along the reduced rows
    (30, 40, 32, 32, (2, 1), (8, 32)),   # 2 subgroups, two blocks each, rows masked
])
def test_colmin_split_over_subgroups(rng, M, N, BM, BN, sgl, sgd):
    x = rand(rng, (M, N), "f32")
    y = poisoned((1, N), "f32")
    colmin_layout[(cdiv(N, BN),)](x, y, BM=BM, BN=BN, SGL=list(sgl), SGD=list(sgd),
                                  num_subgroups=sgl[0] * sgl[1])
    check(y, f64(x).min(0, keepdims=True), "f32")


def test_cross_subgroup_reduce_goes_through_slm():
    x = np.zeros((8, 8), np.float32)
    ck = compile_kernel(rowsum_layout.compile_ir(x, x, BM=8, BN=64, SGL=[1, 4], SGD=[8, 16],
                                                 num_subgroups=4), "generic")
    text = ck.report()
    assert "SLM store" in text and "SLM load" in text and "2  workgroup barrier" in text, text


def test_subgroup_level_interpreter_runs_the_exchange_like_the_device():
    # subgroups run as threads meeting at each barrier: the split reduce is interpreted exactly
    from xejit.codegen.passes import distribute_to_subgroups, propagate_layouts
    from xejit.ir.gpu import run_grid_subgroups
    from xejit.ir import Buffer, f32
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32) + 0.1
    y = np.full((8, 1), np.nan, np.float32)
    fn = rowsum_layout.compile_ir(x, y, BM=8, BN=64, SGL=[1, 4], SGD=[8, 16], num_subgroups=4).functions[0]
    sg = distribute_to_subgroups(propagate_layouts(fn))
    run_grid_subgroups(sg, (1,), [Buffer(x, f32), Buffer(y, f32)], 4)
    np.testing.assert_allclose(y, f64(x).sum(1, keepdims=True), rtol=1e-5)


def test_a_failing_subgroup_does_not_hang_the_others(monkeypatch):
    from xejit.codegen.passes import distribute_to_subgroups, propagate_layouts
    from xejit.ir import Buffer, InterpreterError, f32
    from xejit.ir import interpreter
    from xejit.ir.gpu import run_grid_subgroups
    x = np.ones((8, 64), np.float32)
    y = np.full((8, 1), np.nan, np.float32)
    fn = rowsum_layout.compile_ir(x, y, BM=8, BN=64, SGL=[1, 4], SGD=[8, 16], num_subgroups=4).functions[0]
    sg = distribute_to_subgroups(propagate_layouts(fn))
    store = interpreter.IMPLS["gpu.slm_store"]

    def failing_store(it, op, args):   # subgroup 2 fails between the two barriers
        if it.subgroup_id == 2:
            raise ValueError("injected failure")
        return store(it, op, args)
    monkeypatch.setitem(interpreter.IMPLS, "gpu.slm_store", failing_store)
    with pytest.raises(InterpreterError, match="injected failure"):
        run_grid_subgroups(sg, (1,), [Buffer(x, f32), Buffer(y, f32)], 4)
