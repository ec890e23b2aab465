"""Generic target: a loop whose one write is a tile_mma accumulator updated in place (the GEMV's
column loop) is versioned: the iterations proved in bounds before the loop run without the
per-tile bounds test and masked code, the rest (a ragged last tile, a partial first one, a ragged
k step) take the full loop. gemv_kernel against float64 numpy on random non-zero inputs, its
partial sums poisoned, aligned and ragged shapes."""
from __future__ import annotations

import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.helpers import check, f64, poisoned, rand
from tests.matmul.backend import requires_device
from xejit.kernels.gemm import gemv_kernel
from xejit.matmul import _gemv_geometry

VERSIONED = "loops versioned on a hoisted bounds test"


def _run_gemv(M, N, K, slices, n0):
    rng = np.random.default_rng(M * 1000 + N + K + slices)
    a, b = rand(rng, (M, K), "f32"), rand(rng, (K, N), "f32")
    g = _gemv_geometry(M, N, K, slices, 1, n0)
    p = poisoned((g.grid[0] * M, N), "f32")
    gemv_kernel[g.grid](a, b, p, N, K, g.ks, g.width, g.n0, ACC=xl.float32, **g.meta)
    want = np.concatenate([f64(a)[:, s * g.ks:(s + 1) * g.ks] @ f64(b)[s * g.ks:(s + 1) * g.ks]
                           for s in range(g.grid[0])])
    check(p, want, "f32", scale_by_max=True)


def test_the_gemv_column_loop_is_versioned():
    a, b = np.ones((1, 64), np.float32), np.ones((64, 128), np.float32)
    p = np.zeros((1, 128), np.float32)
    counts = gemv_kernel.compile(a, b, p, 128, 64, 64, 128, 0, BM=1, BN=32, BK=8, RB=1, target="generic").instructions
    assert counts.get(VERSIONED) == 1
    assert counts.get("tile_mma accumulator updated in place") == 1   # counted per source op
    a8, p8 = np.ones((8, 64), np.float32), np.zeros((8, 128), np.float32)   # two strips of 4 rows
    counts = gemv_kernel.compile(a8, b, p8, 128, 64, 64, 128, 0, BM=8, BN=16, BK=16, RB=4,
                                 target="generic").instructions
    assert counts.get(VERSIONED) == 1
    assert counts.get("tile_mma accumulator updated in place") == 2
    # PEEL (a shifted first tile): that tile before the column loop, which is versioned
    counts = gemv_kernel.compile(a8, b, p8, 128, 64, 64, 128, -4, BM=8, BN=16, BK=16, RB=4, PEEL=True,
                                 target="generic").instructions
    assert counts.get(VERSIONED) == 1


def test_partial_b_rows_are_clamped_block_reads():
    """The boundary version reads a partial tile's b rows by block reads clamped into the array and
    a shuffle (uniform addresses), not lane by lane (which the CPU driver made 64-bit gathers)."""
    a, b = np.ones((1, 64), np.float32), np.ones((64, 70), np.float32)
    p = np.zeros((1, 70), np.float32)
    counts = gemv_kernel.compile(a, b, p, 70, 64, 64, 96, 0, BM=1, BN=32, BK=8, RB=1, target="generic").instructions
    assert counts.get("block_read_u32 (clamped boundary row)", 0) >= 2   # both column groups


# (M, N, K, K slices, first column): aligned; ragged N and K; N below one tile; the first tile
# partial (a negative start, as for an unaligned b at M >= 4); one row strip of 4 rows; two
# strips (M > 4: two in-place tile_mmas in the loop body); rows shorter than a subgroup (b's rows
# lane by lane, not clamped block reads); a partial first tile peeled at M = 1 (32 columns), the
# first two tiles partial (none peeled), a first tile 20 columns out (two row strips); a width 16
# divides and 32 does not (M <= 2: 16-column tiles, test_a_width_the_tile_does_not_divide_...)
@requires_device
@pytest.mark.parametrize("M,N,K,slices,n0", [(1, 256, 64, 2, 0), (1, 333, 50, 3, 0), (1, 20, 16, 1, 0),
                                             (2, 130, 40, 2, 0), (4, 200, 48, 2, -4), (4, 96, 32, 1, -12),
                                             (8, 256, 64, 2, 0), (7, 301, 50, 2, -3), (5, 96, 48, 1, 0),
                                             (1, 10, 24, 1, 0), (2, 1, 24, 1, 0), (1, 100, 24, 2, -4),
                                             (1, 90, 16, 1, -40), (8, 70, 32, 1, -20), (1, 272, 64, 2, 0),
                                             (2, 272, 64, 2, 0)])
