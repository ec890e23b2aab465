"""2D block coordinates on the real targets' code path, run under emulation: the fast version
of a versioned k-loop counts in i32 and moves its descriptors with the counter, and coordinates
that do not fit in i32 stay out of bounds (issue 13: row 2**32 + r was row r)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from xejit.codegen import block_coords, lower_xegpu, spirv

from .helpers import check_result, gemm_case, run_device, sg_function
from .kernels import gemm, row_band_sum


@pytest.fixture(scope="module", autouse=True)
def device():
    from xejit.runtime import default_device
    return default_device()


def _fast_loop(res) -> str:
    """The LLVM IR of the k-loop's fast (2D block) version: its counter is an i32 phi."""
    text = str(res["module"])
    assert re.search(r"%\"?iv\"? = phi\s+i32", text), "the fast version counts in i64"
    assert re.search(r"%\"?iv(\.\d+)?\"? = phi\s+i64", text), "the per-lane version keeps the i64 loop"
    return text


def test_fast_k_loop_counts_in_i32_and_moves_descriptors_with_the_counter():
    case = gemm_case(gemm, "f16", 8, 32, 64, 8, 32, 16)    # A 128 B, B 64 B wide: the 2D block version
    res = lower_xegpu.lower(case["fn"], "pvc", {"emulate": True, "version_loops": True})
    _fast_loop(res)
    run_device(res, case["grid"], case["args"], 16)
    check_result(case, 1e-2)


@pytest.mark.parametrize("R", [2**32, -2**32, 2**31, 2**32 + 8, 5])
def test_far_rows_in_a_fast_k_loop_read_padding(R):
    """Rows that do not fit in i32 read the padding (0) in every iteration of the fast version;
    an ordinary row (5) reads its band."""
    rng = np.random.default_rng(3)
    x = rng.uniform(1, 2, (16, 128)).astype(np.float32)
    y = np.full((8, 16), np.nan, np.float32)
    fn = sg_function(row_band_sum, x, y, R, 128, BM=8, BK=16)
    res = lower_xegpu.lower(fn, "pvc", {"emulate": True, "version_loops": True})
    _fast_loop(res)
    run_device(res, (1,), [x, y, R, 128], 16)
    want = np.zeros((8, 16))
    if 0 <= R < 16:
        rows = x.astype(np.float64)[R:R + 8]
        want[:len(rows)] = rows.reshape(len(rows), 8, 16).sum(axis=1)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_clamp_keeps_far_coordinates_out_of_every_surface():
    from llvmlite import ir
    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    for v, want in ((2**32 + 3, block_coords.FAR), (-2**40, -block_coords.FAR), (77, 77)):
        assert block_coords.clamp(b, ir.Constant(ir.IntType(64), v)).constant == want
    # far stays beyond any surface (< 2**24) after the moves the loop's span check allows
    assert block_coords.FAR - block_coords.LOOP_DRIFT > 2**24
    assert (block_coords.FAR + block_coords.LOOP_DRIFT) * 4 < 2**31


@pytest.mark.parametrize("dtype,M,N,K,BM", [
    pytest.param("f16", 8, 32, 100, 8, marks=pytest.mark.slow),   # decode: B's 2nd K-slice 32 rows down
    pytest.param("f16", 80, 48, 200, 64, marks=pytest.mark.slow),   # A's K-slices and row blocks too
    pytest.param("f16", 72, 40, 40, 64, marks=pytest.mark.slow),    # A too narrow to move, B rows past K
    pytest.param("i8", 24, 32, 304, 16, marks=pytest.mark.slow),
    pytest.param("f16", 16, 32, 24, 16, marks=pytest.mark.slow)])   # B's second K-slice below K
def test_descriptors_on_surfaces_of_their_own_in_a_fast_k_loop(dtype, M, N, K, BM):
    """pvc (no immediate block offsets): each descriptor the fast k-loop moves is based at its
    first block (``block_coords.own_surface``) -- the tile's K-slices and row blocks, shifted or
    not (A narrower than a 64-byte unit plus the minimum width, B rows past its height, the last
    row blocks below M): the results are those of the plain surfaces."""
    case = gemm_case(gemm, dtype, M, N, K, BM, 32, 128 if dtype == "i8" else 64)
    res = lower_xegpu.lower(case["fn"], "pvc", {"emulate": True, "version_loops": True})
    text = _fast_loop(res)
    assert "and i32" in text and ", -64" in text, "no descriptor moved to a surface of its own"
    run_device(res, case["grid"], case["args"], 16)
    check_result(case, 0 if dtype == "i8" else 1e-2)


