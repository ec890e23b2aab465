"""Blocking, pipelining and lane distribution, tested differentially with the interpreter
(xetile-sg before, XeGPU after) and structurally."""
from __future__ import annotations

import numpy as np
import pytest

import xejit
import xejit.language as xl
from hypothesis import HealthCheck, example, given, settings, strategies as st

from xejit.codegen import lower_xegpu
from xejit.codegen.passes import blocking, lane_distribution, pipelining
from xejit.codegen.passes.common import CompilerError
from xejit.codegen.passes.lane_distribution import lane_map
from xejit.codegen.targets import get_target

from .helpers import gemm_case, run_interp, sg_function
from .kernels import col_sum, epilogue, gemm, gemm_prefetch, row_sum

K_OF = {"bf16": 16, "f16": 16, "f32": 8, "i8": 32}


def _differential(case, target):
    """Interpret the xetile-sg function and the XeGPU function on the same inputs."""
    fn = case["fn"]
    x = lower_xegpu.to_xegpu(fn, target)
    outs = []
    for f in (fn, x):
        c = np.array(case["c"], copy=True, order="K")
        run_interp(f, case["grid"], [case["a"], case["b"], c, *case["args"][3:]])
        outs.append(c)
    before, after = outs
    if case["c_dtype"] == "i32":
        np.testing.assert_array_equal(before, after)
    else:
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5 * np.abs(before).max())
    return x


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=st.sampled_from(["pvc", "dg2"]), dtype=st.sampled_from(["bf16", "f16", "f32", "i8"]),
       bm=st.sampled_from([1, 2, 8, 16, 32]), bn_mult=st.sampled_from([1, 2, 4]),
       bk_mult=st.sampled_from([1, 2]), b_col=st.booleans(),
       m=st.integers(1, 40), n=st.integers(1, 70), k=st.integers(1, 70))
def test_blocking_differential_random_gemms(target, dtype, bm, bn_mult, bk_mult, b_col, m, n, k):
    # (dg2 has no tf32 DPAS: f32 there is the FMA multiply-accumulate)
    tgt = get_target(target)
    bn = tgt.dpas.n * bn_mult
    bk = K_OF[dtype] * bk_mult
    case = gemm_case(gemm, dtype, m, n, k, bm, bn, bk, b_colmajor=b_col, seed=m * 1000 + n + k)
    x = _differential(case, target)
    names = [op.name for op in x.walk()]
    assert "xetile.tile_mma" not in names and "xegpu.dpas" in names


@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_blocking_differential_epilogue_broadcast_and_math(target):
    rng = np.random.default_rng(1)
    bn = 2 * get_target(target).dpas.n
    x = rng.uniform(-1, 1, (20, bn)).astype(np.float16)
    bias = rng.uniform(-1, 1, (1, bn)).astype(np.float32)
    y0, y1 = np.zeros((20, bn), np.float16), np.zeros((20, bn), np.float16)
    fn = sg_function(epilogue, x, bias, y0, BM=8, BN=bn)
    xf = lower_xegpu.to_xegpu(fn, target)
    run_interp(fn, (3,), [x, bias, y0])
    run_interp(xf, (3,), [x, bias, y1])
    np.testing.assert_array_equal(y0, y1)


def test_dpas_count_matches_tile_arithmetic():
    # 32x64 subgroup tile, K-step 32, bf16 on pvc: (32/8) * (64/16) * (32/16) = 32 DPAS per k-step
    case = gemm_case(gemm, "bf16", 64, 64, 64, 32, 64, 32)
    rep = blocking.BlockingReport()
    x = blocking.run(case["fn"], get_target("pvc"), rep)
    loop = next(op for op in x.walk() if op.name == "scf.for")
    assert sum(op.name == "xegpu.dpas" for op in loop.regions[0].block.ops) == 32
    assert rep.dpas_total == 32 and rep.fallbacks == []
    # dg2 (N = 8): (32/8) * (64/8) * (32/16) = 64
    x = blocking.run(case["fn"], get_target("dg2"))
    loop = next(op for op in x.walk() if op.name == "scf.for")
    assert sum(op.name == "xegpu.dpas" for op in loop.regions[0].block.ops) == 64


