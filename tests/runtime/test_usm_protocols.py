"""Arrays in SYCL USM memory described by DLPack (oneAPI), SUAI or torch's XPU tensors reach a
user kernel without copies, on the queue the arguments name (issue 16). The CPU device stands in
for an XPU: the protocols are the same for any SYCL device."""
import ctypes

import numpy as np
import pytest

import xejit
from tests.helpers import array_addresses
import xejit.language as xl
from xejit.errors import XejitError
from xejit.runtime import default_device, launch, usm
from xejit.runtime.usm_array import UsmArray, _parse_capsule, export_capsule, from_object, torch_xpu_queue

from .dlpack_exporter import OneAPIArray, device_array

pytestmark = pytest.mark.skipif(xejit.jit._interpret_env(), reason="device launches")


@xejit.kernel
def axpy(x, y, out, alpha, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    a = xl.load_tile(xl.init_tile(x, [m, n], [BM, BN]))
    b = xl.load_tile(xl.init_tile(y, [m, n], [BM, BN]))
    xl.store_tile(xl.init_tile(out, [m, n], [BM, BN]), a * alpha + b)


def _run(x, y, out, shape, alpha=1.5):
    axpy[(xejit.cdiv(shape[0], 4), xejit.cdiv(shape[1], 16))](x, y, out, alpha, BM=4, BN=16)


def _ref(xv, yv, alpha=1.5):
    return alpha * xv.astype(np.float64) + yv.astype(np.float64)


@pytest.fixture
def q():
    return default_device().queue


@pytest.fixture
def spy(monkeypatch):
    """Records each launch's queue and the USM pointers and copy-backs of its arguments."""
    seen = []
    real = launch._marshal

    def marshal(kernel, values, queue=None):
        m = real(kernel, values, queue)
        seen.append({"queue": queue, "ptrs": array_addresses(kernel, m),
                     "copy_back": list(m.copy_back)})
        return m
    monkeypatch.setattr(launch, "_marshal", marshal)
    return seen


def _host_memory_allocations(monkeypatch):
    """Counts dpctl USM allocations (a staging copy would make one)."""
    import dpctl.memory as dm
    count = {"n": 0}
    for cls in ("MemoryUSMShared", "MemoryUSMDevice", "MemoryUSMHost"):
        real = getattr(dm, cls)

        def make(*a, _real=real, **k):
            count["n"] += 1
            return _real(*a, **k)
        monkeypatch.setattr(dm, cls, make)
    return count


# --- the protocol code against numpy's and torch's own DLPack implementations ------------------

def test_exported_capsules_are_read_correctly_by_numpy_and_torch():
    torch = pytest.importorskip("torch")
    host = np.arange(48, dtype=np.float32).reshape(6, 8)
    view = host[1:5, 2:7]   # an interior pointer with a padded row stride

    class Cpu:
        def __dlpack_device__(self):
            return 1, 0

        def __dlpack__(self, **kw):
            return export_capsule(view.ctypes.data, view.shape, [s // 4 for s in view.strides], "float32",
                                  (1, 0), keep=host)
    np.testing.assert_array_equal(np.from_dlpack(Cpu()), view)
    t = torch.from_dlpack(Cpu())
    assert t.data_ptr() == view.ctypes.data and t.stride() == (8, 1)
    np.testing.assert_array_equal(t.numpy(), view)


def test_capsules_of_numpy_and_torch_are_parsed_with_their_facts():
    torch = pytest.importorskip("torch")
    t = torch.arange(40, dtype=torch.bfloat16).reshape(5, 8)[1:4, 2:7].T
    ptr, shape, strides, dtype, dev, ro, _ = _parse_capsule(t.__dlpack__(), "t")
    assert (ptr, shape, strides, dtype, dev, ro) == (t.data_ptr(), (5, 3), (2, 16), "bfloat16", (1, 0), False)
    x = np.arange(12, dtype=np.int8).reshape(3, 4)
    x.flags.writeable = False
    ptr, shape, strides, dtype, dev, ro, _ = _parse_capsule(x.__dlpack__(max_version=(1, 0)), "x")  # versioned
    assert (ptr, shape, strides, dtype, ro) == (x.ctypes.data, (3, 4), (4, 1), "int8", True)


def test_a_usm_array_round_trips_through_its_own_dlpack_export(q):
    u = UsmArray.empty((3, 5), "float16", q)
    v = from_object(OneAPIArray((3, 5), np.float16, q, mem=u.owner), "v")
    assert (v.ptr, v.shape, v.strides, v.dtype, v.source) == (u.ptr, (3, 5), (10, 2), "float16", "dlpack")
    w = from_object(u.T[1:], "w")
    assert w.ptr == u.ptr + 2 and w.strides == (2, 10)
    back = _parse_capsule(u.T.__dlpack__(), "u")
    assert back[:5] == (u.ptr, (5, 3), (2, 10), "float16", u.__dlpack_device__())


# --- kernels --------------------------------------------------------------------------------------

@pytest.mark.parametrize("usm_kind", ["device", "shared"])
@pytest.mark.parametrize("shape", [(8, 32), (13, 37)])
def test_dlpack_oneapi_arrays_run_a_kernel_without_copies(q, spy, monkeypatch, usm_kind, shape):
    rng = np.random.default_rng(sum(shape))
    xv, yv = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    x, y = device_array(xv, q, usm=usm_kind), device_array(yv, q, usm=usm_kind)
    out = device_array(np.full(shape, np.nan, np.float32), q, usm=usm_kind)   # poisoned
    allocs = _host_memory_allocations(monkeypatch)
    _run(x, y, out, shape)
    assert allocs["n"] == 0
    (call,) = spy
    assert call["ptrs"][:3] == [x.ptr, y.ptr, out.ptr] and call["copy_back"] == []
    assert call["queue"].sycl_context == q.sycl_context and call["queue"].sycl_device == q.sycl_device
    np.testing.assert_allclose(out.read(), _ref(xv, yv), rtol=1e-6, atol=1e-6)
    assert x.exports == y.exports == out.exports == 1


def test_a_transposed_dlpack_view_is_passed_with_its_strides(q, spy):
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((24, 10)).astype(np.float32)      # x.T is column-major [10, 24]
    yv = rng.standard_normal((10, 24)).astype(np.float32)
    x, y = device_array(xv, q), device_array(yv, q)
    out = device_array(np.full((10, 24), np.nan, np.float32), q)
    _run(x.T, y, out, (10, 24))
    assert spy[0]["ptrs"][0] == x.ptr
    np.testing.assert_allclose(out.read(), _ref(xv.T, yv), rtol=1e-6, atol=1e-6)


def test_the_queue_comes_from_the_argument(spy):
    """SUAI arrays bound to a queue of their own context: the launch uses that queue (xejit's
    default queue is in another context, where the pointers are not USM)."""
    import dpctl
    import dpctl.memory as dm
    dev = default_device().sycl_device
    own = dpctl.SyclQueue(dpctl.SyclContext([dev]), dev)
    assert own.sycl_context != default_device().queue.sycl_context
    rng = np.random.default_rng(2)
    shape = (9, 20)
    vals = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)] + [np.full(shape, np.nan, np.float32)]

    class Suai:
        def __init__(self, v):
            self.mem = dm.MemoryUSMDevice(v.nbytes, queue=own)
            own.memcpy(self.mem, v, v.nbytes)
            self.__sycl_usm_array_interface__ = {"data": (self.mem._pointer, False), "shape": v.shape,
                                                 "strides": None, "typestr": "<f4", "version": 1, "syclobj": own}
    x, y, out = (Suai(v) for v in vals)
    _run(x, y, out, shape)
    assert spy[0]["queue"] is own and spy[0]["ptrs"][:3] == [x.mem._pointer, y.mem._pointer, out.mem._pointer]
    got = np.empty(shape, np.float32)
    own.memcpy(got, out.mem, got.nbytes)
    np.testing.assert_allclose(got, _ref(vals[0], vals[1]), rtol=1e-6, atol=1e-6)


