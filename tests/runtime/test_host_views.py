"""Torch CPU tensors as numpy views (xejit/runtime/host_views.py): one view object per tensor,
memory and layout (bfloat16 as ml_dtypes' numpy bfloat16); none for a subclass or a conjugate
view."""
import gc

import numpy as np
import pytest

from xejit.runtime import host_views
from xejit.runtime.host_views import numpy_view

torch = pytest.importorskip("torch")


def test_a_tensor_keeps_its_view_until_its_memory_or_layout_changes():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    v = numpy_view(t)
    assert v is numpy_view(t) and np.shares_memory(v, t.numpy())
    v[0, 0] = 7
    assert t[0, 0] == 7                                 # writes are the tensor's
    t.t_()                                              # (in place: the same tensor, another layout)
    assert numpy_view(t) is not v and numpy_view(t).shape == (4, 3)
    old = numpy_view(t)
    t.set_(torch.zeros(2, 2))                           # new memory
    assert numpy_view(t) is not old and numpy_view(t).shape == (2, 2) and not numpy_view(t).any()


def test_a_bfloat16_tensor_is_viewed_as_numpy_bfloat16():
    """torch bf16 has no numpy dtype of its own: its view is ml_dtypes' bfloat16 on the same bits,
    and as_tensor gives a bf16 tensor back on the same memory."""
    import ml_dtypes
    t = torch.tensor([[1.5, -2.25, 3.0], [0.0, 7.0, -0.5]], dtype=torch.bfloat16).t()
    v = numpy_view(t)
    assert v.dtype == np.dtype(ml_dtypes.bfloat16) and v.shape == (3, 2) and v is numpy_view(t)
    np.testing.assert_array_equal(v.astype(np.float32), t.float().numpy())
    v[0, 1] = 5
    assert t[0, 1] == 5                                 # the tensor's memory
    back = host_views.as_tensor(v)
    assert back.dtype == torch.bfloat16 and back.data_ptr() == t.data_ptr() and torch.equal(back, t)


@pytest.mark.parametrize("make", [lambda: torch.ones(3, dtype=torch.complex64).conj(),
                                  lambda: type("Sub", (torch.Tensor,), {})(torch.ones(3)),
                                  lambda: np.ones(3), lambda: 3.0])
def test_no_view(make):
    x = make()
    assert numpy_view(x) is x


def test_a_dead_tensor_is_forgotten():
    t = torch.ones(5)
    numpy_view(t)
    key = id(t)
    assert key in host_views._views
    del t
    gc.collect()
    assert key not in host_views._views
