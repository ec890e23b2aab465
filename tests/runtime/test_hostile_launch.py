"""Hostile launches: grids must be integers (never truncated), read-only outputs are refused
before the launch. Each case runs on the device (generic target on the OpenCL CPU device) and
under the interpreter."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.errors import ArgumentError, ArgumentValueError
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


# --- read-only arrays where the kernel writes ---------------------------------------------------

def _read_only(x):
    x.flags.writeable = False
    return x


def test_read_only_output_is_refused_before_launch(axpy):
    x, y, out = _inputs()
    _read_only(out)
    with pytest.raises(ValueError) as info:
        axpy[(3,)](x, y, out, 1.5, BN=BN)
    assert isinstance(info.value, ArgumentValueError)
    assert "argument 'out' is read-only but the kernel writes it" in str(info.value)
    assert np.isnan(out).all()


def test_read_only_inputs_are_fine(axpy):
    x, y, out = _inputs()
    axpy[(3,)](_read_only(x), _read_only(y), out, -0.5, BN=BN)
    np.testing.assert_allclose(out, _ref(x, y, -0.5), rtol=1e-5)


def test_read_only_usm_output_is_refused(axpy):
    """USM arrays reach the kernel without a copy: without the check the kernel writes them."""
    from xejit.runtime import usm
    x, y, _ = _inputs()
    out = usm.empty(x.shape, np.float32)
    out[...] = np.nan
    axpy[(3,)](x, y, out, 2.0, BN=BN)          # writeable: runs (and is remembered zero-copy)
    np.testing.assert_allclose(out, _ref(x, y, 2.0), rtol=1e-5)
    out[...] = np.nan
    _read_only(out)                            # the same array, now read-only: the quick paths check
    with pytest.raises(ValueError, match="argument 'out' is read-only"):
        axpy[(3,)](x, y, out, 2.0, BN=BN)
    assert np.isnan(out).all()
    view = out[:32]                            # a read-only view of it
    with pytest.raises(ValueError, match="argument 'out' is read-only"):
        axpy[(2,)](x, y, view, 2.0, BN=BN)
    assert np.isnan(out).all()


def test_runtime_launch_refuses_read_only_usm():
    """The runtime's own launch (below the jit) refuses read-only memory for a written argument:
    numpy views of USM memory on the zero-copy path and SUAI objects with the read-only flag."""
    import dpctl.memory as dm
    from xejit.runtime import build_program, usm
    from tests.runtime import kernels

    vadd = build_program(kernels.vadd_f32()).kernel("vadd", ["ptr_in", "ptr_in", "ptr", "i32", "f32"])
    rng = np.random.default_rng(5)
    a, b = (usm.asarray(rng.uniform(0.5, 2.0, 16).astype(np.float32)) for _ in range(2))
    c = usm.empty(16, np.float32)
    c[:] = np.nan
    vadd.launch((1,), (16,), a, b, c, 16, 0.5)
    np.testing.assert_allclose(c, a.astype(np.float64) + 0.5 * b.astype(np.float64), rtol=1e-5)
    c[:] = np.nan
    _read_only(c)
    with pytest.raises(ArgumentValueError, match="argument 2: the kernel writes this array but it is read-only"):
        vadd.launch((1,), (16,), a, b, c, 16, 0.5)
    assert np.isnan(c).all()

    class ReadOnlyUSM:
        def __init__(self, mem):
            self.mem = mem
            iface = dict(mem.__sycl_usm_array_interface__)
            iface["data"] = (iface["data"][0], True)
            self.__sycl_usm_array_interface__ = iface

    mem = dm.MemoryUSMShared(64, queue=vadd.device.queue)
    view = np.frombuffer(mem, np.float32)
    view[:] = np.nan
    with pytest.raises(ValueError, match="read-only"):
        vadd.launch((1,), (16,), a, b, ReadOnlyUSM(mem), 16, 0.5)
    assert np.isnan(view).all()
    vadd.launch((1,), (16,), a, b, mem, 16, 0.5)     # the same memory, writeable: written
    np.testing.assert_allclose(view, a.astype(np.float64) + 0.5 * b.astype(np.float64), rtol=1e-5)


@pytest.mark.parametrize("shape", [(0, 16), (16, 0), (0, 0)])
def test_zero_size_arrays_launch(shape):
    """Zero-size 2-D arrays were refused ("no contiguous dimension"); a kernel over them reads
    nothing and writes nothing."""

    @xejit.kernel
    def twice(x, y, BM: xl.constexpr, BN: xl.constexpr):
        t = xl.load_tile(xl.init_tile(x, [xl.program_id(0) * BM, 0], [BM, BN]))
        xl.store_tile(xl.init_tile(y, [xl.program_id(0) * BM, 0], [BM, BN]), t * 2.0)

    x = np.ones(shape, np.float32)
    y = np.empty(shape, np.float32)
    twice[(2,)](x, y, BM=8, BN=16)
    assert y.shape == shape