def test_usm_backed_numpy_arrays_mix_with_device_arrays(q):
    rng = np.random.default_rng(3)
    xv, yv = (rng.standard_normal((4, 16)).astype(np.float32) for _ in range(2))
    y = usm.asarray(yv)
    out = device_array(np.full((4, 16), np.nan, np.float32), q)
    _run(device_array(xv, q), y, out, (4, 16))
    np.testing.assert_allclose(out.read(), _ref(xv, yv), rtol=1e-6, atol=1e-6)


# --- errors ---------------------------------------------------------------------------------------

def _errors(excinfo, *words):
    e = excinfo.value
    assert isinstance(e, XejitError) and isinstance(e, ValueError)
    for w in words:
        assert w in str(e), str(e)


def test_a_host_array_beside_a_device_array_is_a_mixed_device_error(q):
    x = device_array(np.ones((4, 16), np.float32), q)
    out = device_array(np.ones((4, 16), np.float32), q)
    with pytest.raises(ValueError) as ei:
        _run(x, np.ones((4, 16), np.float32), out, (4, 16))
    _errors(ei, "'y'", "mixed devices", "host (numpy)")
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError) as ei:
        _run(x, x, torch.ones(4, 16), (4, 16))
    _errors(ei, "'out'", "torch CPU tensor", "mixed devices")


