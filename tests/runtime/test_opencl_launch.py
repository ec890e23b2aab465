"""Prepared launches straight through OpenCL (xejit/runtime/opencl_launch.py): taken on the OpenCL
CPU device, arguments set again only when they change, one cl_kernel per thread."""
import threading

import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit import launch_plan
from xejit.runtime import default_device


@xejit.kernel
def _scale(x, y, alpha, BN: xl.constexpr):
    n = xl.program_id(0) * BN
    t = xl.load_tile(xl.init_tile(x, [0, n], [1, BN]))
    xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), t * alpha)


@pytest.fixture(autouse=True)
def _device(monkeypatch):
    for v in ("XEJIT_INTERPRET", "XEJIT_EMULATE", "XEJIT_HOST_ARRAYS"):
        monkeypatch.delenv(v, raising=False)
    if not default_device().system_memory or "opencl" not in default_device().backend:
        pytest.skip("needs the OpenCL CPU device (arrays passed by address)")


def _plan(x, y, alpha, bn):
    got = launch_plan.find(_scale, (x, y, alpha), {"BN": bn})
    assert got is not None
    return got[0]


def test_repeated_launch_goes_through_opencl_and_follows_changed_arguments():
    rng = np.random.default_rng(0)
    n = 96
    xs = [rng.uniform(0.5, 2, (1, n)).astype(np.float32) for _ in range(3)]
    ys = [np.full((1, n), np.nan, np.float32) for _ in range(3)]
    _scale[(n // 16,)](xs[0], ys[0], 2.0, BN=16)
    _scale[(n // 16,)](xs[0], ys[0], 2.0, BN=16)
    assert _plan(xs[0], ys[0], 2.0, 16).direct is not None
    # new arrays, the same arrays again, new scalars, -0.0 after 0.0 (equal as floats, not as bits)
    for i, alpha in enumerate((0.5, 0.0, -0.0, 3.0, -0.0, 0.0)):
        x, y = xs[i % 3], ys[(i + 1) % 3]
        y[...] = np.nan
        _scale[(n // 16,)](x, y, alpha, BN=16)
        ref = x.astype(np.float64) * alpha
        np.testing.assert_array_equal(y, ref.astype(np.float32))
        assert np.array_equal(np.signbit(y), np.signbit(ref))


def test_threads_launch_the_same_plan_concurrently():
    n, rounds = 256, 200
    rng = np.random.default_rng(1)
    x0, y0 = rng.uniform(-1, 1, (1, n)).astype(np.float32), np.empty((1, n), np.float32)
    _scale[(n // 16,)](x0, y0, 1.0, BN=16)
    _scale[(n // 16,)](x0, y0, 1.0, BN=16)
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        x = r.uniform(-1, 1, (1, n)).astype(np.float32)
        y = np.full((1, n), np.nan, np.float32)
        try:
            for k in range(rounds):
                alpha = float(seed * 100 + k)
                y[...] = np.nan
                _scale[(n // 16,)](x, y, alpha, BN=16)
                if not np.array_equal(y, (x.astype(np.float64) * alpha).astype(np.float32)):
                    errors.append((seed, k))
        except Exception as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


@xejit.kernel
def _add_int(x, y, k, BN: xl.constexpr):
    n = xl.program_id(0) * BN
    t = xl.load_tile(xl.init_tile(x, [0, n], [1, BN]))
    xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), (t + k).to(xl.int32))


def test_changed_int_scalars_are_set_again():
    """An int argument is set again only when it changes: changed, repeated, at int32's limits."""
    n = 64
    x = np.random.default_rng(2).integers(-5, 6, (1, n)).astype(np.int32)
    y = np.empty((1, n), np.int32)
    _add_int[(n // 16,)](x, y, 1, BN=16)
    _add_int[(n // 16,)](x, y, 1, BN=16)
    assert launch_plan.find(_add_int, (x, y, 1), {"BN": 16})[0].direct is not None
    for k in (7, 7, -3, 0, 2**31 - 6, 2**31 - 6, -(2**31) + 5, 1):
        y[...] = -777
        _add_int[(n // 16,)](x, y, k, BN=16)
        np.testing.assert_array_equal(y, (x.astype(np.int64) + k).astype(np.int32))


def test_a_grid_past_size_t_is_a_launch_error():
    """Work-items that do not fit OpenCL's size_t are refused (ctypes would wrap them: 2^64 + 64
    work-items would run 64), on a prepared launch as on the first."""
    n = 64
    x, y = np.ones((1, n), np.float32), np.full((1, n), np.nan, np.float32)
    _scale[(n // 16,)](x, y, 2.0, BN=16)
    _scale[(n // 16,)](x, y, 2.0, BN=16)
    y[...] = np.nan
    for grid in ((1 << 60) + 4, 1 << 64):
        with pytest.raises(xejit.errors.LaunchError, match="more than a launch takes"):
            _scale[(grid,)](x, y, 2.0, BN=16)
    assert np.isnan(y).all()


def test_a_grid_and_its_ranges_are_stored_together(monkeypatch):
    """A launch with another grid that runs while one is storing its ranges (another thread; here
    nested in the OpenCL sizes' conversion) never leaves a grid paired with the other's sizes."""
    n = 64
    x = np.random.default_rng(3).uniform(0.5, 2, (1, n)).astype(np.float32)
    y = np.full((1, n), np.nan, np.float32)
    _scale[(2,)](x, y, 1.0, BN=16)
    _scale[(2,)](x, y, 1.0, BN=16)
    real, nested = launch_plan.cl_ranges, []

    def interleaved(ranges):
        if not nested:
            nested.append(1)
            _scale[(2,)](x, y, 1.0, BN=16)   # the other grid, in between
        return real(ranges)

    monkeypatch.setattr(launch_plan, "cl_ranges", interleaved)
    _scale[(4,)](x, y, 1.0, BN=16)
    monkeypatch.setattr(launch_plan, "cl_ranges", real)
    y[...] = np.nan
    _scale[(2,)](x, y, 3.0, BN=16)      # two workgroups: the first 32 columns, no more
    np.testing.assert_array_equal(y[:, :32], (x[:, :32].astype(np.float64) * 3.0).astype(np.float32))
    assert np.isnan(y[:, 32:]).all()



def test_a_direct_program_releases_the_program_it_retained():
    """DirectProgram retains the cl_program it launches from and releases it when it goes
    (CL_PROGRAM_REFERENCE_COUNT back where it was)."""
    import ctypes
    import gc

    from xejit.runtime import opencl_programs
    from xejit.runtime.opencl_launch import DirectProgram
    x, y = np.ones((1, 32), np.float32), np.empty((1, 32), np.float32)
    _scale[(2,)](x, y, 1.0, BN=16)
    _scale[(2,)](x, y, 1.0, BN=16)
    program = _plan(x, y, 1.0, 16).direct.prog.program
    get_info = opencl_programs._libs.cl.clGetProgramInfo
    get_info.restype = ctypes.c_int
    get_info.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]

    def refs() -> int:
        n = ctypes.c_uint()
        assert get_info(program, 0x1160, ctypes.sizeof(n), ctypes.byref(n), None) == 0   # REFERENCE_COUNT
        return n.value

    before = refs()
    extra = DirectProgram(opencl_programs.interop_for(default_device().queue), program)
    assert refs() == before + 1
    del extra
    gc.collect()
    assert refs() == before
