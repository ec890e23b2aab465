"""dg2's loads (no 2D block IO) and its GEMM k-loop (versioned on its loads being in bounds; both
versions compute C^T = B^T A^T from per-lane row loads, the cold one bounds-checked; where several
subgroups share a B tile the fast one reads B^T from a panel the workgroup packed in SLM), run on the
CPU device under ``XEJIT_EMULATE=dg2`` against float64 numpy, with the library GEMM's dg2 configs:
in-bounds tiles, boundary tiles (M, N and a K tail) and rows that are not 4-byte aligned (odd fp16
pitch: every row per element). Loads outside such loops (block reads with a bounds test per row)
are covered by the softmax / epilogue tests of this directory."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.helpers import check, f64, poisoned, rand, use_mode
from xejit.autotuner import Config
from xejit.ir.core import i32
from xejit.kernels.gemm import configs_for, gemm_kernel


def _config(bm, bn, bk, sg=None):
    """The library's dg2 config of that tile (with ``sg``: that tile over ``sg`` subgroups)."""
    if sg is not None:
        return Config({"BM": bm, "BN": bn, "BK": bk}, num_subgroups=sg, num_stages=2)
    return next(c for c in configs_for("dg2") if (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"]) == (bm, bn, bk))


def _run_library_gemm(monkeypatch, dtype, tile, shape, seed: int, col_b: bool):
    """The library GEMM with ``tile``'s config under dg2 emulation on random operands (B stored
    [N, K] and passed transposed when ``col_b``), checked against float64 numpy."""
    use_mode(monkeypatch, "dg2")
    cfg = _config(*tile)
    M, N, K = shape
    rng = np.random.default_rng(seed)
    a = rand(rng, (M, K), dtype)
    b = rand(rng, (N, K), dtype).T if col_b else rand(rng, (K, N), dtype)
    c = poisoned((M, N), "i32" if dtype == "i8" else dtype)
    kw = {"ACC": i32} if dtype == "i8" else {}
    gemm_kernel[(xejit.cdiv(M, cfg.kwargs["BM"]), xejit.cdiv(N, cfg.kwargs["BN"]))](
        a, b, a, c, M, N, K, **cfg.kwargs, **kw, num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    check(c, f64(a) @ f64(b), "int" if dtype == "i8" else dtype, scale_by_max=True)


@pytest.mark.parametrize("dtype,tile,shape", [
    ("f16", (64, 128, 16), (64, 128, 64)),    # every tile in bounds: the fast k-loop only
    ("f16", (64, 128, 16), (50, 72, 40)),     # M / N edges and a K tail: the cold version
    ("f16", (128, 64, 16), (24, 40, 33)),     # K odd: A rows not 4-byte aligned, read per element
    ("f16", (64, 64, 32), (64, 64, 96)),      # BK=32, B staged in SLM
    # BK=32 (two K-blocks a step) with subgroups on several A rows and B^T packed per subgroup
    # (32x16 tiles: not staged): wrong on subgroups 4 and up while the lane id was read once
    # outside the loop (lane_here)
    ("f16", (64, 64, 32, 8), (64, 64, 96)),
    ("f16", (64, 64, 32, 8), (72, 40, 70)),   # ... with edges: both versions in one launch
    ("f16", (8, 256, 16, 16), (5, 300, 48)),  # decode 8x16 tiles, an N edge
    ("f16", (8, 256, 16), (8, 512, 64)),      # decode 8x32 tiles (8 subgroups)
    ("f16", (8, 256, 16), (3, 260, 40)),
    ("i8", (8, 256, 32), (6, 270, 70)),       # int8 decode 8x32 tiles, edges, rows of 70 bytes
    ("i8", (32, 64, 32), (64, 64, 96)),
    ("i8", (32, 64, 32), (40, 56, 70)),       # int8 boundary tiles, rows of 70 bytes
    ("i8", (64, 64, 32), (72, 64, 64)),       # int8 16x16 subgroup tiles, an M edge
    # B staged in SLM by the workgroup (32 subgroups, 4 share each B tile): in-bounds workgroups
    # (several k-steps: both buffers) next to edge workgroups that take the cold version together
    ("f16", (128, 64, 16), (200, 128, 80)),
    ("i8", (128, 64, 32), (128, 100, 160)),
    ("f16", (256, 64, 32), (300, 64, 96)),    # 64 subgroups, two K-blocks a k-step
    # the staged fast loop takes two k-steps an iteration (a buffer each): even step counts,
    # none left over (4 steps) and the shortest pair (2 steps)
    ("f16", (256, 64, 32), (256, 64, 128)),
    ("i8", (128, 64, 32), (128, 64, 64)),
    # several B descriptors (K-slices of 32 rows) staged in one panel, one barrier a k-step,
    # DPAS in K-block order: in-bounds and edge workgroups (M and N), odd step counts, a K tail
    pytest.param("f16", (256, 64, 128), (300, 100, 384), marks=pytest.mark.slow),  # ~20 s
    ("f16", (256, 64, 64), (256, 64, 360)),   # 5 steps and a K tail
    # four K-slices a panel: the two-slice case above takes the same path (~19 s of CPU to build)
    pytest.param("f16", (256, 64, 128), (256, 64, 200), marks=pytest.mark.slow),
    pytest.param("bf16", (256, 64, 128), (260, 64, 256), marks=pytest.mark.slow),  # bf16: fp16's packing
    pytest.param("i8", (256, 64, 256), (300, 64, 768), marks=pytest.mark.slow),  # ~30 s
    # 16 words a work item, odd step count, an M edge (~30 s; int8 staged in the default run: BK=128)
    pytest.param("i8", (256, 64, 512), (300, 64, 1536), marks=pytest.mark.slow),
    ("i8", (256, 64, 128), (256, 72, 384)),
    # 32 subgroup rows share a 32-column panel (the 4096^3 picks' 512x32 workgroups): in-bounds and
    # edge workgroups (M and N), odd step count; the library's BK=256 / 512 take the same path
    # with 8 / 16 K-blocks a barrier (slow: about 2.5 min of CPU each, mostly the CPU device's build)
    ("f16", (512, 32, 32, 64), (520, 40, 96)),
    pytest.param("f16", (512, 32, 256), (512, 32, 512), marks=pytest.mark.slow),
    pytest.param("i8", (512, 32, 512), (520, 40, 1536), marks=pytest.mark.slow),
    ("f16", (8, 128, 32), (5, 200, 72)),      # decode, two K-blocks, B^T packed per subgroup
    # decode 8x32 tiles, B^T packed (fp16 / bf16 take no column parity: parity_dpas.parity_mode).
    # BK=32 in bounds over several k-steps; odd N (B rows not 4-byte aligned: per element in the
    # cold version) with odd K and an M edge; an N edge splitting a pair of column blocks; bf16
    ("f16", (8, 256, 32), (8, 512, 128)),
    ("f16", (8, 256, 32), (5, 301, 75)),
    ("f16", (8, 256, 16), (7, 264, 48)),
    pytest.param("bf16", (8, 256, 16), (8, 256, 64), marks=pytest.mark.slow),   # ~11 s: fp16's path
    # 8 subgroups side by side: 3 k-steps, an N edge with K in bounds (one version a workgroup),
    # 16 subgroups (8x16 tiles) and BK=16 (int8's staged A^T spread: test_int8_row_major_decode_...)
    ("f16", (8, 256, 32), (8, 256, 96)),
    ("f16", (8, 256, 32), (8, 300, 128)),
    ("f16", (8, 256, 16), (8, 512, 48)),
])
def test_library_gemm_on_dg2(monkeypatch, dtype, tile, shape):
    M, N, K = shape
    _run_library_gemm(monkeypatch, dtype, tile, shape, M * 7 + N + K, col_b=False)


@pytest.mark.parametrize("dtype,tile,shape", [
    ("f16", (8, 256, 32, 16), (8, 256, 128)),  # decode, in bounds: each lane reads its B^T row
    ("f16", (8, 128, 16), (5, 200, 72)),      # decode with an N edge and a K tail: the cold version
    ("f16", (8, 256, 16), (8, 512, 64)),      # decode 8x32 tiles
    # two K-blocks a step, subgroups on several A rows (the old defect: lane_here)
    ("f16", (64, 64, 32), (64, 64, 96)),
    ("f16", (32, 64, 32), (32, 64, 96)),
    ("f16", (128, 64, 16), (128, 64, 64)),    # 16x16 subgroup tiles, one K-block a step
    ("i8", (8, 256, 32), (8, 256, 96)),
    ("i8", (32, 64, 32), (40, 56, 70)),       # int8 edges, rows of 70 bytes (not 4-byte aligned)
    # B's lane rows read at each DPAS (8x64 decode tiles: 64 words a K-block) in the fast version,
    # clamped and selected (per element when the columns leave the view) in the cold one
    ("f16", (8, 512, 16, 8), (8, 1024, 64)),
    ("f16", (8, 512, 32, 8), (8, 512, 160)),
    ("f16", (8, 512, 16, 8), (7, 600, 49)),   # M / N edges, K odd: rows not 4-byte aligned
    ("f16", (8, 256, 32, 8), (6, 300, 70)),   # cold version only: N edge, a K tail
    ("i8", (8, 256, 32), (6, 270, 70)),       # int8 edges, rows of 70 bytes
    # A staged in SLM by the workgroup (decode_slm.py): 3 k-steps (the paired loop leaves
    # between its copies), an N edge with K in bounds (one version for the whole workgroup:
    # its first subgroup's tile is in bounds, the others' not), int8 with idle subgroups
    ("f16", (8, 256, 32, 8), (8, 512, 96)),
    ("f16", (8, 256, 32, 8), (8, 300, 128)),
    ("i8", (8, 256, 32, 16), (8, 256, 128)),
    # int8 8x64 decode tiles (~20 s of CPU to build): the fp16 8x64 cases above take the same
    # per-DPAS lane-row reads, the int8 8x32 cases int8's
    pytest.param("i8", (8, 512, 64, 8), (8, 512, 192), marks=pytest.mark.slow),
    # the library's 8x64 decode tiles (8x512x32/8sg), B's lane rows read one DPAS ahead (two in
    # the fast version) with A staged: 3 k-steps over two workgroups; an N edge (the second
    # workgroup's cold version, read one ahead, next to the first one's fast version); int8 over 3
    # k-steps; int8 8x1024 over 16 subgroups (64 words of A for 128 work items: idle writers)
    ("f16", (8, 512, 32), (8, 1024, 96)),
    ("f16", (8, 512, 32), (8, 700, 128)),
    ("i8", (8, 512, 32), (8, 512, 96)),
    ("i8", (8, 1024, 32, 16), (8, 1024, 64)),
    pytest.param("bf16", (8, 512, 32), (8, 520, 64), marks=pytest.mark.slow),   # fp16's path
    # A staged from two descriptors (BK=64 fp16, 128 int8: four K-blocks a k-step, one barrier),
    # DPAS in K-block pairs, A's SLM loads at their first DPAS: N edges (the second workgroup's
    # cold version next to the first one's fast one; int8's cold version by single K-blocks, A
    # gathered and B's bytes read at their DPAS), fp16 over 3 k-steps (the paired loop's leftover
    # step); slow (int8 ~12 s of CPU each): in bounds over several steps, M / N edges with a K
    # tail, int8 BK=64 (one descriptor)
    # (bf16: fp16's k-loop; after it its C is stored from the block's corner, corner_stores)
    ("bf16", (8, 512, 64, 8), (8, 700, 192)),
    pytest.param("bf16", (8, 512, 64, 8), (5, 600, 130), marks=pytest.mark.slow),
    pytest.param("f16", (8, 512, 64, 8), (8, 700, 192), marks=pytest.mark.slow),
    pytest.param("i8", (8, 512, 128, 8), (8, 530, 256), marks=pytest.mark.slow),
    pytest.param("f16", (8, 512, 64, 8), (8, 1024, 256), marks=pytest.mark.slow),
    pytest.param("f16", (8, 512, 64, 8), (5, 600, 200), marks=pytest.mark.slow),
    pytest.param("i8", (8, 512, 128, 8), (8, 512, 384), marks=pytest.mark.slow),
    # the int8 pick: M / N edges, a K tail (its cold version's per-element row reads run, out of
    # line: emulation.inline_or_outlined; its emulated build 6.0 s with them inlined, 1.3 s now)
    ("i8", (8, 512, 128, 8), (7, 530, 300)),
    pytest.param("i8", (8, 512, 64, 8), (8, 600, 192), marks=pytest.mark.slow),
])
def test_column_major_b_on_dg2(monkeypatch, dtype, tile, shape):
    """B stored [N, K] (a Linear layer's weights: ``a @ w.T``): its K pairs are adjacent, so in
    the fast k-loop lane l's B operand is row l of the block read as 8 words (no packing)."""
    M, N, K = shape
    _run_library_gemm(monkeypatch, dtype, tile, shape, M * 5 + N + K, col_b=True)


def test_two_k_blocks_take_the_transposed_product():
    """fp16 BK=32 tiles whose subgroups sit on several A rows and pack B^T themselves (no SLM
    staging) take C^T = B^T A^T (they kept the block reads while the lane id defect stood)."""
    cfg = _config(64, 64, 32, 8)
    a, b, c = (np.empty((256, 256), np.float16) for _ in range(3))
    ck = gemm_kernel.compile(a, b, a, c, 256, 256, 256, target="dg2", **cfg.kwargs,
                             num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    assert ck.instructions.get("k-loop computing C^T = B^T A^T (per-lane row loads)"), dict(ck.instructions)
    assert not any(k.startswith("SLM buffers") for k in ck.instructions), dict(ck.instructions)


def test_column_major_b_read_by_lane_rows():
    """The fast k-loop of a column-major B takes the per-lane row reads (the report says so)."""
    cfg = _config(8, 256, 32, 16)
    a, w, c = np.empty((8, 256), np.float16), np.empty((256, 256), np.float16), np.empty((8, 256), np.float16)
    ck = gemm_kernel.compile(a, w.T, a, c, 8, 256, 256, target="dg2", **cfg.kwargs,
                             num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    assert ck.instructions.get("subgroup block read (lanerow)"), dict(ck.instructions)


@pytest.mark.parametrize("tile,helper,calls", [
    ((8, 256, 32, 8), "__xejit_row_elements_e16_w8", 8),   # column-major B: the cold version's B reads
    ((64, 64, 32, 8), "__xejit_transpose8_f32_8xfloat", 8),   # C^T -> C after the k-loop
])
def test_emulated_helpers_are_out_of_line(tile, helper, calls):
    """Under emulation the cold version's per-element row reads and the 8x8 transposes of C are
    one function each, called at every use (``emulation.inline_or_outlined``: the CPU driver built
    the int8 8x512x128 decode pick's 347 KB of SPIR-V with the row reads inline in 6.0 s, its 108 KB
    in 1.3 s); for the GPU they stay inline (Intel's compiler is given the code it was before)."""
    import re
    cfg = _config(*tile)
    M, N, K = tile[0], 512, 256
    a, w, c = np.empty((M, K), np.float16), np.empty((N, K), np.float16), np.empty((M, N), np.float16)
    b = w.T if tile[0] == 8 else w.reshape(K, N)
    kw = {**cfg.kwargs, "num_subgroups": cfg.num_subgroups, "num_stages": cfg.num_stages}
    llir = gemm_kernel.compile(a, b, a, c, M, N, K, target="dg2", emulate=True, **kw).asm["llir"]
    assert len(re.findall(rf"define internal [^\n]*@{helper}\(", llir)) == 1, helper
    assert len(re.findall(rf"call [^\n]*@{helper}\(", llir)) == calls
    assert helper not in gemm_kernel.compile(a, b, a, c, M, N, K, target="dg2", **kw).asm["llir"]


@pytest.mark.parametrize("dtype,tile", [("f16", (8, 256, 32, 8)), ("i8", (8, 256, 32, 16)), ("f16", (8, 512, 32, 8))])
def test_decode_a_staged_in_slm(dtype, tile):
    """Column-major B decode: A's panel is staged in SLM once per workgroup and each A operand
    is one per-lane SLM load (decode_slm.py); not where the subgroups share no A tile."""
    cfg = _config(*tile)
    dt = np.int8 if dtype == "i8" else np.float16
    a, w = np.empty((8, 512), dt), np.empty((1024, 512), dt)
    c = np.empty((8, 1024), np.int32 if dtype == "i8" else dt)
    kw = {"ACC": i32} if dtype == "i8" else {}
    ck = gemm_kernel.compile(a, w.T, a, c, 8, 1024, 512, target="dg2", **cfg.kwargs, **kw,
                             num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    assert ck.instructions.get("SLM load of an A operand (per lane, 8 words)"), dict(ck.instructions)
    assert ck.instructions.get("workgroup barrier (A staged, one a k-step)"), dict(ck.instructions)
    cfg = _config(64, 64, 32)      # A tiles differ between subgroup rows: no A staging
    a, w, c = (np.empty((256, 256), np.float16) for _ in range(3))
    ck = gemm_kernel.compile(a, w.T, a, c, 256, 256, 256, target="dg2", **cfg.kwargs,
                             num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    assert not ck.instructions.get("SLM load of an A operand (per lane, 8 words)"), dict(ck.instructions)


@xejit.kernel
def _mod_after_bool(x, y, BM: xl.constexpr, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [BM, BN]))
    t = t.to(xl.int1).to(xl.float32)
    t = (t.to(xl.int32) % 3).to(xl.float32)
    xl.store_tile(xl.init_tile(y, [0, 0], [BM, BN]), t)


@xejit.kernel
def _mod3(x, y, BM: xl.constexpr, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [BM, BN]), (t.to(xl.int32) % 3).to(xl.float32))


@pytest.mark.parametrize("mode", ["dg2", "pvc"])
def test_int_remainder_after_a_bool_cast(monkeypatch, mode):
    """instcombine turned the selects of bool -> float into `uitofp <8 x i1>`, which crashed LLVM's
    SPIR-V backend (issue 13's dg2 leftover); `%` has C semantics (np.fmod)."""
    use_mode(monkeypatch, mode)
    rng = np.random.default_rng(3)
    x = (rng.uniform(-50, 50, (8, 16)) * rng.integers(0, 2, (8, 16))).astype(np.float32)   # zeros too
    y = poisoned((8, 16), "f32")
    _mod_after_bool[(1,)](x, y, BM=8, BN=16)
    check(y, np.fmod((x != 0).astype(np.int32), 3).astype(np.float64), "int")
    y = poisoned((8, 16), "f32")
    _mod3[(1,)](x, y, BM=8, BN=16)
    check(y, np.fmod(x.astype(np.int32), 3).astype(np.float64), "int")


@pytest.mark.parametrize("dtype,tile,staged", [
    ("f16", (128, 64, 16), True), ("i8", (128, 64, 32), True), ("i8", (32, 64, 32), True),
    ("f16", (256, 64, 32), True), ("f16", (64, 64, 32), True),
    ("f16", (256, 64, 128), True), ("f16", (256, 64, 64), True), ("i8", (256, 64, 256), True),
    # 16 words a work item: int8's (~28 s of Intel's compiler, loaded) slow, fp16's below takes it
    pytest.param("i8", (256, 64, 512), True, marks=pytest.mark.slow),
    ("f16", (256, 64, 256), True),    # 16 words a work item (pruned: spills 128 B)
    ("f16", (512, 32, 256), True),   # the fp16 4096^3 pick; int8's (~30 s to build) slow:
    pytest.param("i8", (512, 32, 512), True, marks=pytest.mark.slow),
    ("f16", (256, 128, 16), False),   # 32x16 accumulators: staging made the cold version spill
    ("f16", (8, 256, 16), False),     # decode: no subgroup shares a B tile
])
def test_b_panel_staged_in_slm_where_shared(dtype, tile, staged):
    """The configs whose correctness the cases above prove take the SLM staging (and the report
    says so); the ones it would not help keep the per-subgroup packing."""
    cfg = _config(*tile)
    et, ct, kw = (np.int8, np.int32, {"ACC": i32}) if dtype == "i8" else (np.float16, np.float16, {})
    a, b, c = np.empty((256, 256), et), np.empty((256, 256), et), np.empty((256, 256), ct)
    ck = gemm_kernel.compile(a, b, a, c, 256, 256, 256, target="dg2", **cfg.kwargs, **kw,
                             num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    assert any(k.startswith("SLM buffers") for k in ck.instructions) == staged, dict(ck.instructions)


@xejit.kernel
def _gemm_onto_c(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    """c += a @ b: the k-loop's accumulators start from c's tile (not a splat)."""
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    tc = xl.init_tile(c, [m, n], [BM, BN])
    acc = xl.load_tile(tc)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(tc, acc)


def _parity_onto_c(monkeypatch, a, b, c0, BN: int = 256):
    """c0 + a @ b by ``_gemm_onto_c`` with 8xBNx32/8sg decode tiles under dg2 emulation, after
    checking that the compile takes column parity (c0 is left as it was)."""
    (M, K), N = a.shape, b.shape[1]
    kw = {"BM": 8, "BN": BN, "BK": 32, "num_subgroups": 8, "num_stages": 2}
    ck = _gemm_onto_c.compile(a, b, c0, M, N, K, target="dg2", **kw)
    assert ck.instructions.get("dpas (column parity: 1 / v of the columns, 8 rows of K)"), dict(ck.instructions)
    use_mode(monkeypatch, "dg2")
    c = c0.copy()
    _gemm_onto_c[(xejit.cdiv(M, 8), xejit.cdiv(N, BN))](a, b, c, M, N, K, **kw)
    return c


@pytest.mark.parametrize("shape", [(8, 512, 96), (6, 264, 80)])
def test_column_parity_accumulators_start_from_c(monkeypatch, shape):
    """int8 decode 8x32 tiles by byte parity (parity_dpas.py) whose accumulators start from a
    loaded tile: each group of four 8-column blocks is split into parity parts on the way into
    the fast k-loop and joined on the way out (in bounds; with M / N edges and a K tail, where
    the cold version packs B^T and both versions meet)."""
    M, N, K = shape
    rng = np.random.default_rng(M + N + K)
    a = rng.integers(-128, 128, size=(M, K)).astype(np.int8)
    b = rng.integers(-128, 128, size=(K, N)).astype(np.int8)
    c0 = rng.integers(-2**20, 2**20, size=(M, N)).astype(np.int32)
    c = _parity_onto_c(monkeypatch, a, b, c0)
    np.testing.assert_array_equal(c, c0 + a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("tile,shape", [
    ((8, 256, 32), (8, 512, 128)),       # in bounds: the staged spread, 4 k-steps (two loop pairs)
    # 8x64 tiles: two column groups a subgroup, their DPAS issued together unit by unit, a spread
    # load for two DPAS (parity_dpas.spreads_kept); in bounds over 4 k-steps, then one workgroup
    # in bounds and one past N (K in bounds), then M / N edges and a K tail (both cold: B by
    # parity there too, the spread on registers)
    ((8, 512, 32), (8, 1024, 128)),
    pytest.param((8, 512, 32), (8, 700, 128), marks=pytest.mark.slow),
    ((8, 512, 32), (5, 600, 100)),
    # 3 k-steps: the paired loop leaves between its copies (fp16's case above takes that path)
    pytest.param((8, 256, 32), (8, 256, 96), marks=pytest.mark.slow),
    # an N edge with K in bounds (one version a workgroup; the M / N / K edge case below takes
    # the cold version too)
    pytest.param((8, 256, 32), (8, 300, 128), marks=pytest.mark.slow),
    ((8, 256, 32), (6, 270, 100)),       # M / N edges and a K tail: the cold version packs B^T
    ((8, 512, 32, 16), (8, 512, 64)),    # 16 subgroups, 8 words of A's row a k-step: idle ones
])
def test_int8_row_major_decode_by_column_parity(monkeypatch, tile, shape):
    """int8 decode 8x32 and 8x64 tiles with row-major B: B read unpacked, four DPAS a group by
    byte parity (parity_dpas.py), the A^T spread staged in SLM by the workgroup (decode_slm.py)
    in the fast version, made on registers in the cold one (parity_mode "registers"); int8
    values over the whole byte range (negatives, -128 and 127 included) against exact int64
    numpy."""
    M, N, K = shape
    cfg = _config(*tile)
    rng = np.random.default_rng(M * 7 + N + K)
    a = rng.integers(-128, 128, size=(M, K)).astype(np.int8)
    b = rng.integers(-128, 128, size=(K, N)).astype(np.int8)
    a[0, :2], b[:2, 0] = (-128, 127), (-128, 127)
    a[-1, -3:], b[-3:, -1] = (-128, -128, 127), (-128, 127, -128)      # in the K tail and the edges
    c = poisoned((M, N), "i32")
    kw = dict(**cfg.kwargs, ACC=i32, num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    ck = gemm_kernel.compile(a, b, a, c, M, N, K, target="dg2", **kw)
    assert ck.instructions.get("dpas (column parity: 1 / v of the columns, 8 rows of K)"), dict(ck.instructions)
    assert ck.instructions.get("A^T spread staged by the workgroup (per lane: its words' v parities)"), \
        dict(ck.instructions)
    use_mode(monkeypatch, "dg2")
    gemm_kernel[(xejit.cdiv(M, cfg.kwargs["BM"]), xejit.cdiv(N, cfg.kwargs["BN"]))](a, b, a, c, M, N, K, **kw)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("dtype,BN,BK", [
    ("f16", 256, 16), pytest.param("bf16", 256, 16, marks=pytest.mark.slow),
    ("f16", 512, 32),       # 8x64 tiles: four column groups, a spread for all of them
])
def test_float_row_major_decode_keeps_non_finite_b_in_its_column(monkeypatch, dtype, BN, BK):
    """Decode 8x32 tiles with row-major fp16 / bf16 B holding an Inf, a -Inf and a NaN: each stays
    in its own column (numpy's Inf / NaN there), every other column matches float64 numpy. By
    column parity (parity_dpas.py) a DPAS A operand word holds two of B's columns and the A^T
    spread zeroes only the other half, so 0 x Inf puts NaN in the partner column: the subgroups
    that see a NaN run the loop again by the cold version, exact: B's rows masked to each
    parity's fields (parity_mode "staged-checked", "registers-masked")."""
    M, N, K = 8, 1024, 64
    rng = np.random.default_rng(17)
    a, b = rand(rng, (M, K), dtype), rand(rng, (K, N), dtype)
    a[a == 0] = 1            # a zero A element would make numpy's own 0 x Inf
    b[3, 0], b[5, 9], b[20, 130] = np.inf, np.nan, -np.inf
    c = poisoned((M, N), dtype)
    kw = {"BM": 8, "BN": BN, "BK": BK, "num_subgroups": 8, "num_stages": 2}
    ck = gemm_kernel.compile(a, b, a, c, M, N, K, target="dg2", **kw)
    assert ck.instructions.get("dpas (column parity: 1 / v of the columns, 8 rows of K)"), dict(ck.instructions)
    use_mode(monkeypatch, "dg2")
    gemm_kernel[(xejit.cdiv(M, 8), xejit.cdiv(N, BN))](a, b, a, c, M, N, K, **kw)
    ref, got = f64(a) @ f64(b), f64(c)
    bad = ~np.isfinite(ref).all(axis=0)
    assert list(np.flatnonzero(bad)) == [0, 9, 130]
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref), "non-finite values outside their columns")
    np.testing.assert_array_equal(np.isnan(got[:, bad]), np.isnan(ref[:, bad]))
    np.testing.assert_array_equal(got[:, bad][np.isinf(ref[:, bad])], ref[:, bad][np.isinf(ref[:, bad])])
    check(got[:, ~bad], ref[:, ~bad], dtype, scale_by_max=True)


@pytest.mark.parametrize("dtype,tile,shape", [
    ("f16", (8, 256, 32), (8, 512, 128)),     # in bounds: the staged spread, 4 k-steps
    ("f16", (8, 256, 32), (6, 270, 100)),     # M / N edges and a K tail: the cold version
    pytest.param("bf16", (8, 256, 32), (8, 512, 128), marks=pytest.mark.slow),
    # 8x64 tiles (four column groups of two parities): in bounds over 4 k-steps; M / N edges and
    # a K tail (the cold version: a parity at a time, B's rows masked); one workgroup past N
    ("f16", (8, 512, 32), (8, 1024, 128)),
    ("f16", (8, 512, 32), (5, 600, 100)),
    pytest.param("bf16", (8, 512, 32), (8, 700, 128), marks=pytest.mark.slow),
])
def test_float_row_major_decode_by_column_parity(monkeypatch, dtype, tile, shape):
    """fp16 / bf16 decode 8x32 tiles with row-major B by column parity (parity_dpas.py, the A^T
    spread staged by the workgroup), finite B against float64 numpy: the parity loop's result
    is taken where it holds no NaN."""
    M, N, K = shape
    cfg = _config(*tile)
    rng = np.random.default_rng(M * 5 + N + K)
    a, b = rand(rng, (M, K), dtype), rand(rng, (K, N), dtype)
    c = poisoned((M, N), dtype)
    kw = dict(**cfg.kwargs, num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    ck = gemm_kernel.compile(a, b, a, c, M, N, K, target="dg2", **kw)
    assert ck.instructions.get("dpas (column parity: 1 / v of the columns, 8 rows of K)"), dict(ck.instructions)
    use_mode(monkeypatch, "dg2")
    gemm_kernel[(xejit.cdiv(M, cfg.kwargs["BM"]), xejit.cdiv(N, cfg.kwargs["BN"]))](a, b, a, c, M, N, K, **kw)
    check(c, f64(a) @ f64(b), dtype)


@pytest.mark.parametrize("BN", [256, pytest.param(512, marks=pytest.mark.slow)])
def test_float_column_parity_runs_again_from_c(monkeypatch, BN):
    """c += a @ b with fp32 accumulators from c's tile, fp16 row-major B by column parity: a NaN
    in c (its own element only) and an Inf in B (its own column only) make the subgroups that
    see them run the loop again packed from c's values, not from the parity loop's (whose
    accumulators went through the parity split); the other subgroups keep the parity result."""
    M, N, K = 8, 512, 96
    rng = np.random.default_rng(29)
    a, b = rand(rng, (M, K), "f16"), rand(rng, (K, N), "f16")
    a[a == 0] = 1
    c0 = rand(rng, (M, N), "f32")
    c0[2, 40] = np.nan
    b[7, 301] = np.inf
    c = _parity_onto_c(monkeypatch, a, b, c0, BN)
    with np.errstate(invalid="ignore"):
        ref = f64(c0) + f64(a) @ f64(b)
    np.testing.assert_array_equal(np.isnan(c), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(c), np.isinf(ref))
    fin = np.isfinite(ref)
    check(np.where(fin, c, 0), np.where(fin, ref, 0), "f16", scale_by_max=True)


@pytest.mark.parametrize("dtype,tile,parity", [
    ("i8", (8, 256, 32, 8), True), ("i8", (8, 32, 32, 1), False),
    ("f16", (8, 256, 16, 8), True), ("f16", (8, 32, 32, 1), False),
])
def test_column_parity_only_with_the_spread_staged(dtype, tile, parity):
    """Decode 8x32 tiles take column parity (integer B, or float B checked for a NaN after the
    loop) only with the A^T spread staged by the workgroup (one subgroup: nothing to share, and
    on registers the spread costs more than the packing): parity_dpas.parity_mode."""
    cfg = _config(*tile)
    et, ct, kw = (np.int8, np.int32, {"ACC": i32}) if dtype == "i8" else (np.float16, np.float16, {})
    a, b, c = np.empty((8, 256), et), np.empty((256, 512), et), np.empty((8, 512), ct)
    ck = gemm_kernel.compile(a, b, a, c, 8, 512, 256, target="dg2", **cfg.kwargs, **kw,
                             num_subgroups=cfg.num_subgroups, num_stages=cfg.num_stages)
    got = bool(ck.instructions.get("dpas (column parity: 1 / v of the columns, 8 rows of K)"))
    assert got == parity, dict(ck.instructions)
