"""Skinny GEMMs (M <= 64: decode GEMV, small batches in blocks of 8 rows) on the CPU device take
``gemv_kernel`` (K split into slices, partial sums added on the host): results against float64 references, outputs poisoned;
the kernel itself on ragged slices and panels and over its own b."""
from __future__ import annotations

import sys
import zlib

import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.matmul.backend import heavy_on_device, requires_device
from tests.helpers import check as check_array, f64, poisoned as poisoned_array, rand as rand_array
from tests.matmul.helpers import spy_gemv_calls, check, poisoned, rand, reference
from xejit.kernels.gemm import GEMV_TILES, gemv_kernel

N, K = 300, 333      # K*N above the skinny threshold; not multiples of BN, BK or the K slice

xm = sys.modules["xejit.matmul"]   # (xejit.matmul is also the function)


def _k(m: int) -> int:
    """A K at which m rows take gemv_kernel: K for up to GEMV_MAX_M rows; a batch's row blocks
    from _GEMV_BLOCKED_MID_K on (more than 16 rows) or _GEMV_BLOCKED_MIN_K (not multiples of
    the tiles either)."""
    if m <= xm.GEMV_MAX_M:
        return K
    return (xm._GEMV_BLOCKED_MID_K if m > 16 else xm._GEMV_BLOCKED_MIN_K) + 8


@pytest.fixture(autouse=True)
def _skinny_kernel_only(monkeypatch):
    """These tests are of gemv_kernel: fp32 and bf16 decode steps (M <= 2) take codegen/cpu_gemv.py's
    kernel by default (tests/matmul/test_gemv_simd.py); here they keep gemv_kernel."""
    monkeypatch.setattr(xm, "_gemv_simd_applies", lambda a, b, c: False)


@pytest.fixture
def gemv_calls(monkeypatch):
    """The (M, N, K) of every call that took the skinny kernel (a repeated one may replay it)."""
    return spy_gemv_calls(monkeypatch, "_gemv", "_gemv_replay")


def _result_dtype(dtype):
    return "int32" if dtype == "int8" else dtype


CASES = [heavy_on_device(m, d, lib, act, core=(m, d) in {(1, "float32"), (8, "float32"), (3, "int8"), (20, "float32")})
         for m, d, lib, act in [(1, "float32", "numpy", None), (8, "float32", "numpy", "gelu_tanh"),
                                (3, "int8", "numpy", "relu"), (2, "float16", "numpy", "relu"),
                                (7, "float32", "numpy", "relu"), (20, "float32", "numpy", "relu"),
                                (11, "int8", "torch", None), (13, "bfloat16", "torch", "gelu_tanh"),
                                (5, "bfloat16", "torch", None), (1, "float32", "torch", "gelu_tanh")]]


@requires_device
@pytest.mark.parametrize("m,dtype,lib,activation", CASES)
def test_skinny_gemm_takes_the_gemv_kernel(m, dtype, lib, activation, gemv_calls):
    rng = np.random.default_rng(zlib.crc32(repr((m, dtype, lib, activation)).encode()))
    K = _k(m)
    a, b = rand(rng, (m, K), dtype, lib), rand(rng, (K, N), dtype, lib)
    rdt = _result_dtype(dtype)
    bias = (rng.integers(-1000, 1000, N).astype(np.int32) if dtype == "int8" else rand(rng, (N,), dtype, lib))
    if lib == "torch" and dtype == "int8":
        bias = __import__("torch").from_numpy(bias)
    out = poisoned((m, N), rdt, lib)
    xejit.matmul(a, b, bias=bias, activation=activation, out=out)
    assert gemv_calls == [(m, N, K)]
    check(out, reference(a, b, bias, activation), rdt)


@requires_device
@pytest.mark.parametrize("m", [20, 64])
def test_a_batch_goes_through_the_kernel_in_blocks_of_its_rows(m, gemv_calls, monkeypatch):
    """More rows than gemv_kernel's largest tile: blocks of GEMV_MAX_M rows and one of the rest
    (two kernel builds for a batch, not one per M), each against float64 with a poisoned out=."""
    launched = spy_gemv_calls(monkeypatch, "_gemv_rows")
    rng = np.random.default_rng(m)
    K = _k(m)
    a, b = rand(rng, (m, K), "float32"), rand(rng, (K, N), "float32")
    out = poisoned((m, N), "float32", "numpy")
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), "float32")
    full, rest = divmod(m, xm.GEMV_MAX_M)
    assert [rows for rows, _, _ in launched] == [xm.GEMV_MAX_M] * full + ([rest] if rest else [])
    assert gemv_calls == [(m, N, K)]
    launched.clear()
    a65 = rand(rng, (xm._GEMV_BLOCKED_MAX_M + 1, K), "float32")   # past the blocked range: another kernel
    check(xejit.matmul(a65, b), reference(a65, b), "float32")
    assert not launched