def test_load_blocks_and_dpas_blocks_are_chosen_independently():
    case = gemm_case(gemm, "bf16", 64, 64, 64, 32, 64, 32)
    x = blocking.run(case["fn"], get_target("pvc"))
    loads = [op for op in x.walk() if op.name == "xegpu.load_nd"]
    a_load = next(op for op in loads if not op.attributes.get("packed"))
    b_loads = [op for op in loads if op.attributes.get("packed")]
    assert a_load.operands[0].type.shape == (32, 16) and a_load.operands[0].type.array_length == 2
    assert [op.operands[0].type.shape for op in b_loads] == [(32, 16), (32, 16)]
    assert all(op.operands[0].type.array_length == 2 for op in b_loads)
    dpas = next(op for op in x.walk() if op.name == "xegpu.dpas")
    assert dpas.operands[0].type.shape == (8, 16) and dpas.operands[1].type.shape == (8, 16, 2)
    slices = [op for op in x.walk() if op.name == "vector.extract_strided_slice"]
    assert len(slices) == 4 * 2 + 2 * 2 * 2      # A: 4 row blocks x 2; B: 2 k-blocks per result


def test_column_major_b_uses_32bit_transposed_loads():
    case = gemm_case(gemm, "bf16", 64, 64, 64, 32, 64, 32, b_colmajor=True)
    x = _differential(case, "pvc")
    tl = [op for op in x.walk() if op.name == "xegpu.load_nd" and op.attributes.get("transpose")]
    assert tl and all(op.attributes["transpose_bit_width"] == 32 for op in tl)
    assert all(op.results[0].type.shape == (8, 16, 2) for op in tl)


def test_unaligned_array_falls_back_to_gather_and_says_why(monkeypatch):
    case = gemm_case(gemm, "f16", 16, 32, 36, 16, 32, 16)   # A: pitch 36 x 2 B, not 16-aligned
    rep = blocking.BlockingReport()
    x = blocking.run(case["fn"], get_target("pvc"), rep)
    assert [e["instruction"] for e in rep.fallbacks] == ["gather"]
    assert "16-byte aligned" in rep.fallbacks[0]["reason"] and "kernels.py" in rep.fallbacks[0]["loc"]
    assert any(op.name == "xegpu.load_gather" for op in x.walk())
    _differential(case, "pvc")
    res = lower_xegpu.lower(case["fn"], "pvc", {"emulate": False})
    assert any("16-byte aligned" in f for f in res["fallbacks"])
    monkeypatch.setenv("XEJIT_STRICT", "1")
    with pytest.raises(CompilerError, match="XEJIT_STRICT"):
        blocking.run(case["fn"], get_target("pvc"))


@xejit.kernel
def scaled_a_mma(a, b, c):
    ta = xl.load_tile(xl.init_tile(a, [0, 0], [16, 16]))
    tb = xl.load_tile(xl.init_tile(b, [0, 0], [16, 16]))
    xl.store_tile(xl.init_tile(c, [0, 0], [16, 16]), xl.tile_mma(ta * 2.0, tb))


def test_unsupported_ops_raise_with_the_source_line():
    x = np.zeros((16, 32), np.float32)
    y = np.zeros((16, 1), np.float32)
    fn = sg_function(row_sum, x, y, BM=16, BN=32)
    blocking.run(fn, get_target("pvc"))          # a row reduction (dim 1) is supported now
    blocking.run(sg_function(col_sum, x, np.zeros((1, 32), np.float32), BM=16, BN=32), get_target("pvc"))
    a = np.zeros((16, 16), np.float32)
    sfn = sg_function(scaled_a_mma, a, a, a)
    with pytest.raises(CompilerError, match=r"test_passes\.py:\d+.*tile_mma.*A operand must come straight"):
        blocking.run(sfn, get_target("pvc"))
    with pytest.raises(CompilerError, match="DPAS target"):
        blocking.run(fn, get_target("generic"))