def test_versioned_gemv(M, N, K, slices, n0):
    _run_gemv(M, N, K, slices, n0)


@xejit.kernel
def _halved_columns(a, b, p, N, K, BN: xl.constexpr, BK: xl.constexpr):
    """p (1 x N, zeroed by the caller) += a @ b with tile columns (2n) // 2: not affine in n, so
    the column loop keeps its per-tile test."""
    for k in range(0, K, BK):
        for n in range(0, N, BN):
            tp = xl.init_tile(p, [0, (2 * n) // 2], [1, BN])
            acc = xl.tile_mma(xl.load_tile(xl.init_tile(a, [0, k], [1, BK])),
                              xl.load_tile(xl.init_tile(b, [k, (2 * n) // 2], [BK, BN])), xl.load_tile(tp))
            xl.store_tile(tp, acc)


def test_a_loop_with_non_affine_tiles_is_not_versioned():
    a, b, p = np.ones((1, 16), np.float32), np.ones((16, 64), np.float32), np.zeros((1, 64), np.float32)
    counts = _halved_columns.compile(a, b, p, 64, 16, BN=32, BK=8, target="generic").instructions
    assert not counts.get(VERSIONED)
    assert counts.get("tile_mma accumulator updated in place") == 1


@requires_device
def test_non_affine_tiles():
    rng = np.random.default_rng(3)
    a, b = rand(rng, (1, 24), "f32"), rand(rng, (24, 70), "f32")
    p = np.zeros((1, 70), np.float32)
    _halved_columns[(1,)](a, b, p, 70, 24, BN=32, BK=8)
    check(p, f64(a) @ f64(b), "f32", scale_by_max=True)


@xejit.kernel
def _reversed_columns(a, b, p, N, K, BN: xl.constexpr, BK: xl.constexpr):
    """p (1 x N, zeroed by the caller) += a @ b walking the column tiles from the right (columns
    N - BN - n: affine in n with a negative coefficient; the first tiles in bounds, the last one
    partial at the left edge when BN does not divide N)."""
    for k in range(0, K, BK):
        for n in range(0, N, BN):
            tp = xl.init_tile(p, [0, N - BN - n], [1, BN])
            acc = xl.tile_mma(xl.load_tile(xl.init_tile(a, [0, k], [1, BK])),
                              xl.load_tile(xl.init_tile(b, [k, N - BN - n], [BK, BN])), xl.load_tile(tp))
            xl.store_tile(tp, acc)


def test_decreasing_tile_coordinates_are_versioned():
    a, b, p = np.ones((1, 16), np.float32), np.ones((16, 64), np.float32), np.zeros((1, 64), np.float32)
    counts = _reversed_columns.compile(a, b, p, 64, 16, BN=32, BK=8, target="generic").instructions
    assert counts.get(VERSIONED) == 1


@requires_device
@pytest.mark.parametrize("N", [64, 70, 20])
def test_decreasing_tile_coordinates(N):
    """Versioned with the column decreasing in the loop variable: aligned, ragged (the last
    iteration's tile starts left of column 0) and N below one tile."""
    rng = np.random.default_rng(N)
    a, b = rand(rng, (1, 24), "f32"), rand(rng, (24, N), "f32")
    # p inside a guarded row: a tile run without its bounds test left of column 0 writes the guard
    row = np.full((1, N + 64), 7.0, np.float32)
    row[:, 32:32 + N] = 0
    p = row[:, 32:32 + N]
    _reversed_columns[(1,)](a, b, p, N, 24, BN=32, BK=8)
    check(p, f64(a) @ f64(b), "f32", scale_by_max=True)
    assert (row[:, :32] == 7).all() and (row[:, 32 + N:] == 7).all()


def test_a_width_the_tile_does_not_divide_takes_narrower_tiles():
    """M <= 2 (32-column tiles): an N that 16 divides and 32 does not takes 16-column tiles, so
    no row step has a ragged (masked) last tile; a shifted first tile (n0 < 0) or another N keeps
    the width."""
    assert _gemv_geometry(1, 2064, 2048, 8, 1, 0).meta["BN"] == 16
    assert _gemv_geometry(2, 272, 64, 2, 1, 0).meta["BN"] == 16
    assert _gemv_geometry(1, 2048, 2048, 8, 1, 0).meta["BN"] == 32
    assert _gemv_geometry(1, 2070, 2048, 8, 1, 0).meta["BN"] == 32
    assert _gemv_geometry(2, 2064, 2048, 8, 1, -4).meta["BN"] == 32
    g = _gemv_geometry(1, 272, 64, 2, 1, 0)
    assert g.width == 272