@requires_device
@pytest.mark.parametrize("m,k,blocks", [(16, 333, False), (16, 2056, True), (20, 333, False), (20, 520, True),
                                        (64, 520, True)])
def test_a_batch_takes_row_blocks_where_they_win(m, k, blocks, gemv_calls):
    """Batches of 9-64 rows: row blocks of gemv_kernel when K is long (from _GEMV_BLOCKED_MIN_K;
    from _GEMV_BLOCKED_MID_K with more than 16 rows), the tuned GEMM otherwise (a short K: each
    block would stream all of b again); results against float64, poisoned out=."""
    rng = np.random.default_rng(m * k)
    a, b = rand(rng, (m, k), "float32"), rand(rng, (k, N), "float32")
    out = poisoned((m, N), "float32", "numpy")
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), "float32")
    assert gemv_calls == ([(m, N, k)] if blocks else [])


@requires_device
def test_packed_kernels_are_not_split_into_row_blocks(monkeypatch):
    """64 rows with a K below _GEMV_BLOCKED_MIN_K where the packed kernels apply take them."""
    seen = []
    real = xm._packed
    monkeypatch.setattr(xm, "_packed", lambda a, b, c: seen.append(a.shape) or real(a, b, c))
    rng = np.random.default_rng(7)
    a, b = rand(rng, (64, 1024), "float32"), rand(rng, (1024, 512), "float32")
    check(xejit.matmul(a, b), reference(a, b), "float32")
    assert seen == [(64, 1024)]


@requires_device
def test_vector_times_matrix_and_column_major_b(gemv_calls):
    """A 1-D ``a`` is a 1-row GEMM (skinny kernel); a column-major ``b`` keeps the tuned GEMM."""
    rng = np.random.default_rng(21)
    a, b = rand(rng, (K,), "float32"), rand(rng, (K, N), "float32")
    check(xejit.matmul(a, b), reference(a, b), "float32")
    assert gemv_calls == [(1, N, K)]
    bt = np.ascontiguousarray(b.T).T     # column-major
    check(xejit.matmul(a[None], bt), reference(a[None], bt), "float32")
    assert len(gemv_calls) == 1


@requires_device
def test_repeated_skinny_calls_stay_correct(gemv_calls):
    """The partial-sum scratch buffer is reused: a second call with new values is not stale."""
    rng = np.random.default_rng(22)
    b = rand(rng, (K, N), "float32")
    for _ in range(2):
        a = rand(rng, (4, K), "float32")
        check(xejit.matmul(a, b), reference(a, b), "float32")
    assert len(gemv_calls) == 2


@requires_device
def test_alternating_skinny_shapes_and_b_offsets(gemv_calls, monkeypatch):
    """_gemv_partials keeps the geometry and scratch view of its last call: calls alternating
    between shapes, and between b's at other offsets in their page (the alignment shift and the
    scratch placement depend on it), each against float64 with a poisoned out=. A stale shift or
    placement would still be correct, only slower: so each launch's shift and scratch offset are
    checked against those b's address asks for."""
    launched = []
    real = xm._launch_gemv

    def spy(a, b, p, acc, g):
        bm = 1 << max(a.shape[0] - 1, 0).bit_length()
        launched.append((g.n0, xm._aligning_shift(b, bm),
                         p.ctypes.data % 4096, (xm._address(b) + xm._GEMV_P_GAP) % 4096))
        return real(a, b, p, acc, g)
    monkeypatch.setattr(xm, "_launch_gemv", spy)
    rng = np.random.default_rng(31)
    big = rand(rng, (K, N + 64), "float32")
    cases = [(8, big[:, 0:N]), (8, big[:, 3:3 + N]), (1, big[:, 5:5 + N]), (8, big[:, 0:N - 40]),
             (8, big[:, 3:3 + N])]
    for _ in range(2):
        for m, b in cases:
            a = rand(rng, (m, K), "float32")
            out = poisoned((m, b.shape[1]), "float32", "numpy")
            xejit.matmul(a, b, out=out)
            check(out, reference(a, b), "float32")
    assert len(gemv_calls) == 2 * len(cases)
    assert launched and all(n0 == want and at == want_at for n0, want, at, want_at in launched), launched