def _wg_gemm(kernel, nsg=4, BM=64, BN=64, BK=32, M=64, N=64, K=128):
    from xejit.codegen.passes import propagate_layouts
    a, b = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
    fn = kernel.compile_ir(a, b, np.zeros((M, N), np.float32), M, N, K, BM=BM, BN=BN, BK=BK,
                           num_subgroups=nsg).functions[0]
    return propagate_layouts(fn)


def test_cooperative_prefetch_num_stages_ahead():
    from xejit.ir.core import Layout
    for stages in (1, 3):
        wg = pipelining.run(_wg_gemm(gemm), stages, get_target("bmg"))   # pvc splits: test_block_coords
        loop = next(op for op in wg.walk() if op.name == "scf.for")
        before = [op for op in wg.entry.ops if op.name == "xetile.prefetch_tile"]
        inside = [op for op in loop.regions[0].block.ops if op.name == "xetile.prefetch_tile"]
        assert len(before) == 2 * stages and len(inside) == 2          # A and B tiles
        lays = {op.operands[0].type.shape: op.operands[0].type.layout for op in inside}
        # the RFC's appendix 2.1 rule: 64-byte wide blocks over all 4 subgroups, each byte once
        assert lays == {(64, 32): Layout((4, 1), (16, 32)), (32, 64): Layout((2, 2), (16, 32))}
        for shape, lay in lays.items():
            assert tuple(l * d for l, d in zip(lay.sg_layout, lay.sg_data)) == shape
    # one prefetch per subgroup per tile and iteration after blocking (the loads' layouts share A
    # and B over 2 subgroups each: without the cooperative layout every block was prefetched twice)
    from xejit.codegen.passes import cleanup, distribute_to_subgroups
    x = lower_xegpu.to_xegpu(cleanup(distribute_to_subgroups(wg)), "bmg")
    loop = next(op for op in x.walk() if op.name == "scf.for")
    assert sum(op.name == "xegpu.prefetch_nd" for op in loop.regions[0].block.ops) == 2
    # values unchanged: the prefetching function computes what the input does
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, (64, 128)).astype(np.float16), rng.uniform(-1, 1, (128, 64)).astype(np.float16)
    from xejit.ir import Buffer, Interpreter, f16, f32
    outs = []
    for f in (_wg_gemm(gemm), wg):
        c = np.full((64, 64), np.nan, np.float32)
        Interpreter().run_grid(f, (1, 1), [Buffer(a, f16), Buffer(b, f16), Buffer(c, f32),
                                           np.int64(64), np.int64(64), np.int64(128)])
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_no_prefetch_without_2d_block_io_or_when_the_user_prefetches():
    wg = pipelining.run(_wg_gemm(gemm), 3, get_target("dg2"))
    assert not any(op.name == "xetile.prefetch_tile" for op in wg.walk())
    wg = pipelining.run(_wg_gemm(gemm_prefetch, nsg=1, BM=32), 3, get_target("pvc"))
    assert sum(op.name == "xetile.prefetch_tile" for op in wg.walk()) == 1       # the user's (A only)


def test_split_prefetch_takes_the_tallest_blocks_that_give_one_per_subgroup():
    """A k-step's tiles in blocks of 32, 16 or 8 rows x 64 bytes, the tallest whose count is the
    subgroup count: 256x256x64 fp16 over 32 subgroups 32-row blocks (16 + 16); 128x128x32 over 16
    16-row blocks (8 + 8; 32-row blocks give 4 + 4); none for 256x128x32 over 32 (12, 24, 48)."""
    def blocks(shapes, n):
        lays = pipelining.split_prefetch(shapes, 2, n)
        return None if lays is None else [(tuple(l.sg_layout), tuple(l.sg_data)) for l in lays]

    assert blocks([(256, 64), (64, 256)], 32) == [((16, 2), (32, 32)), ((4, 8), (32, 32))]
    assert blocks([(128, 32), (32, 128)], 16) == [((16, 1), (16, 32)), ((4, 4), (16, 32))]
    assert blocks([(128, 32), (32, 128)], 8) == [((8, 1), (32, 32)), ((2, 4), (32, 32))]
    assert blocks([(256, 32), (32, 128)], 32) is None
    assert blocks([(8, 64), (64, 512)], 16) is None