def test_an_array_of_another_context_is_named(q):
    import dpctl
    import dpctl.memory as dm
    dev = default_device().sycl_device
    own = dpctl.SyclQueue(dpctl.SyclContext([dev]), dev)
    mem = dm.MemoryUSMDevice(4 * 64, queue=own)

    class Suai:
        __sycl_usm_array_interface__ = {"data": (mem._pointer, False), "shape": (4, 16), "strides": None,
                                        "typestr": "<f4", "version": 1, "syclobj": own}
    x = device_array(np.ones((4, 16), np.float32), q)
    with pytest.raises(ValueError) as ei:
        _run(x, Suai(), x, (4, 16))
    _errors(ei, "'y'", "another SYCL context")


def test_an_array_on_another_device_than_the_queue_is_named(q):
    class OtherDevice:   # only one SYCL device here: a stand-in that compares unequal to it
        name, filter_string = "Other GPU", "level_zero:gpu:7"

    class OtherQueue:
        sycl_device = OtherDevice()
        sycl_context = object()
    x = device_array(np.ones((4, 16), np.float32), q)
    other = UsmArray(x.ptr, (4, 16), (64, 4), "float32", OtherQueue())
    with pytest.raises(ValueError) as ei:
        _run(x, other, x, (4, 16))
    _errors(ei, "'y'", "level_zero:gpu:7", "opencl:cpu", "launch queue")


def test_memory_that_is_not_usm_is_refused_naming_the_argument(q):
    host = np.ones((4, 16), np.float32)
    x = device_array(host, q)

    class Liar(OneAPIArray):   # claims oneAPI memory but points at numpy's heap
        @property
        def ptr(self):
            return host.ctypes.data
    liar = Liar((4, 16), np.float32, q)
    with pytest.raises(ValueError) as ei:
        _run(x, liar, x, (4, 16))
    _errors(ei, "'y'", "not SYCL USM memory")

    class Suai:
        __sycl_usm_array_interface__ = {"data": (host.ctypes.data, False), "shape": (4, 16), "strides": None,
                                        "typestr": "<f4", "version": 1, "syclobj": q}
    with pytest.raises(ValueError) as ei:
        _run(Suai(), x, x, (4, 16))
    _errors(ei, "'x'", "not SYCL USM memory")

    class Cuda(OneAPIArray):
        def __dlpack_device__(self):
            return 2, 0
    with pytest.raises(ValueError) as ei:
        _run(x, Cuda((4, 16), np.float32, q), x, (4, 16))
    _errors(ei, "'y'", "CUDA", "not SYCL USM memory")


def test_a_read_only_usm_array_is_not_written(q):
    class ReadOnly(OneAPIArray):
        def __dlpack__(self, **kw):   # a versioned capsule is not built here: SUAI carries the flag
            raise AssertionError

        @property
        def __sycl_usm_array_interface__(self):
            return {"data": (self.ptr, True), "shape": self.shape, "strides": None, "typestr": "<f4",
                    "version": 1, "syclobj": self.queue}
    x = device_array(np.ones((4, 16), np.float32), q)
    with pytest.raises(ValueError) as ei:
        _run(x, x, ReadOnly((4, 16), np.float32, q), (4, 16))
    _errors(ei, "'out'", "read-only")