@requires_device
@pytest.mark.parametrize("m,dtype", [(1, "float32"), (3, "float32"), (2, "int8")])
def test_repeated_skinny_calls_without_epilogue(m, dtype, gemv_calls):
    """No bias or activation: the K-slices' partial sums go straight into the result (poisoned
    out=), and a repeated call on numpy arrays takes the remembered skinny recipe (fresh result)."""
    rng = np.random.default_rng(m * 7 + len(dtype))
    a, b = rand(rng, (m, K), dtype), rand(rng, (K, N), dtype)
    rdt = _result_dtype(dtype)
    out = poisoned((m, N), rdt, "numpy")
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), rdt)
    first = xejit.matmul(a, b)
    again = xejit.matmul(a, b)
    assert again is not first
    check(first, reference(a, b), rdt)
    check(again, reference(a, b), rdt)
    assert gemv_calls == [(m, N, K)] * 3


@pytest.fixture
def first_sights(monkeypatch):
    """How many launches took the launch plans' first-sight path (a numpy array not seen before)."""
    from xejit import launch_plan
    n = [0]
    orig = launch_plan._first_sight

    def spy(*args):
        n[0] += 1
        return orig(*args)
    monkeypatch.setattr(launch_plan, "_first_sight", spy)
    return n


@requires_device
@pytest.mark.parametrize("m,dtype", [(1, "float32"), (8, "float32"), (2, "int8"), (20, "float32")])
def test_decode_with_a_fresh_activation_each_call(m, dtype, gemv_calls, first_sights):
    """Decode: a new ``a`` every call (new arrays, a row view of a larger one, a column-major
    one) with the same ``b``: each result against float64 with a poisoned out= or a fresh result;
    the kernel reads ``a`` from its staging copy, so no launch after the first meets an array it
    has not seen (the first-sight path, ~0.1 ms a call) -- also when a batch's row blocks of two
    heights alternate (20 rows: 8, 8, 4)."""
    rng = np.random.default_rng(m * 11 + len(dtype))
    K = _k(m)
    b = rand(rng, (K, N), dtype)
    rdt = _result_dtype(dtype)
    xejit.matmul(rand(rng, (m, K), dtype), b)
    first_sights[0] = 0
    big = rand(rng, (m + 3, K), dtype)
    for a in [rand(rng, (m, K), dtype) for _ in range(3)] + [big[2:2 + m], np.asfortranarray(rand(rng, (m, K), dtype))]:
        check(xejit.matmul(a, b), reference(a, b), rdt)
        out = poisoned((m, N), rdt, "numpy")
        xejit.matmul(a, b, out=out)
        check(out, reference(a, b), rdt)
    assert first_sights[0] == 0
    assert gemv_calls == [(m, N, K)] * 11


