"""``xejit.matmul`` on arrays in SYCL USM memory exported through DLPack as oneAPI memory (and SUAI):
no copies, results of the caller's kind on the caller's device, ``out=`` in place, the caller's
queue (issue 16). The OpenCL CPU device stands in for an XPU."""
import numpy as np
import pytest
import torch

import xejit
from tests.helpers import array_addresses
from xejit.errors import XejitError
from xejit.matmul import MatmulError
from xejit.runtime import default_device, launch
from xejit.runtime.usm_array import UsmArray

from tests.matmul.backend import requires_device
from tests.matmul.helpers import check, rand, reference
from tests.runtime.dlpack_exporter import OneAPIArray, device_array

pytestmark = requires_device


@pytest.fixture
def q():
    return default_device().queue


@pytest.fixture
def spy(monkeypatch):
    seen = []
    real = launch._marshal

    def marshal(kernel, values, queue=None):
        m = real(kernel, values, queue)
        seen.append({"queue": queue, "ptrs": array_addresses(kernel, m),
                     "copy_back": list(m.copy_back)})
        return m
    monkeypatch.setattr(launch, "_marshal", marshal)
    return seen


def _no_copies(spy, *ptrs):
    assert spy, "no launch"
    for call in spy:
        assert call["copy_back"] == []
        for p in ptrs:
            assert p in call["ptrs"], (hex(p), [hex(x) for x in call["ptrs"]])


@pytest.mark.parametrize("dtype,act", [("float32", "relu"), ("float16", "gelu_tanh"), ("int8", None)])
def test_dlpack_operands_and_result_without_copies(q, spy, dtype, act):
    rng = np.random.default_rng(11)
    M, K, N = 37, 45, 29
    av, bv = rand(rng, (M, K), dtype), rand(rng, (K, N), dtype)
    rdt = "int32" if dtype == "int8" else dtype
    biasv = None if dtype == "int8" else rand(rng, (N,), rdt)
    a, b = device_array(av, q), device_array(bv, q)
    bias = None if biasv is None else device_array(biasv, q)
    c = xejit.matmul(a, b, bias=bias, activation=act)
    assert isinstance(c, OneAPIArray) and c.shape == (M, N) and c.dl_dtype == rdt   # the caller's kind
    assert isinstance(c.keep, UsmArray) and c.ptr == c.keep.ptr                       # via from_dlpack
    _no_copies(spy, a.ptr, b.ptr, c.ptr, *(() if bias is None else (bias.ptr,)))
    assert all(call["queue"].sycl_context == q.sycl_context for call in spy)
    check(c.read(), reference(av, bv, biasv, act), rdt)


def test_bfloat16_and_transposed_views(q, spy):
    rng = np.random.default_rng(12)
    M, K, N = 40, 33, 24
    at, bv = rand(rng, (K, M), "bfloat16", "torch"), rand(rng, (K, N), "bfloat16", "torch")
    bits = lambda t: t.view(torch.int16).numpy().view(np.uint16)  # noqa: E731
    a_store = device_array(bits(at), q, dl_dtype="bfloat16")
    b = device_array(bits(bv), q, dl_dtype="bfloat16")
    c = xejit.matmul(a_store.T, b)                 # a column-major [M, K] view
    _no_copies(spy, a_store.ptr, b.ptr, c.ptr)
    got = torch.from_numpy(c.read().view(np.int16)).view(torch.bfloat16)
    check(got, reference(at.T, bv), "bfloat16")


def test_out_is_written_in_place(q, spy):
    rng = np.random.default_rng(13)
    av, bv = rand(rng, (3, 21, 18), "float32"), rand(rng, (18, 26), "float32")
    a, b = device_array(av, q), device_array(bv, q)
    out = device_array(np.full((3, 21, 26), np.nan, np.float32), q)   # poisoned
    assert xejit.matmul(a, b, out=out) is out
    assert len(spy) >= 1 and all(len(call["ptrs"]) >= 3 for call in spy)
    _no_copies(spy, a.ptr, b.ptr, out.ptr)         # a batch sharing b: one launch over stacked rows
    check(out.read(), reference(av, bv), "float32")