# --- torch's XPU glue, driven with a stand-in tensor and stream ----------------------------------

class _FakeXpuTensor:
    """What the glue reads from an XPU tensor (data_ptr, shape, stride, dtype, element_size, device),
    over USM device memory of the CPU device. Its module name makes xejit treat it as torch's."""
    __module__ = "torch.fake_xpu"

    def __init__(self, arr: OneAPIArray):
        import torch
        self.arr = arr
        self.device = torch.device("xpu", 0)
        self.shape = arr.shape
        self.dtype = {np.float32: torch.float32}[arr.dtype.type]

    def data_ptr(self):
        return self.arr.ptr

    def stride(self):
        return self.arr.strides

    def element_size(self):
        return self.arr.dtype.itemsize

    def detach(self):
        return self


def test_torch_xpu_glue_wraps_the_current_stream_queue_and_passes_tensors_without_copies(q, spy, monkeypatch):
    torch = pytest.importorskip("torch")

    class Stream:   # torch.xpu.Stream.sycl_queue: the address of the sycl::queue
        sycl_queue = q.addressof_ref()
    monkeypatch.setattr(torch.xpu, "current_stream", lambda device=None: Stream())
    wrapped = torch_xpu_queue(torch.device("xpu", 0))
    assert wrapped.addressof_ref() != 0 and wrapped.sycl_context == q.sycl_context
    assert wrapped.sycl_device == q.sycl_device
    rng = np.random.default_rng(9)
    xv, yv = (rng.standard_normal((6, 20)).astype(np.float32) for _ in range(2))
    x, y = device_array(xv, q), device_array(yv, q)
    out = device_array(np.full((6, 20), np.nan, np.float32), q)
    _run(_FakeXpuTensor(x), _FakeXpuTensor(y), _FakeXpuTensor(out), (6, 20))
    call = spy[0]
    assert call["ptrs"][:3] == [x.ptr, y.ptr, out.ptr] and call["copy_back"] == []
    assert call["queue"] is not q and call["queue"].sycl_context == q.sycl_context
    np.testing.assert_allclose(out.read(), _ref(xv, yv), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError) as ei:
        _run(_FakeXpuTensor(x), torch.ones(6, 20), _FakeXpuTensor(out), (6, 20))
    _errors(ei, "'y'", "torch CPU tensor", "mixed devices")


def test_dpctl_wraps_a_queue_address_as_torch_exposes_it(q):
    """The capsule torch_xpu_queue builds (\"SyclQueueRef\" around a sycl::queue*) is what dpctl
    takes: the wrapped queue is the same SYCL queue (same device and context)."""
    import dpctl
    cap = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
        ("PyCapsule_New", ctypes.pythonapi))
    w = dpctl.SyclQueue(cap(q.addressof_ref(), b"SyclQueueRef", None))
    assert w.sycl_context == q.sycl_context and w.sycl_device == q.sycl_device


# --- autotuning over device arrays ----------------------------------------------------------------

@xejit.autotune(configs=[xejit.Config({"BN": 16}), xejit.Config({"BN": 32})], key=["n"], restore_value=["acc"],
                warmup=0, rep=0)
@xejit.kernel
def accumulate(x, acc, n, BN: xl.constexpr):
    i = xl.program_id(0) * BN
    t = xl.load_tile(xl.init_tile(acc, [0, i], [1, BN]))
    xl.store_tile(xl.init_tile(acc, [0, i], [1, BN]), t + xl.load_tile(xl.init_tile(x, [0, i], [1, BN])))


def test_autotuning_restores_a_device_array_between_trials(q, spy, monkeypatch, tmp_path):
    monkeypatch.setenv("XEJIT_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(4)
    xv, accv = (rng.standard_normal((1, 96)).astype(np.float32) for _ in range(2))
    x, acc = device_array(xv, q), device_array(accv, q)
    accumulate[lambda meta: (xejit.cdiv(96, meta["BN"]),)](x, acc, 96)
    assert len(spy) >= 3   # trials of both configs, then the chosen one
    assert all(x.ptr in call["ptrs"] and acc.ptr in call["ptrs"] for call in spy)
    np.testing.assert_allclose(acc.read(), accv.astype(np.float64) + xv, rtol=1e-6)   # added once