@pytest.mark.parametrize("target,own", [("pvc", True), ("bmg", False)])
def test_k_slices_load_from_surfaces_of_their_own_where_blocks_lack_immediate_offsets(target, own):
    """The two K-slices of B (32x16x2 VNNI loads, Khronos builtins) in the fast k-loop: on pvc
    their loads name two surfaces (bases), so IGC does not share one payload and copy it per
    load; bmg's block messages take immediate offsets, so one surface stays (IGC's own choice)."""
    case = gemm_case(gemm, "f16", 8, 32, 100, 8, 32, 64)
    res = lower_xegpu.lower(case["fn"], target)
    llir, _, _ = spirv.optimize_and_emit(res["module"], res["extensions"])
    bases = set(re.findall(r"Subgroup2DBlockLoadTransformINTEL\w*\(i32 2, i32 16, i32 32, i32 2, "
                           r"ptr addrspace\(1\) (%[\w.]+),", llir))
    assert len(bases) == (2 if own else 1), bases


@pytest.mark.parametrize("target,messages,b_col", [("pvc", 1, False), ("bmg", 2, False), ("pvc", 1, True)])
def test_k_step_prefetch_is_one_message_per_subgroup_on_pvc(target, messages, b_col):
    """pvc: a k-step's A and B tiles are prefetched in 32-row blocks, A's by subgroups 0-1 and B's
    by 2-3 (``split_prefetch``), so the fast k-loop issues one prefetch per subgroup, on a payload
    chosen before the loop and moved in place; bmg keeps a prefetch of each tile per subgroup.
    Column-major B (b stored [N, K]) splits in its memory's blocks: 32 rows of N x 64 bytes of K."""
    from xejit.codegen.compiler import compile_kernel
    a = np.empty((256, 256), np.float16)
    b = np.empty((256, 256), np.float16).T if b_col else np.empty((256, 256), np.float16)
    mod = gemm.compile_ir(a, b, np.empty((256, 256), np.float32), 256, 256, 256, BM=64, BN=64, BK=32,
                          num_subgroups=4)
    ck = compile_kernel(mod, target, num_subgroups=4, num_stages=2)
    xegpu = ck.asm["xegpu"]
    assert ("subgroups = [0, 2]" in xegpu and "subgroups = [2, 4]" in xegpu) == (messages == 1)
    loop = ck.asm["llir"].split("for.body:")[1]
    loop = loop[:loop.index("\n\n")]
    assert loop.count("block_read_ap_prefetch") == messages, loop
    assert ("addBlock2DAddressPayloadBlockX" in loop) == (messages == 1)


@pytest.mark.parametrize("target,dtype,M,N,K,BM,BN,BK", [
    ("pvc", "i8", 40, 48, 208, 16, 32, 64),    # 4 int8 per 32-bit unit; N edge, K tail (208 = 3 x 64 + 16)
    pytest.param("bmg", "i8", 32, 32, 128, 32, 32, 128, marks=pytest.mark.slow),
    pytest.param("pvc", "f16", 24, 40, 72, 8, 32, 32, marks=pytest.mark.slow),   # 2 fp16 per unit; edges, K tail
])
def test_fast_k_loop_counts_in_units_of_transposed_loads(target, dtype, M, N, K, BM, BN, BK):
    """Column-major 8- / 16-bit B (transposed loads of 32-bit units): the fast k-loop counts in
    those units and each transposed load's x is the counter plus a loop-invariant (no shift per
    load); A's coordinates take the counter shifted back to elements. Results against numpy,
    under emulation (the fast version taken, K not a multiple of BK)."""
    case = gemm_case(gemm, dtype, M, N, K, BM, BN, BK, b_colmajor=True)
    res = lower_xegpu.lower(case["fn"], target, {"emulate": True, "version_loops": True})
    text = _fast_loop(res)
    n = 2 if dtype == "i8" else 1
    step = re.search(r"%\"?[\w.]+\"? = add i32 %\"?iv\"?, (\d+)", text)
    assert step and int(step.group(1)) == BK >> n, "the fast loop does not count in 32-bit units"
    run_device(res, case["grid"], case["args"], 16)
    check_result(case, 0 if dtype == "i8" else 1e-2)


@pytest.mark.parametrize("target", ["bmg", "pvc"])
def test_k_slices_of_tf32_column_major_b_share_the_counted_base_where_blocks_take_immediate_offsets(target):
    """tf32 column-major B (transposed loads, 8 K a slice, 4 slices a k-step): on bmg each K-slice's
    x in the fast k-loop is one (base + counter) plus its constant (IGC's immediate offset), on pvc
    each slice adds the counter to its own loop-invariant. Results against numpy under emulation
    (the fast version taken; M / N edges, a K tail)."""
    case = gemm_case(gemm, "f32", 20, 40, 72, 8, 32, 32, b_colmajor=True)
    res = lower_xegpu.lower(case["fn"], target, {"emulate": True, "version_loops": True})
    text = _fast_loop(res)
    body = text[text.index("for.body"):]
    consts = set(re.findall(r"= add i32 %\"?[\w.]+\"?, (8|16|24)\b", body))
    assert (consts == {"8", "16", "24"}) == (target == "bmg"), consts
    run_device(res, case["grid"], case["args"], 16)
    check_result(case, 2e-3)
