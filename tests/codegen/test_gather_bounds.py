"""Memory safety of unmasked gathers and scatters: offsets outside the array's memory span read
the padding / are dropped on every target (never a crash, never a write outside the array)."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.runtime import usm

from ..helpers import use_mode


@xejit.kernel
def gather_scatter(x, idx, y, z, BN: xl.constexpr):
    offs = xl.load_tile(xl.init_tile(idx, [0, 0], [1, BN]))
    vals = xl.load_gather(xl.init_tile(x, offs), padding=-1.0)        # no mask
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), vals)
    xl.store_scatter(xl.init_tile(z, offs), vals * 2.0)                  # no mask


BAD = [-10_000_000, -1, 40, 41, 10_000_000, 2**40, 2**62, -2**63, 2**63 - 1]


@pytest.mark.parametrize("emulate", [None, "pvc", "dg2"])
def test_out_of_range_offsets_read_padding_and_write_nothing(emulate, monkeypatch):
    if emulate:
        monkeypatch.setenv("XEJIT_EMULATE", emulate)
    rng = np.random.default_rng(7)
    BN = 16
    # x and z are views into the middle of larger USM allocations: guard zones on both sides
    # must be untouched and must not be read
    xbuf = usm.asarray(rng.uniform(1, 2, 3 * 40).astype(np.float32))
    zbuf = usm.asarray(np.full(3 * 40, 7.0, np.float32))
    x, z = xbuf[40:80], zbuf[40:80]
    good = rng.choice(40, BN - len(BAD), replace=False)
    idx = np.concatenate([good, BAD]).astype(np.int64)
    rng.shuffle(idx)
    y = np.full((1, BN), np.nan, np.float32)
    gather_scatter[(1,)](x, idx.reshape(1, BN), y, z, BN=BN)
    inside = (idx >= 0) & (idx < 40)
    want = np.where(inside, np.asarray(x)[np.clip(idx, 0, 39)], -1.0).astype(np.float32)
    np.testing.assert_array_equal(y[0], want)
    zz = np.asarray(zbuf)
    np.testing.assert_array_equal(zz[:40], 7.0)                       # nothing written before z
    np.testing.assert_array_equal(zz[80:], 7.0)                       # nor after it
    expect = np.full(40, 7.0, np.float32)
    expect[idx[inside]] = 2 * want[inside]
    np.testing.assert_array_equal(zz[40:80], expect)


GATHER_LINE = gather_scatter.fn.__code__.co_firstlineno + 3      # the load_gather line
SCATTER_LINE = GATHER_LINE + 2                                    # the store_scatter line


def _debug_inputs(rng, bad_gather: bool):
    x = rng.uniform(1, 2, 40).astype(np.float32)
    idx = rng.choice(40, 16, replace=False).astype(np.int64)
    if bad_gather:
        idx[5] = 40 + 3            # one lane past the end of x (and of z)
    return x, idx.reshape(1, 16)


@pytest.mark.parametrize("mode", ["interpret", "generic", "pvc"])
def test_debug_mode_names_the_line_of_an_out_of_range_gather(mode, monkeypatch):
    use_mode(monkeypatch, mode)
    monkeypatch.setenv("XEJIT_DEBUG", "1")
    x, idx = _debug_inputs(np.random.default_rng(3), bad_gather=True)
    y, z = np.full((1, 16), np.nan, np.float32), np.zeros(40, np.float32)
    with pytest.raises(IndexError) as info:
        gather_scatter[(1,)](x, idx, y, z, BN=16)
    e = info.value
    assert isinstance(e, xejit.OutOfBoundsError) and isinstance(e, xejit.XejitError)
    msg = str(e)
    assert f"test_gather_bounds.py:{GATHER_LINE}:" in msg and "load_gather" in msg and "offset 43" in msg, msg
    assert "xl.load_gather(xl.init_tile(x, offs)" in msg, msg        # the source line itself


@pytest.mark.parametrize("mode", ["interpret", "generic", "pvc"])
def test_debug_mode_names_the_line_of_an_out_of_range_scatter(mode, monkeypatch):
    use_mode(monkeypatch, mode)
    monkeypatch.setenv("XEJIT_DEBUG", "1")
    x, idx = _debug_inputs(np.random.default_rng(4), bad_gather=False)
    y, z = np.full((1, 16), np.nan, np.float32), np.zeros(30, np.float32)    # z shorter than x
    idx[0, 2] = 33                                                          # in x, not in z
    with pytest.raises(xejit.OutOfBoundsError, match=rf"test_gather_bounds.py:{SCATTER_LINE}:.*store_scatter.*offset 33"):
        gather_scatter[(1,)](x, idx, y, z, BN=16)


@pytest.mark.parametrize("mode", ["interpret", "generic", "pvc"])
@pytest.mark.parametrize("debug", ["0", "1"])
def test_in_range_accesses_agree_with_numpy_with_or_without_debug(mode, debug, monkeypatch):
    """Debug mode changes nothing for a kernel that stays in range; without it an out-of-range
    lane is masked silently on every mode (the interpreter too) and the rest is numpy's result."""
    use_mode(monkeypatch, mode)
    monkeypatch.setenv("XEJIT_DEBUG", debug)
    x, idx = _debug_inputs(np.random.default_rng(5), bad_gather=debug == "0")
    y, z = np.full((1, 16), np.nan, np.float32), np.full(40, 7.0, np.float32)
    gather_scatter[(1,)](x, idx, y, z, BN=16)
    inside = idx[0] < 40
    want = np.where(inside, x[np.minimum(idx[0], 39)], -1.0)
    np.testing.assert_array_equal(y[0], want.astype(np.float32))
    expect = np.full(40, 7.0, np.float32)
    expect[idx[0][inside]] = 2 * want[inside]
    np.testing.assert_array_equal(z, expect)


