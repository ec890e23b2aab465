"""Differential tests of the passes: interpret the IR before and after each pass on random
inputs, shapes and layouts; results must agree (fp32 tolerance: pass order changes sums)."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from xejit.codegen.passes import (cleanup, cse, dce, distribute_to_subgroups,
                                  hoist_loop_invariants, propagate_layouts, value_layout)
from xejit.ir import Buffer, Interpreter, verify_function
from xejit.ir.core import TileType, VectorType, f32
from xejit.ir.gpu import run_grid_subgroups

from ..kernels import (colsum_layout, convert_scale, matmul, matmul_bias_relu, matmul_layout, rowsum_layout,
                      softmax, transpose, transpose_layout)

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))


def cdiv(a, b):
    return -(-a // b)


def interpret(fn, grid, arrays, scalars=()):
    """Run ``fn`` (workgroup or subgroup level) on copies of ``arrays``; return the copies."""
    arrays = [a.copy() for a in arrays]
    args = [Buffer(a, f32) for a in arrays] + [np.int64(s) for s in scalars]
    if fn.attributes.get("level") == "subgroup":
        run_grid_subgroups(fn, grid, args, fn.attributes.get("num_subgroups") or 1)
    else:
        Interpreter().run_grid(fn, grid, args)
    return arrays


def pipeline_stages(fn):
    """(name, function) after each pass of the compiler's pipeline."""
    out = [("input", fn)]
    wg = propagate_layouts(fn)
    out.append(("layout", wg))
    sg = distribute_to_subgroups(wg)
    out.append(("wg_to_sg", sg))
    for name, p in (("hoist", hoist_loop_invariants), ("cse", cse), ("dce", dce)):
        sg = p(sg)
        out.append((name, sg))
    for _, f in out:
        verify_function(f)
    return out


def assert_all_stages_agree(fn, grid, arrays, scalars=(), out_index=-1):
    ref = None
    for name, f in pipeline_stages(fn):
        got = interpret(f, grid, arrays, scalars)[out_index]
        if ref is None:
            ref = got
            continue
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(ref).max()),
                                   err_msg=f"after pass {name}")


@SETTINGS
@given(M=st.integers(1, 40), N=st.integers(1, 40), K=st.integers(1, 40),
       bm=st.sampled_from([8, 16, 32]), bn=st.sampled_from([16, 32]), bk=st.sampled_from([8, 16]),
       ns=st.sampled_from([1, 2, 4, 8]), seed=st.integers(0, 2**16))