def test_out_overlapping_an_operand_and_an_empty_sum(q):
    rng = np.random.default_rng(14)
    av, bv = rand(rng, (16, 16), "float32"), rand(rng, (16, 16), "float32")
    a, b = device_array(av, q), device_array(bv, q)
    assert xejit.matmul(a, b, out=a) is a          # computed into a new array, then copied
    check(a.read(), reference(av, bv), "float32")
    biasv = rand(rng, (5,), "float32")
    out = device_array(np.full((3, 5), np.nan, np.float32), q)
    xejit.matmul(OneAPIArray((3, 0), np.float32, q), OneAPIArray((0, 5), np.float32, q),
                 bias=device_array(biasv, q), activation="relu", out=out)
    check(out.read(), np.maximum(np.broadcast_to(biasv.astype(np.float64), (3, 5)), 0), "float32")


def test_suai_arrays_run_on_their_own_queue(spy):
    import dpctl
    import dpctl.memory as dm
    dev = default_device().sycl_device
    own = dpctl.SyclQueue(dpctl.SyclContext([dev]), dev)
    rng = np.random.default_rng(15)
    av, bv = rand(rng, (19, 23), "float32"), rand(rng, (23, 17), "float32")

    class Suai:
        def __init__(self, v):
            self.mem = dm.MemoryUSMDevice(v.nbytes, queue=own)
            own.memcpy(self.mem, np.ascontiguousarray(v), v.nbytes)
            self.__sycl_usm_array_interface__ = {"data": (self.mem._pointer, False), "shape": v.shape,
                                                 "strides": None, "typestr": v.dtype.str, "version": 1,
                                                 "syclobj": own}
    a, b = Suai(av), Suai(bv)
    c = xejit.matmul(a, b)
    assert isinstance(c, UsmArray) and c.queue is own    # no array namespace: the UsmArray itself
    assert all(call["queue"] is own for call in spy)
    _no_copies(spy, a.mem._pointer, b.mem._pointer, c.ptr)
    check(c.to_numpy(), reference(av, bv), "float32")


def test_mixed_devices_are_errors_naming_the_argument(q):
    a = device_array(np.ones((4, 8), np.float32), q)
    with pytest.raises(ValueError) as ei:
        xejit.matmul(a, np.ones((8, 4), np.float32))
    assert isinstance(ei.value, XejitError) and "b (ndarray) is a host array" in str(ei.value)
    assert "mixed devices" in str(ei.value)
    with pytest.raises(ValueError) as ei:
        xejit.matmul(np.ones((4, 8), np.float32), np.ones((8, 4), np.float32), out=OneAPIArray((4, 4), np.float32, q))
    assert "a (ndarray) is a host array but out" in str(ei.value)
    with pytest.raises(MatmulError) as ei:   # a CPU tensor with one on another torch device
        xejit.matmul(torch.ones(4, 8), torch.ones(8, 4, device="meta"))
    assert "b is on meta but a is on cpu" in str(ei.value) and isinstance(ei.value, ValueError)


def test_usm_backed_numpy_arrays_mix_with_device_arrays(q, spy):
    from xejit.runtime import usm
    rng = np.random.default_rng(16)
    av, bv = rand(rng, (12, 20), "float32"), rand(rng, (20, 9), "float32")
    a, b = device_array(av, q), usm.asarray(bv)
    c = xejit.matmul(a, b)
    _no_copies(spy, a.ptr, b.ctypes.data, c.ptr)
    check(c.read(), reference(av, bv), "float32")


def test_matmul_op_is_registered_for_xpu():
    import xejit.torch_ops  # noqa: F401
    assert torch._C._dispatch_has_kernel_for_dispatch_key("xejit::matmul", "XPU")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("xejit::matmul", "Meta")   # the fake: torch.compile