@requires_device
@pytest.mark.parametrize("m", [1, 8])
def test_activation_changed_in_place_between_calls(m, gemv_calls):
    """The same ``a`` object, rewritten in place between calls (new values, then one element):
    the staging copy is made on every call, never kept by the array's identity."""
    rng = np.random.default_rng(40 + m)
    a, b = rand(rng, (m, K), "float32"), rand(rng, (K, N), "float32")
    check(xejit.matmul(a, b), reference(a, b), "float32")
    for _ in range(2):
        a[...] = rand(rng, (m, K), "float32")
        check(xejit.matmul(a, b), reference(a, b), "float32")
    a[m - 1, K // 2] += 100.0
    check(xejit.matmul(a, b), reference(a, b), "float32")
    assert len(gemv_calls) == 4


@requires_device
def test_decode_replays_its_launch_plan_safely(monkeypatch):
    """After a call has found the skinny kernel's launch plan, a call with the same staged ``a``,
    scratch view and b layout launches it directly (no ``_launch_gemv``): with a new ``a``
    each call, alternating between two b's at the same page offset (b's own zero-copy entry
    each call), after the plans are dropped (``clear_memory_caches``: found again), and not
    while XEJIT_HOST_ARRAYS=copy stages b; every result against float64."""
    from xejit.device_launch import clear_memory_caches
    rng = np.random.default_rng(50)
    step = -(-K * N // 1024) * 1024           # whole 4 KB pages apart: the same page offset
    raw = np.empty(2 * step, np.float32)
    bs = [raw[s:s + K * N].reshape(K, N) for s in (0, step)]
    for b in bs:
        b[...] = rand(rng, (K, N), "float32")
    launches = []
    orig = xm._launch_gemv
    monkeypatch.setattr(xm, "_launch_gemv", lambda *args: launches.append(1) or orig(*args))

    def step_all(n_calls, b_list):
        for i in range(n_calls):
            a, b = rand(rng, (1, K), "float32"), b_list[i % len(b_list)]
            check(xejit.matmul(a, b), reference(a, b), "float32")

    step_all(3, bs)                           # (each b's first call meets it: a launch)
    launches.clear()
    step_all(4, bs)
    assert launches == []
    clear_memory_caches()
    step_all(1, bs)
    assert len(launches) == 1
    step_all(3, bs)
    assert len(launches) == 1
    monkeypatch.setenv("XEJIT_HOST_ARRAYS", "copy")
    step_all(2, bs)
    assert len(launches) == 3


@requires_device
@pytest.mark.parametrize("m", [1, 8])
def test_a_repeated_call_replays_the_launch_and_reads_b_afresh(m, monkeypatch):
    """From the second call with a b on, xejit.matmul repeats the skinny kernel's planned launch
    (``_gemv_replay``): the new ``a`` is copied, ``b`` read where it is (changed in place: the new
    values), results against float64 in a fresh array and a poisoned out=. A new b (maybe at a
    freed b's address and id) is not replayed until it has been seen; an activation, a stale
    plan (``clear_memory_caches``) and another thread's calls go the full way, with the right
    results."""
    import gc
    import threading

    from xejit.device_launch import clear_memory_caches
    replays = spy_gemv_calls(monkeypatch, "_gemv_replay")
    monkeypatch.setattr(xm, "_RECIPES", {})   # (no earlier test's calls of these shapes)
    rng = np.random.default_rng(60 + m)
    b = rand(rng, (K, N), "float32")
    for i in range(3):
        a = rand(rng, (m, K), "float32")
        check(xejit.matmul(a, b), reference(a, b), "float32")
        out = poisoned((m, N), "float32", "numpy")
        xejit.matmul(a, b, out=out)
        check(out, reference(a, b), "float32")
    assert len(replays) == 4                  # every call but the first with and without out=
    b[K // 3] += 7.0                          # b changed in place: read again
    check(xejit.matmul(a, b), reference(a, b), "float32")
    assert len(replays) == 5
    del b
    gc.collect()
    b2 = rand(rng, (K, N), "float32")         # (possibly the freed b's memory and id)
    check(xejit.matmul(a, b2), reference(a, b2), "float32")
    assert len(replays) == 5
    check(xejit.matmul(a, b2), reference(a, b2), "float32")
    assert len(replays) == 6
    check(xejit.matmul(a, b2, activation="relu"), np.maximum(reference(a, b2), 0), "float32")
    assert len(replays) == 6
    clear_memory_caches()                     # the plan is stale: found again on the full path
    check(xejit.matmul(a, b2), reference(a, b2), "float32")
    check(xejit.matmul(a, b2), reference(a, b2), "float32")
    assert len(replays) == 7

    errors = []

    def other_thread():
        try:
            for _ in range(3):
                a3 = rand(np.random.default_rng(1), (m, K), "float32")
                check(xejit.matmul(a3, b2), reference(a3, b2), "float32")
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)
    t = threading.Thread(target=other_thread)
    t.start()
    for _ in range(3):
        check(xejit.matmul(a, b2), reference(a, b2), "float32")
    t.join()
    assert not errors


@requires_device
@pytest.mark.parametrize("m,dtype,lib,offset", [(8, "float32", "numpy", 3), (5, "float32", "numpy", 13),
                                                (8, "int8", "numpy", 7), (6, "bfloat16", "torch", 5)])
def test_skinny_gemm_on_a_b_off_the_cache_lines(m, dtype, lib, offset, gemv_calls):
    """A b whose rows start ``offset`` elements past a 64-byte line (a view into a larger array):
    gemv_kernel's column tiles are shifted onto the lines, the first one partly before column 0
    (masked); results against float64, poisoned out=."""
    rng = np.random.default_rng(offset)
    a = rand(rng, (m, 1024), dtype, lib)
    big = rand(rng, (1024, 1024 + 64), dtype, lib)
    b = big[:, offset:offset + 1000]
    assert xm._aligning_shift(b, 8) != 0
    out = poisoned((m, 1000), _result_dtype(dtype), lib)
    xejit.matmul(a, b, out=out)
    assert gemv_calls == [(m, 1000, 1024)]
    check(out, reference(a, b), _result_dtype(dtype))


@requires_device
@pytest.mark.parametrize("m,n,k,slices,width,n0,dtype", [
    (1, 301, 333, 3, 64, 0, "f32"), (2, 300, 75, 1, 96, 0, "f32"), (3, 129, 40, 2, 64, -5, "f32"),
    (7, 100, 333, 4, 48, 0, "f32"), (8, 301, 333, 1, 128, -3, "f32"), (8, 77, 50, 2, 32, 0, "i8"),
    (5, 200, 91, 1, 256, 0, "f16")])
def test_gemv_kernel_slices_panels_and_tails(m, n, k, slices, width, n0, dtype):
    """gemv_kernel on its own: K slices (the last one ragged) times column panels (the last one
    ragged, the first shifted before column 0 when n0 < 0, masked), K not a multiple of BK, one
    and two row tiles (M = 7, 8); the slices' blocks added here."""
    rng = np.random.default_rng(m * 100 + n + k)
    a, b = rand_array(rng, (m, k), dtype), rand_array(rng, (k, n), dtype)
    is_int = dtype == "i8"
    p = poisoned_array((slices * m, n), "i32" if is_int else "f32")
    bn, rb = GEMV_TILES[m]
    ks = -(-k // slices // 8) * 8
    assert -(-k // ks) == slices
    gemv_kernel[(slices, -(-(n - n0) // width))](a, b, p, n, k, ks, width, n0, BM=m, BN=bn, BK=8, RB=rb,
                                                 ACC=xl.int32 if is_int else xl.float32)
    got = f64(p).reshape(slices, m, n).sum(axis=0)
    check_array(got, f64(a) @ f64(b), "int" if is_int else "f32", scale_by_max=True)


@requires_device
def test_gemv_kernel_over_its_own_b():
    """p is b's first 8 rows (one program: one slice, one panel): two row tiles of 4 per step,
    each updated in place, and the second tile's b rows include what the first one's stores
    wrote: the result follows the kernel's program order (zero fill, then each tile reads and
    writes in turn)."""
    rng = np.random.default_rng(12)
    m, n, k, bk = 8, 48, 24, 8
    a, mem = rand_array(rng, (m, k), "f32"), rand_array(rng, (k, n), "f32")
    want, af = f64(mem), f64(a)
    want[:m] = 0
    for k0 in range(0, k, bk):
        for c in range(0, n, 16):
            for r in (0, 4):
                want[r:r + 4, c:c + 16] += af[r:r + 4, k0:k0 + bk] @ want[k0:k0 + bk, c:c + 16]
    bn, rb = GEMV_TILES[m]
    gemv_kernel[(1, 1)](a, mem, mem[:m], n, k, k, n, 0, BM=m, BN=bn, BK=bk, RB=rb)
    check_array(mem, want, "f32", scale_by_max=True)


@pytest.mark.parametrize("m", [1, 2, 6, 8])
def test_gemv_kernel_tiles_are_updated_in_place(m):
    """Every GEMV_TILES tile is one register strip: each row tile's accumulator is updated in
    place (M = 8: two row tiles)."""
    a, b, p = np.ones((m, 64), np.float32), np.ones((64, 128), np.float32), np.ones((m, 128), np.float32)
    bn, rb = GEMV_TILES[m]
    counts = gemv_kernel.compile(a, b, p, 128, 64, 64, 64, 0, BM=m, BN=bn, BK=8, RB=rb, target="generic").instructions
    assert counts.get("tile_mma accumulator updated in place") == (2 if m > rb else 1)