def test_gemm_default_layouts(M, N, K, bm, bn, bk, ns, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    fn = matmul.compile_ir(a, b, c, M, N, K, BM=bm, BN=bn, BK=bk, num_subgroups=ns).functions[0]
    assert_all_stages_agree(fn, (cdiv(M, bm), cdiv(N, bn)), [a, b, c], (M, N, K))


# (sg_layout, sg_data) pairs for a 32x32 C tile: smaller than, equal to and larger than the tile
LAYOUTS = [((2, 2), (8, 8)), ((2, 2), (16, 16)), ((4, 1), (8, 32)), ((1, 4), (32, 8)),
           ((4, 2), (16, 32)), ((2, 4), (32, 16)), ((1, 1), (8, 16)), ((2, 1), (4, 32)), ((8, 4), (8, 8))]


@SETTINGS
@given(lay=st.sampled_from(LAYOUTS), M=st.integers(1, 70), N=st.integers(1, 70), K=st.integers(1, 40),
       seed=st.integers(0, 2**16))
def test_gemm_user_layouts(lay, M, N, K, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    sgl, sgd = lay
    fn = matmul_layout.compile_ir(a, b, c, M, N, K, BM=32, BN=32, BK=16, SGL=list(sgl), SGD=list(sgd),
                                  num_subgroups=sgl[0] * sgl[1]).functions[0]
    assert_all_stages_agree(fn, (cdiv(M, 32), cdiv(N, 32)), [a, b, c], (M, N, K))


@SETTINGS
@given(M=st.integers(1, 30), N=st.integers(1, 40), bm=st.sampled_from([4, 8]), ns=st.sampled_from([1, 2, 4]),
       seed=st.integers(0, 2**16))
def test_softmax_rows_over_subgroups(M, N, bm, ns, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = np.full((M, N), np.nan, np.float32)
    fn = softmax.compile_ir(x, y, BM=bm, BN=64, num_subgroups=ns).functions[0]
    assert_all_stages_agree(fn, (cdiv(M, bm),), [x, y])


@SETTINGS
@given(M=st.integers(1, 30), N=st.integers(1, 30), K=st.integers(1, 20), ns=st.sampled_from([1, 2, 4]),
       seed=st.integers(0, 2**16))
def test_bias_relu_broadcast(M, N, K, ns, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal((N,)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    fn = matmul_bias_relu.compile_ir(a, b, bias, c, M, N, K, BM=16, BN=32, BK=8, num_subgroups=ns).functions[0]
    assert_all_stages_agree(fn, (cdiv(M, 16), cdiv(N, 32)), [a, b, bias, c], (M, N, K))


def test_one_subgroup_is_identity():
    a = np.zeros((8, 8), np.float32)
    fn = matmul.compile_ir(a, a, a, 8, 8, 8, BM=16, BN=16, BK=8, num_subgroups=1).functions[0]
    sg = distribute_to_subgroups(propagate_layouts(fn))
    assert sg.attributes["level"] == "subgroup"
    assert [op.name for op in sg.walk()] == [op.name for op in fn.walk()]
    assert [r.type for op in sg.walk() for r in op.results] == [r.type for op in fn.walk() for r in op.results]


def test_anchor_layout_and_propagation():
    a = np.zeros((8, 8), np.float32)
    fn = matmul.compile_ir(a, a, a, 8, 8, 8, BM=64, BN=64, BK=16, num_subgroups=8).functions[0]
    wg = propagate_layouts(fn)
    mma = next(op for op in wg.walk() if op.name == "xetile.tile_mma")
    lay = mma.attributes["layout"]
    assert lay.num_subgroups == 8 and lay.sg_data[0] * lay.sg_layout[0] == 64
    a_lay = value_layout(mma.operands[0])
    assert a_lay.sg_layout == lay.sg_layout and a_lay.sg_data == (lay.sg_data[0], 16)
    for op in wg.walk():
        for r in op.results:
            if isinstance(r.type, (VectorType, TileType)):
                assert value_layout(r) is not None, op


def test_distribution_round_robin_offsets():
    """RFC example: a [128, 128] tile, sg_layout [2, 2], sg_data [32, 128]: subgroup 2 owns rows
    32:64 and 96:128, subgroups 0 and 1 share data."""
    from xejit.codegen.passes.wg_to_sg import _Dist
    from xejit.ir.core import Layout
    d = _Dist((128, 128), Layout((2, 2), (32, 128)))
    assert d.nb == (2, 1) and d.shared(1) and not d.shared(0)


def test_cleanup_hoists_and_dedups():
    a = np.zeros((8, 8), np.float32)
    fn = matmul.compile_ir(a, a, a, 8, 8, 8, BM=16, BN=16, BK=8, num_subgroups=1).functions[0]
    out = cleanup(distribute_to_subgroups(propagate_layouts(fn)))
    loop = next(op for op in out.walk() if op.name == "scf.for")
    assert not any(op.name == "arith.constant" for op in loop.regions[0].block.ops)
    n_before = sum(1 for op in fn.walk() if op.name == "arith.constant")
    n_after = sum(1 for op in out.walk() if op.name == "arith.constant")
    assert n_after < n_before


@SETTINGS
@given(M=st.integers(1, 9), N=st.integers(1, 70), ns=st.sampled_from([2, 4]), seed=st.integers(0, 2**16))
def test_softmax_single_row_keeps_reduced_dim_in_one_subgroup(M, N, ns, seed):
    x = np.random.default_rng(seed).standard_normal((M, N)).astype(np.float32)
    y = np.full((M, N), np.nan, np.float32)
    fn = softmax.compile_ir(x, y, BM=1, BN=64, num_subgroups=ns).functions[0]
    assert_all_stages_agree(fn, (M,), [x, y])


def test_cross_subgroup_reduce_exchanges_partials_through_slm():
    x = np.zeros((8, 8), np.float32)
    fn = rowsum_layout.compile_ir(x, x, BM=8, BN=64, SGL=[1, 4], SGD=[8, 16], num_subgroups=4).functions[0]
    sg = distribute_to_subgroups(propagate_layouts(fn))
    names = [op.name for op in sg.walk()]
    assert names.count("gpu.barrier") == 2
    store = next(op for op in sg.walk() if op.name == "gpu.slm_store")
    load = next(op for op in sg.walk() if op.name == "gpu.slm_load")
    assert store.operands[0].type.shape == (8, 1)          # this subgroup's partial
    assert store.operands[1].type.shape == (8, 4)          # one column per subgroup
    assert load.result.type.shape == (8, 4)                # every partial of its rows
    reds = [op for op in sg.walk() if op.name == "xetile.tile_reduce"]
    assert [r.operands[0].type.shape for r in reds] == [(8, 16), (8, 4)]


# Layouts of a 16x32 workgroup tile over 4 subgroups: one block each, round-robin blocks,
# data shared by several subgroups, column-major subgroup order.
LAYOUTS_16x32 = [((1, 4), (16, 8)), ((4, 1), (4, 32)), ((2, 2), (8, 16)), ((2, 2), (4, 8)),
                 ((4, 1), (2, 32)), ((2, 2), (16, 16)), ((1, 4), (8, 8))]


@SETTINGS
@given(src=st.sampled_from(LAYOUTS_16x32), dst=st.sampled_from(LAYOUTS_16x32),
       M=st.integers(1, 40), N=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_convert_layout_between_any_layouts(src, dst, M, N, seed):
    x = np.random.default_rng(seed).standard_normal((M, N)).astype(np.float32)
    y = np.full((M, N), np.nan, np.float32)
    fn = convert_scale.compile_ir(x, y, BM=16, BN=32, SGL=list(src[0]), SGD=list(src[1]),
                                  SGL2=list(dst[0]), SGD2=list(dst[1]), num_subgroups=4).functions[0]
    assert_all_stages_agree(fn, (cdiv(M, 16), cdiv(N, 32)), [x, y])
    got = interpret(pipeline_stages(fn)[-1][1], (cdiv(M, 16), cdiv(N, 32)), [x, y])[-1]
    np.testing.assert_allclose(got, 2.0 * x.astype(np.float64) + 1.0, rtol=1e-6)


@SETTINGS
@given(src=st.sampled_from(LAYOUTS_16x32), M=st.integers(1, 40), N=st.integers(1, 70),
       seed=st.integers(0, 2**16))
def test_transpose_across_subgroups(src, M, N, seed):
    x = np.random.default_rng(seed).standard_normal((M, N)).astype(np.float32)
    y = np.full((N, M), np.nan, np.float32)
    fn = transpose_layout.compile_ir(x, y, BM=16, BN=32, SGL=list(src[0]), SGD=list(src[1]),
                                     SGL2=list(src[0][::-1]), SGD2=list(src[1][::-1]),
                                     num_subgroups=4).functions[0]
    got = interpret(pipeline_stages(fn)[-1][1], (cdiv(M, 16), cdiv(N, 32)), [x, y])[-1]
    np.testing.assert_array_equal(got, x.T)


@SETTINGS
@given(lay=st.sampled_from([((4, 1), (4, 32)), ((2, 2), (8, 16)), ((2, 2), (4, 8)), ((4, 1), (2, 32)),
                            ((2, 2), (4, 16))]),
       M=st.integers(1, 16), N=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_column_reduce_split_over_subgroups(lay, M, N, seed):
    x = np.random.default_rng(seed).standard_normal((M, N)).astype(np.float32)
    y = np.full((1, N), np.nan, np.float32)
    fn = colsum_layout.compile_ir(x, y, BM=16, BN=32, SGL=list(lay[0]), SGD=list(lay[1]),
                                  num_subgroups=4).functions[0]
    assert_all_stages_agree(fn, (cdiv(N, 32),), [x, y])
    got = interpret(pipeline_stages(fn)[-1][1], (cdiv(N, 32),), [x, y])[-1]
    np.testing.assert_allclose(got, x.astype(np.float64).sum(0, keepdims=True), rtol=1e-5, atol=1e-5)


def test_transpose_distributes_locally():
    x = np.random.default_rng(0).standard_normal((20, 40)).astype(np.float32)
    y = np.full((40, 20), np.nan, np.float32)
    fn = transpose.compile_ir(x, y, BM=16, BN=16, num_subgroups=2).functions[0]
    assert_all_stages_agree(fn, (2, 3), [x, y])