@pytest.mark.parametrize("target,dtype,a_map,b_map", [
    ("pvc", "bf16", (1, 16, 1, 1), (1, 16, 2, 1)),
    ("pvc", "f16", (1, 16, 1, 1), (1, 16, 2, 1)),
    ("pvc", "f32", (2, 8, 1, 1), (1, 16, 1, 1)),     # tf32
    ("pvc", "i8", (1, 16, 1, 2), (1, 16, 4, 1)),
    ("dg2", "bf16", (1, 8, 1, 2), (1, 8, 2, 1)),
    ("dg2", "i8", (1, 8, 1, 4), (1, 8, 4, 1)),
])
def test_lane_distribution_follows_the_rfc_sg_map_rules(target, dtype, a_map, b_map):
    tgt = get_target(target)
    case = gemm_case(gemm, dtype, 32, 32, 64, 16, 2 * tgt.dpas.n, K_OF[dtype])
    x = lane_distribution.run(blocking.run(case["fn"], tgt), tgt)
    dp = next(op for op in x.walk() if op.name == "xegpu.dpas")
    lay = lambda v: (*v.op.attributes["layout"].lane_layout, *v.op.attributes["layout"].lane_data)  # noqa: E731
    assert lay(dp.operands[0]) == a_map
    assert lay(dp.operands[1]) == b_map
    assert (*dp.attributes["layout"].lane_layout, *dp.attributes["layout"].lane_data) == (1, tgt.dpas.n, 1, 1)
    assert lane_map(dp.operands[0].type.shape, tgt.subgroup_size) == a_map


@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_each_pass_preserves_values(target):
    """Interpret after blocking and after lane distribution: both agree with the input."""
    tgt = get_target(target)
    case = gemm_case(gemm, "f16", 45, 70, 96, 16, 2 * tgt.dpas.n, 32, seed=7)
    fn = case["fn"]
    stages = [blocking.run(fn, tgt)]
    stages.append(lane_distribution.run(blocking.run(fn, tgt), tgt))
    ref = np.full_like(case["c"], np.nan)
    run_interp(fn, case["grid"], [case["a"], case["b"], ref, *case["args"][3:]])
    for x in stages:
        c = np.full_like(case["c"], np.nan)
        run_interp(x, case["grid"], [case["a"], case["b"], c, *case["args"][3:]])
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_column_major_a_and_c_are_reported_fallbacks():
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.uniform(-1, 1, (32, 64)).astype(np.float16))
    b = rng.uniform(-1, 1, (64, 32)).astype(np.float16)
    c = np.asfortranarray(np.zeros((32, 32), np.float32))
    fn = sg_function(gemm, a, b, c, 32, 32, 64, BM=16, BN=32, BK=32)
    rep = blocking.BlockingReport()
    blocking.run(fn, get_target("pvc"), rep)
    reasons = {e["instruction"]: e["reason"] for e in rep.fallbacks}
    assert set(reasons) == {"gather", "scatter"}
    assert "column-major" in reasons["gather"] and "column-major" in reasons["scatter"]
    case = dict(fn=fn, c=c, grid=(2, 1), args=[a, b, c, 32, 32, 64], a=a, b=b, c_dtype="f32")
    _differential(case, "pvc")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=st.sampled_from(["pvc", "dg2"]), nsg=st.sampled_from([2, 4]),
       dtype=st.sampled_from(["bf16", "i8"]), m=st.integers(1, 70), n=st.integers(1, 70))
