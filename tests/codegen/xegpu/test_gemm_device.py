"""GEMMs through the XeGPU path, run on the CPU device with DPAS and 2D block IO emulated, against
float64 numpy (random non-zero inputs, poisoned outputs; bf16/fp16 1e-2, tf32 1e-3 relative to
the largest output, integers exact)."""
from __future__ import annotations

import numpy as np
import pytest

from xejit.codegen import lower_xegpu
from xejit.ir.core import bf16_bits_to_f32

from .helpers import (
    _torch_like,
    check_result,
    gemm_case,
    lower_pipelined,
    run_compiled,
    run_device,
    sg_function,
)
from .kernels import gemm, gemm_bias_relu

TOL = {"bf16": 1e-2, "f16": 1e-2, "f32": 1e-3, "i8": 0}


@pytest.fixture(scope="module", autouse=True)
def device():
    from xejit.runtime import default_device
    return default_device()  # no device is a failure here, not a skip


def _run(target, dtype, shape, tile, *, b_col=False, stages=3, expect_fallback=False):
    case = gemm_case(gemm, dtype, *shape, *tile, b_colmajor=b_col)
    res = lower_pipelined(case["fn"], target, emulate=True, stages=stages)
    if target != "dg2":
        assert bool(res["fallbacks"]) == expect_fallback, res["fallbacks"]
    run_device(res, case["grid"], case["args"], 8 if target == "dg2" else 16)
    check_result(case, TOL[dtype])
    return res


FAST = [
    # target, dtype, (M, N, K), (BM, BN, BK), B column-major, 2D-block fallback expected
    ("pvc", "bf16", (64, 64, 64), (16, 32, 32), False, False),       # aligned
    ("pvc", "f16", (37, 45, 70), (16, 32, 32), False, True),         # unaligned shapes, A pitch 140 B
    ("pvc", "f16", (37, 56, 72), (16, 32, 32), False, False),        # unaligned shapes, 2D block OOB
    ("pvc", "f32", (24, 40, 40), (16, 32, 16), False, False),        # tf32
    ("pvc", "i8", (24, 48, 96), (16, 32, 64), False, False),         # int8 -> int32, exact
    ("pvc", "bf16", (16, 32, 48), (16, 32, 16), True, False),        # B column-major: transposed loads
    ("pvc", "i8", (24, 48, 96), (16, 32, 64), True, False),          # int8 B column-major: 32-bit transposed
    ("dg2", "bf16", (24, 24, 48), (8, 16, 32), False, False),
    ("pvc", "f32", (1, 16, 16), (1, 16, 8), False, False),           # tf32, M = 1 (rows interleaved)
    # the decode picks' subgroup tiles (autotuner.decode_b_kstep_limit): 8x128, int8 at BK=64, fp16
    # at BK=32; several k-steps, a K tail (int8 16: half a DPAS K-block), M / N edges
    ("pvc", "i8", (5, 144, 400), (8, 128, 64), False, False),
    ("pvc", "f16", (5, 136, 104), (8, 128, 32), False, False),
]


@pytest.mark.parametrize("target,dtype,shape,tile,b_col,fallback", FAST,
                         ids=[f"{t}-{d}-{'x'.join(map(str, s))}{'-colB' if c else ''}" for t, d, s, _, c, _ in FAST])
def test_gemm_emulated(target, dtype, shape, tile, b_col, fallback):
    _run(target, dtype, shape, tile, b_col=b_col, expect_fallback=fallback)


SLOW = [
    ("dg2", "i8", (24, 40, 96), (16, 32, 64), False, False),  # dg2 int8 in the default run: test_dg2_block_reads
    ("pvc", "bf16", (40, 72, 80), (32, 64, 32), False, False),       # the 32x64 subgroup tile
    ("pvc", "f16", (40, 72, 80), (32, 64, 32), True, False),
    ("pvc", "f32", (24, 40, 40), (16, 32, 16), True, False),         # tf32, B column-major
    ("pvc", "i8", (24, 40, 70), (16, 32, 64), False, True),          # int8 with unaligned pitches
    ("pvc", "i8", (37, 44, 96), (16, 32, 64), True, False),          # int8 column-major B, boundary tiles
    ("bmg", "bf16", (33, 40, 64), (16, 32, 32), False, False),
    ("lnl", "f16", (16, 32, 64), (16, 32, 32), True, False),
    ("dg2", "f16", (37, 45, 70), (16, 32, 32), True, False),
    ("dg2", "bf16", (40, 72, 80), (32, 64, 32), False, False),
    ("pvc", "f16", (4, 32, 64), (4, 32, 32), False, False),          # DPAS M = 4
    ("pvc", "i8", (2, 32, 64), (2, 16, 32), False, False),           # DPAS M = 2
    ("dg2", "i8", (1, 8, 64), (1, 8, 32), False, False),             # DPAS M = 1
    ("pvc", "i8", (32, 32, 256), (32, 32, 128), False, False),       # int8's BK=128 configs (137 s)
    ("pvc", "f16", (40, 32, 200), (32, 32, 64), False, False),       # 32x32 tiles, BK=64, K tail (93 s)
    ("pvc", "i8", (5, 80, 128), (8, 64, 64), False, False),          # the 8x64 decode tile, M / N edges
]