@xejit.kernel
def scale(x, y, BN: xl.constexpr):
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), xl.load_tile(xl.init_tile(x, [0, 0], [1, BN])) * 3.0)


def test_debug_mode_leaves_kernels_without_gathers_alone(monkeypatch):
    """No gather or scatter: no hidden report argument, the same results."""
    monkeypatch.setenv("XEJIT_DEBUG", "1")
    x = np.random.default_rng(6).uniform(1, 2, (1, 16)).astype(np.float32)
    y = np.full((1, 16), np.nan, np.float32)
    scale[(1,)](x, y, BN=16)
    np.testing.assert_allclose(y, 3.0 * x.astype(np.float64), rtol=1e-6)
    ck = xejit.codegen.compiler.compile_kernel(scale.compile_ir(x, y, BN=16), "generic", debug=True)
    assert ck.debug_sites is None and "debug" not in [w for _, _, w in ck.arg_plan]


def test_debug_sites_name_the_checkout_the_kernel_is_in(tmp_path, monkeypatch):
    """The same kernel source in two places (another checkout of a project): a debug build's
    message names the file the launched kernel is in, not the one first compiled (cached sites)."""
    import importlib.util
    import inspect
    import textwrap
    src = "import xejit\nimport xejit.language as xl\n\n\n" + textwrap.dedent(inspect.getsource(gather_scatter.fn))
    monkeypatch.setenv("XEJIT_DEBUG", "1")
    x, idx = _debug_inputs(np.random.default_rng(3), bad_gather=True)
    for name in ("one", "two"):
        path = tmp_path / name / "kern.py"
        path.parent.mkdir()
        path.write_text(src.replace("def gather_scatter", "@xejit.kernel\ndef gather_scatter", 1)
                        if "@xejit.kernel" not in src else src)
        spec = importlib.util.spec_from_file_location(f"kern_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        y, z = np.full((1, 16), np.nan, np.float32), np.zeros(40, np.float32)
        with pytest.raises(IndexError) as info:
            mod.gather_scatter[(1,)](x, idx, y, z, BN=16)
        assert str(path) in str(info.value) and "xl.load_gather(xl.init_tile(x, offs)" in str(info.value), str(info.value)