def test_workgroup_pipeline_differential(target, nsg, dtype, m, n):
    """Workgroup kernel (xetile) vs its XeGPU form after the whole pipeline (layout propagation,
    wg->sg distribution, cleanup, then this path), interpreted subgroup by subgroup."""
    from xejit.codegen.passes import cleanup, distribute_to_subgroups, propagate_layouts
    from xejit.ir.gpu import run_grid_subgroups
    from .helpers import _torch_like, interp_args
    tgt = get_target(target)
    bm, bn, bk = 32, 4 * tgt.dpas.n, K_OF[dtype]
    case = gemm_case(gemm, dtype, m, n, 2 * bk, bm, bn, bk, seed=m + 100 * n)
    like = ([_torch_like(case["a"], dtype), _torch_like(case["b"], dtype), case["c"]]
            if dtype == "bf16" else case["args"][:3])
    wg = gemm.compile_ir(*like, *case["args"][3:], BM=bm, BN=bn, BK=bk, num_subgroups=nsg,
                         **({} if dtype != "f32" else {"PREC": "tf32"})).functions[0]
    sg = cleanup(distribute_to_subgroups(propagate_layouts(wg)))
    x = lower_xegpu.to_xegpu(sg, tgt)
    ref = np.array(case["c"], copy=True)
    run_interp(wg, case["grid"], [case["a"], case["b"], ref, *case["args"][3:]])
    c = np.array(case["c"], copy=True)
    run_grid_subgroups(x, case["grid"], interp_args(x, [case["a"], case["b"], c, *case["args"][3:]]), nsg)
    if dtype == "i8":
        np.testing.assert_array_equal(c, ref)
    else:
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


# Data moving between subgroups through SLM (wg_to_sg's exchange), blocked per register block:
# the XeGPU function and the subgroup-level XeTile function, both interpreted with the
# subgroups as threads meeting at the barriers, write the same output.
_EXCHANGES = [
    ("convert", dict(SGL=[1, 4], SGD=[16, 8], SGL2=[4, 1], SGD2=[4, 32]), (37, 50), (37, 50)),
    ("convert", dict(SGL=[2, 2], SGD=[4, 8], SGL2=[2, 2], SGD2=[16, 16]), (37, 50), (37, 50)),
    ("transpose", dict(SGL=[4, 1], SGD=[4, 32], SGL2=[1, 4], SGD2=[32, 4]), (37, 50), (50, 37)),
    ("colsum", dict(SGL=[4, 1], SGD=[4, 32]), (14, 70), (1, 70)),
    ("colsum", dict(SGL=[2, 2], SGD=[4, 16]), (14, 70), (1, 70)),
    ("rowsum", dict(SGL=[1, 4], SGD=[8, 16]), (19, 64), (19, 1)),
]