@pytest.mark.slow
@pytest.mark.parametrize("target,dtype,shape,tile,b_col,fallback", SLOW,
                         ids=[f"{t}-{d}-{'x'.join(map(str, s))}{'-colB' if c else ''}" for t, d, s, _, c, _ in SLOW])
def test_gemm_emulated_more(target, dtype, shape, tile, b_col, fallback):
    _run(target, dtype, shape, tile, b_col=b_col, expect_fallback=fallback)


@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_gemm_bias_relu_bf16_output(target):
    rng = np.random.default_rng(3)
    M, N, K = 24, 48, 64
    case = gemm_case(gemm, "bf16", M, N, K, 8, 16, 32, seed=3)
    a, b = case["a"], case["b"]
    bias = rng.uniform(-1, 1, (1, N)).astype(np.float32)
    c = np.full((M, N), 0xFFFF, np.uint16)              # bf16 NaN poison
    fn = sg_function(gemm_bias_relu, _torch_like(a, "bf16"), _torch_like(b, "bf16"), bias,
                     _torch_like(c, "bf16"), M, N, K, BM=8, BN=16, BK=32)
    res = lower_xegpu.lower(fn, target, {"emulate": True})
    run_device(res, (M // 8, N // 16), [a, b, bias, c, M, N, K], 8 if target == "dg2" else 16)
    ref = np.maximum(case["ref"] + bias, 0.0)
    got = bf16_bits_to_f32(c).astype(np.float64)
    assert not np.isnan(got).any()
    assert np.abs(got - ref).max() <= 1e-2 * np.abs(ref).max()


@pytest.mark.slow
def test_workgroup_gemm_through_compile_kernel():
    """4 subgroups per workgroup: the generic engineer's passes distribute, this path lowers."""
    from xejit.codegen.compiler import compile_kernel
    M, N, K = 64, 96, 64
    case = gemm_case(gemm, "bf16", M, N, K, 32, 64, 32)
    mod = gemm.compile_ir(_torch_like(case["a"], "bf16"), _torch_like(case["b"], "bf16"), case["c"],
                          M, N, K, BM=32, BN=64, BK=32, num_subgroups=4)
    ck = compile_kernel(mod, "pvc", emulate=True)
    assert ck.path == "xegpu" and ck.instructions["dpas"] > 0
    run_compiled(ck, (-(-M // 32), -(-N // 64)), case["args"])
    check_result(case, 1e-2)


@pytest.mark.parametrize("nsg,ranges,b_col,dtype,bk,K", [
    pytest.param(4, ("[0, 2]", "[2, 4]"), False, "f16", 32, 96, marks=pytest.mark.slow),
    pytest.param(8, ("[0, 4]", "[4, 8]"), False, "f16", 32, 96, marks=pytest.mark.slow),
    (4, ("[0, 2]", "[2, 4]"), True, "f16", 32, 96),     # column-major B: 32 rows of N x 64 bytes of K a block
    # int8 column-major B two 64-byte blocks of K wide (N blocks fastest over its range); K tail
    pytest.param(8, ("[0, 4]", "[4, 8]"), True, "i8", 128, 272, marks=pytest.mark.slow),
])
def test_split_prefetch_gemm_through_compile_kernel(nsg, ranges, b_col, dtype, bk, K):
    """pvc's k-step prefetch split over subgroup ranges (A's blocks by subgroups 0-1, B's by 2-3 in
    32-row blocks; over 8 subgroups 16-row blocks, A's by 0-3, B's by 4-7) runs under emulation
    and leaves the values alone (M, N, K not multiples of the tiles)."""
    from xejit.codegen.compiler import compile_kernel
    M, N = 100, 72     # rows 16-byte aligned: 2D block loads (else A is gathered, not prefetched)
    case = gemm_case(gemm, dtype, M, N, K, 64, 64, bk, b_colmajor=b_col)
    mod = gemm.compile_ir(case["a"], case["b"], case["c"], M, N, K, BM=64, BN=64, BK=bk, num_subgroups=nsg)
    ck = compile_kernel(mod, "pvc", emulate=True, num_subgroups=nsg, num_stages=2)
    assert all(f"subgroups = {r}" in ck.asm["xegpu"] for r in ranges), ck.asm["xegpu"]
    run_compiled(ck, (-(-M // 64), -(-N // 64)), case["args"])
    check_result(case, TOL[dtype])


@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_load_padding_and_oob_store_drop(target):
    """x is smaller than the tiles: out-of-bounds reads give the padding, y (larger) shows it."""
    from .kernels import pad_copy
    x = np.random.default_rng(0).uniform(1, 2, (20, 40)).astype(np.float32)
    y = np.full((24, 48), np.nan, np.float32)
    fn = sg_function(pad_copy, x, y, BM=8, BN=16)
    res = lower_xegpu.lower(fn, target, {"emulate": True})
    if target == "pvc":   # a 2D block load and a select of the padding, not a fallback
        assert not res["fallbacks"], res["fallbacks"]
        assert res["instructions"]["select of the padding on out-of-bounds elements"] == 1
    run_device(res, (3, 3), [x, y], 8 if target == "dg2" else 16)
    want = np.full((24, 48), -6.0, np.float32)
    want[:20, :40] = 2 * x
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("shape,tile", [((8, 16, 64), (8, 16, 64)),
                                        pytest.param((16, 32, 32), (16, 32, 16), marks=pytest.mark.slow)],
                         ids=["narrow-B-per-lane-version", "wide-2d-block-version"])
def test_versioned_k_loop_runs_both_versions(shape, tile):
    """The real targets' control flow under emulation: the k-loop is versioned on the surface
    checks (B 16 f16 wide = 32 B < 64 B takes the per-lane version)."""
    case = gemm_case(gemm, "f16", *shape, *tile)
    res = lower_xegpu.lower(case["fn"], "pvc", {"emulate": True, "version_loops": True})
    assert str(res["module"]).count("for.body.1") >= 1
    run_device(res, case["grid"], case["args"], 16)
    check_result(case, 1e-2)


@pytest.mark.parametrize("shape,tile", [((37, 44, 48), (16, 32, 64)),
                                        pytest.param((100, 40, 48), (64, 32, 64), marks=pytest.mark.slow)],
                         ids=["16x32-tile", "64x32-tile-of-256x256x64"])
def test_per_lane_k_loop_version_gathers_int8_column_major_b_at_its_dpas(shape, tile):
    """int8 with column-major B in the per-lane version of the k-loop (K = 48: A's and B's rows are
    narrower than 64 B; a K tail in the k-step, M / N edges), whose operand blocks are gathered
    at their DPAS (the 64x32 subgroup tile of pvc's int8 pick spilled 192 B gathered at the load)."""
    case = gemm_case(gemm, "i8", *shape, *tile, b_colmajor=True)
    res = lower_xegpu.lower(case["fn"], "pvc", {"emulate": True, "version_loops": True})
    assert res["instructions"]["k-loop versioned on 2D block surface checks (width/pitch >= 64 B)"] == 1
    run_device(res, case["grid"], case["args"], 16)
    check_result(case, 0)


@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_gather_scatter_tiles_embedding_lookup(target):
    """xetile load_gather on a scatter tile (offsets from a column broadcast + arange), masked."""
    from .helpers import run_interp
    from .kernels import gather_rows
    rng = np.random.default_rng(5)
    table = rng.uniform(1, 2, (50, 32)).astype(np.float32)
    idx = rng.integers(-3, 50, (16, 1)).astype(np.int32)
    out = np.full((16, 32), np.nan, np.float32)
    fn = sg_function(gather_rows, table, idx, out, 32, BM=8, BN=32)
    want = np.where(idx >= 0, table[np.clip(idx[:, 0], 0, None)], -1.0)
    ref = out.copy()
    run_interp(fn, (2,), [table, idx, ref, 32])
    np.testing.assert_array_equal(ref, want)
    res = lower_xegpu.lower(fn, target, {"emulate": True})
    run_device(res, (2,), [table, idx, out, 32], 8 if target == "dg2" else 16)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_f32_ieee_gemm_uses_fmas(target):
    """Full-precision f32 has no DPAS: FMAs with shuffles in the same block layouts, exact to 1e-5."""
    rng = np.random.default_rng(2)
    M, N, K = 24, 40, 40
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    fn = sg_function(gemm, a, b, c, M, N, K, BM=16, BN=32, BK=16)
    res = lower_xegpu.lower(fn, target, {"emulate": True})
    assert any("input_precision='ieee' has no DPAS" in f for f in res["fallbacks"])
    run_device(res, (2, 2), [a, b, c, M, N, K], 8 if target == "dg2" else 16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(c - ref).max() <= 1e-5 * np.abs(ref).max()


def _usm_view(shape, dtype, misalign: int, rng):
    """An interior view of a USM buffer whose base address is ``misalign`` bytes past a 64-byte
    boundary (16-byte aligned, as 2D block IO requires), filled with random non-zero values."""
    from xejit.runtime import usm
    n, it = int(np.prod(shape)), np.dtype(dtype).itemsize
    buf = usm.empty(n + 64 // it, dtype)
    skip = ((misalign - buf.ctypes.data) % 64) // it
    v = buf[skip:skip + n].reshape(shape)
    assert v.ctypes.data % 64 == misalign
    v[...] = rng.uniform(0.25, 1.0, shape) * rng.choice([-1, 1], shape)
    return v


@pytest.mark.parametrize("misalign", [(16, 32, 48), (48, 0, 16)])
def test_gemm_emulated_with_bases_off_64_byte_boundaries(monkeypatch, misalign):
    """2D block IO aligns the base down to 64 bytes and moves x by the rest (as on the hardware):
    zero-copy USM views whose bases sit 16..48 bytes past a boundary exercise that arithmetic."""
    import xejit
    from tests.kernels import matmul
    monkeypatch.delenv("XEJIT_INTERPRET", raising=False)
    monkeypatch.setenv("XEJIT_EMULATE", "pvc")
    rng = np.random.default_rng(sum(misalign))
    M, N, K = 40, 64, 96
    a = _usm_view((M, K), np.float16, misalign[0], rng)
    b = _usm_view((K, N), np.float16, misalign[1], rng)
    c = _usm_view((M, N), np.float32, misalign[2], rng)
    c[...] = np.nan
    matmul[(xejit.cdiv(M, 16), xejit.cdiv(N, 32))](a, b, c, M, N, K, BM=16, BN=32, BK=32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert not np.isnan(c).any()
    assert np.abs(c - ref).max() <= 1e-5 * np.abs(ref).max()


def _transposed_loads(res) -> list:
    """``transpose_blocks`` of every transposed 2D block load of a lowered kernel."""
    return [op.attributes.get("transpose_blocks", 1) for op in res["xegpu_fn"].walk()
            if op.name == "xegpu.load_nd" and op.attributes.get("transpose") is not None]


COLB = [
    # dtype, (M, N, K), (BM, BN, BK), B blocks asked per load, transposed loads per k-step, got
    ("f16", (40, 56, 64), (32, 32, 32), 2, 2, 2),     # edge tiles in M and N (N 32..55 of 64 rows)
    ("bf16", (16, 64, 48), (16, 64, 16), 2, 2, 2),    # 4 B blocks side by side: 2 loads
    ("f32", (24, 40, 40), (16, 32, 16), 2, 2, 2),     # tf32: 8 words = 8 K per load, 2 loads per k-step
    ("i8", (37, 44, 96), (16, 32, 64), 2, 2, 2),      # int8: 8 words = 32 K; boundary tiles
    ("f16", (24, 40, 64), (16, 16, 32), 2, 2, 1),     # one B block wide: one block per load
    ("f16", (40, 56, 64), (32, 32, 32), 1, 4, 1),     # the default: one block per load
    ("i8", (37, 44, 96), (16, 32, 64), 1, 4, 1),
]


@pytest.mark.parametrize("dtype,shape,tile,per_load,loads,blocks", COLB,
                         ids=[f"{d}-{'x'.join(map(str, s))}-bn{t[1]}-{p}" for d, s, t, p, _, _ in COLB])
def test_column_major_b_loads_two_dpas_blocks_per_transposed_load(dtype, shape, tile, per_load, loads, blocks,
                                                                   monkeypatch):
    """A transposed load is at most 8 words wide and 32 rows tall: 32 rows of column-major B are
    two DPAS B blocks side by side, split per lane (Intel's compiler: register moves). Under
    emulation against float64 numpy, in the k-loop and at the edge tiles."""
    from xejit.codegen.passes import blocking
    monkeypatch.setattr(blocking, "TRANSPOSED_B_BLOCKS_PER_LOAD", per_load)
    res = _run("pvc", dtype, shape, tile, b_col=True)
    got = _transposed_loads(res)
    assert got == [blocks] * loads, got     # the k-loop body's transposed loads


def test_emulated_private_vectors_are_read_as_64_bit_words():
    """Under emulation a block read back from its private buffer (2D block loads, DPAS operands)
    is loaded as 64-bit words and bitcast: the CPU device's -O0 build gathers a private vector
    element by element for every lane (the emulated pvc f16 80x48x200 GEMM with both k-loop
    versions: driver build 3.1 s with <8 x half> loads, 0.45 s). GPU targets load the type."""
    import re
    case = gemm_case(gemm, "f16", 37, 56, 72, 16, 32, 32)
    loads = {emu: set(re.findall(r"load (<\d+ x \w+>), ", str(lower_xegpu.lower(case["fn"], "pvc", {"emulate": emu})["module"])))
             for emu in (True, False)}
    assert loads[True] and all(t.endswith("x i64>") for t in loads[True]), loads
    assert "<16 x half>" in loads[False], loads
