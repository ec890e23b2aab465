"""Hostile launches: grids must be integers (never truncated), read-only outputs are refused
before the launch. Each case runs on the device (generic target on the OpenCL CPU device) and
under the interpreter."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.codegen.errors import ArgumentError, ArgumentValueError
from xejit.errors import XejitError

BN = 16


@xejit.kernel
def _axpy(x, y, out, alpha, BN: xl.constexpr):
    n = xl.program_id(0) * BN
    tx = xl.load_tile(xl.init_tile(x, [0, n], [1, BN]))
    ty = xl.load_tile(xl.init_tile(y, [0, n], [1, BN]))
    xl.store_tile(xl.init_tile(out, [0, n], [1, BN]), tx * alpha + ty)


def _inputs(n=48, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    y = rng.uniform(0.5, 2.0, n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)   # poisoned: unwritten elements stay NaN
    return x, y, out


def _ref(x, y, alpha):
    return x.astype(np.float64) * alpha + y.astype(np.float64)


@pytest.fixture(params=[False, True], ids=["device", "interpret"])
def axpy(request):
    _axpy.interpret = request.param
    yield _axpy
    _axpy.interpret = None


@pytest.mark.parametrize("grid", [(3,), 3, [3], (np.int64(3),), (np.int32(3), 1), (np.uint8(3), np.int64(1), 1)])
def test_integer_grids_run(axpy, grid):
    x, y, out = _inputs()
    axpy[grid](x, y, out, 1.5, BN=BN)
    np.testing.assert_allclose(out, _ref(x, y, 1.5), rtol=1e-5)


@pytest.mark.parametrize("grid", [(48 / 16,), (24 / 16,), (0.5,), 3.0, (np.float32(3),), (3, 1.0), ("3",),
                                  (None,), (True,), (np.bool_(True),)])
def test_non_integer_grids_are_type_errors(axpy, grid):
    x, y, out = _inputs()
    with pytest.raises(TypeError) as info:
        axpy[grid](x, y, out, 1.5, BN=BN)
    assert isinstance(info.value, ArgumentError) and isinstance(info.value, XejitError)
    assert "grid sizes must be integers" in str(info.value)
    assert np.isnan(out).all()      # nothing ran


def test_grid_callable_returning_a_float_is_a_type_error(axpy):
    x, y, out = _inputs()
    with pytest.raises(TypeError, match="grid sizes must be integers"):
        axpy[lambda meta: (x.size / meta["BN"],)](x, y, out, 1.5, BN=BN)
    axpy[lambda meta: (xejit.cdiv(x.size, meta["BN"]),)](x, y, out, 1.5, BN=BN)
    np.testing.assert_allclose(out, _ref(x, y, 1.5), rtol=1e-5)


@pytest.mark.parametrize("grid", [(-1,), (3, -2), (), (1, 1, 1, 1)])
def test_bad_grid_values_are_value_errors(axpy, grid):
    x, y, out = _inputs()
    with pytest.raises(ValueError) as info:
        axpy[grid](x, y, out, 1.5, BN=BN)
    assert isinstance(info.value, ArgumentValueError)
    assert np.isnan(out).all()


def test_zero_grid_runs_nothing(axpy):
    x, y, out = _inputs()
    axpy[(0,)](x, y, out, 1.5, BN=BN)
    assert np.isnan(out).all()
    axpy[(2,)](x, y, out, 1.5, BN=BN)   # a partial grid writes exactly its part
    np.testing.assert_allclose(out[:32], _ref(x, y, 1.5)[:32], rtol=1e-5)
    assert np.isnan(out[32:]).all()