@pytest.mark.parametrize("target", ["pvc", "dg2"])
@pytest.mark.parametrize("name,meta,xshape,yshape", _EXCHANGES)
def test_slm_exchange_blocked_matches_subgroup_ir(target, name, meta, xshape, yshape):
    from tests import kernels as ck
    from xejit.codegen.passes import cleanup, distribute_to_subgroups, propagate_layouts
    from xejit.ir import Buffer, f32
    from xejit.ir.gpu import run_grid_subgroups
    kernel, tile = {"convert": (ck.convert_scale, (16, 32)), "transpose": (ck.transpose_layout, (16, 32)),
                    "colsum": (ck.colsum_layout, (16, 32)), "rowsum": (ck.rowsum_layout, (8, 64))}[name]
    x = np.random.default_rng(len(name) + xshape[0]).standard_normal(xshape).astype(np.float32)
    y = np.full(yshape, np.nan, np.float32)
    fn = kernel.compile_ir(x, y, BM=tile[0], BN=tile[1], num_subgroups=4, **meta).functions[0]
    sg = cleanup(distribute_to_subgroups(propagate_layouts(fn)))
    xg = lower_xegpu.to_xegpu(sg, target)
    assert any(op.name == "gpu.slm_load" for op in xg.walk())
    grid = {"colsum": (-(-xshape[1] // 32),), "rowsum": (-(-xshape[0] // 8),)}.get(
        name, (-(-xshape[0] // 16), -(-xshape[1] // 32)))
    outs = []
    for f in (sg, xg):
        out = y.copy()
        run_grid_subgroups(f, grid, [Buffer(x, f32), Buffer(out, f32)], 4)
        outs.append(out)
    assert not np.isnan(outs[0]).any()
    # blocks change the order of the additions of a sum: fp32 tolerance
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5 * np.abs(outs[0]).max())


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nsg=st.sampled_from([1, 2, 4, 8]), bm=st.sampled_from([16, 32, 64]), bn=st.sampled_from([32, 64]),
       bk=st.sampled_from([16, 32]), stages=st.integers(1, 3), m=st.integers(1, 70), n=st.integers(1, 70),
       k=st.integers(1, 90), seed=st.integers(0, 2**16), bcol=st.booleans())
# column-major B split with A over subgroup ranges (32-row blocks, 2 + 2), and a k-step two
# 64-byte blocks wide in B's memory (BK=64: B's layout takes its N blocks fastest)
@example(nsg=4, bm=64, bn=64, bk=32, stages=2, m=70, n=61, k=90, seed=1, bcol=True)
@example(nsg=8, bm=64, bn=64, bk=64, stages=1, m=70, n=61, k=90, seed=2, bcol=True)
@example(nsg=8, bm=16, bn=32, bk=16, stages=1, m=1, n=1, k=1, seed=0, bcol=True)   # a 1x1 b.T is row-major
def test_cooperative_prefetch_differential(nsg, bm, bn, bk, stages, m, n, k, seed, bcol):
    """Random GEMM tiles, subgroup counts and distances, B row- or column-major: the pipelined
    workgroup function computes what the input does, and every prefetch layout covers its tile
    exactly once (split over subgroup ranges too, column-major B's in its memory's blocks)."""
    from xejit.codegen.passes import propagate_layouts
    from xejit.ir import Buffer, Interpreter, f16, f32
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (n, k)).astype(np.float16).T if bcol else rng.uniform(-1, 1, (k, n)).astype(np.float16)
    fn = gemm.compile_ir(a, b, np.zeros((m, n), np.float32), m, n, k, BM=bm, BN=bn, BK=bk,
                         num_subgroups=nsg).functions[0]
    wg = propagate_layouts(fn)
    piped = pipelining.run(propagate_layouts(fn), stages, get_target("pvc"))
    # a b.T with one row or column is row-major as well: the kernel is specialized for that
    bcol = bcol and n > 1 and k > 1
    want = sum(pipelining.prefetch_layout(shape, 2, nsg) is not None
               for shape in ((bm, bk), (bn, bk) if bcol else (bk, bn)))
    assert sum(op.name == "xetile.prefetch_tile" for op in piped.walk()) == want * (stages + 1)
    for op in piped.walk():
        if op.name == "xetile.prefetch_tile":
            t = op.operands[0].type
            (L0, L1), (D0, D1) = t.layout.sg_layout, t.layout.sg_data
            assert L0 * L1 == nsg
            rng = op.attributes.get("subgroups")
            if rng is None:
                assert (L0 * D0, L1 * D1) == t.shape
            else:   # split_prefetch: the subgroups in range issue each block of the tile once
                got = sorted(((s // L1) * D0 % t.shape[0], (s % L1) * D1 % t.shape[1]) for s in range(*rng))
                assert got == [(r, c) for r in range(0, t.shape[0], D0) for c in range(0, t.shape[1], D1)]
    outs = []
    for f in (wg, piped):
        c = np.full((m, n), np.nan, np.float32)
        Interpreter().run_grid(f, (-(-m // bm), -(-n // bn)),
                               [Buffer(a, f16), Buffer(b, f16), Buffer(c, f32), np.int64(m), np.int64(n),
                                np.int64(k)])
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.isnan(outs[0]).any()
