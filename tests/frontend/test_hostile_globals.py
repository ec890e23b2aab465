"""A module global (or closure variable) a kernel reads that changes after the first launch:
the kernel is recompiled for the new value (the values of the globals it reads are part of its
specialization, as in Triton), on the device and in the interpreter; results against numpy."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.jit import global_fingerprint

BN = 16
SCALE = 2.0
OFFSETS = [1.0, 2.0]
OUT_DT = xl.float32
HELPER_BIAS = 0.25


@xl.inline
def _helper(t):
    return t + HELPER_BIAS


@xejit.kernel
def _scaled(x, y, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
    for o in OFFSETS:                       # a global list, unrolled at compile time
        t = t + o
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), (_helper(t) * SCALE).to(OUT_DT))


def _ref(x):
    return (x.astype(np.float64) + sum(OFFSETS) + HELPER_BIAS) * SCALE


@pytest.fixture(params=[True, False], ids=["interpret", "device"])
def scaled(request, monkeypatch):
    # every global this file's kernel reads, restored after the test
    for name in ("SCALE", "OFFSETS", "OUT_DT", "HELPER_BIAS", "_helper"):
        monkeypatch.setitem(globals(), name, globals()[name])
    monkeypatch.setitem(globals(), "OFFSETS", list(OFFSETS))
    _scaled.interpret = request.param
    yield _scaled
    _scaled.interpret = None


def _run(k, dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, BN).astype(np.float32)
    y = np.full(BN, np.nan, dtype)
    k[(1,)](x, y, BN=BN)
    return x, y


def _check(k, rtol=1e-6):
    x, y = _run(k)
    np.testing.assert_allclose(y, _ref(x), rtol=rtol)


def test_changed_scalar_global_recompiles(scaled):
    global SCALE
    _check(scaled)
    SCALE = -3.5
    _check(scaled)
    SCALE = 2.0                       # and back: the old value's code again, not the last one's
    _check(scaled)


def test_list_changed_in_place_recompiles(scaled):
    _check(scaled)
    OFFSETS.append(10.0)              # the same list object, new contents
    _check(scaled)
    OFFSETS[0] = -4.0
    _check(scaled)


MID_DT = xl.float32


@xejit.kernel
def _rounded(x, y, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), t.to(MID_DT).to(xl.float32))


@pytest.mark.parametrize("interpret", [True, False], ids=["interpret", "device"])
def test_changed_dtype_global_recompiles(interpret, monkeypatch):
    """Same arguments, same specialization otherwise: only the global dtype differs."""
    monkeypatch.setattr(_rounded, "interpret", interpret)
    x = np.random.default_rng(2).uniform(0.5, 2.0, BN).astype(np.float32)
    for dt, np_dt in ((xl.float32, np.float32), (xl.float16, np.float16), (xl.float32, np.float32)):
        monkeypatch.setitem(globals(), "MID_DT", dt)
        y = np.full(BN, np.nan, np.float32)
        _rounded[(1,)](x, y, BN=BN)
        np.testing.assert_array_equal(y, x.astype(np_dt).astype(np.float32))
    assert (x.astype(np.float16).astype(np.float32) != x).any()


def test_global_read_by_a_helper_and_a_redefined_helper_recompile(scaled, monkeypatch):
    global HELPER_BIAS
    _check(scaled)
    HELPER_BIAS = 7.0                 # read inside the inlined helper only
    _check(scaled)

    @xl.inline
    def doubled(t):
        return t * 2.0
    monkeypatch.setitem(globals(), "_helper", doubled)
    x, y = _run(scaled)
    np.testing.assert_allclose(y, (x.astype(np.float64) + sum(OFFSETS)) * 2.0 * SCALE, rtol=1e-6)


def test_unchanged_globals_reuse_the_module(scaled):
    global SCALE
    _check(scaled)
    mods = set(map(id, scaled.cache.values()))
    for _ in range(3):
        _check(scaled)
    SCALE = 2.0                       # rebound to an equal value: still the same code
    _check(scaled)
    assert set(map(id, scaled.cache.values())) == mods


def test_closure_variable_changed_recompiles():
    factor = 3.0

    @xejit.kernel(interpret=True)
    def k(x, y, BN: xl.constexpr):
        xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), xl.load_tile(xl.init_tile(x, [0, 0], [1, BN])) * factor)

    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 2.0, BN).astype(np.float32)
    for f in (3.0, -0.5, 3.0):
        factor = f                    # noqa: F841 (read by the kernel through its closure)
        y = np.full(BN, np.nan, np.float32)
        k[(1,)](x, y, BN=BN)
        np.testing.assert_allclose(y, x.astype(np.float64) * f, rtol=1e-6)


def test_specialization_carries_the_global_values(monkeypatch):
    """The module's specialization (part of the on-disk cache key) holds the globals' values,
    in a form without addresses (equal in every process)."""
    key = _scaled.compile_ir(np.ones(BN, np.float32), np.ones(BN, np.float32), BN=BN).attributes["specialization"]
    globs = dict(key[-1][1])
    assert key[-1][0] == "globals" and globs["SCALE"] == "float:2.0" and globs["xl"] == "module:xejit.language"
    assert globs["OFFSETS"] == "list(float:1.0,float:2.0)" and globs["_helper"].startswith("code:")
    monkeypatch.setitem(globals(), "SCALE", 5.0)
    key2 = _scaled.compile_ir(np.ones(BN, np.float32), np.ones(BN, np.float32), BN=BN).attributes["specialization"]
    assert dict(key2[-1][1])["SCALE"] == "float:5.0" and key2[:-1] == key[:-1]
    for v in (object(), lambda: 0, np.float32(1.0), xl.float16, xl.wg_map([2, 2], [8, 8])):
        assert " at 0x" not in global_fingerprint(v) and global_fingerprint(v) == global_fingerprint(v)
