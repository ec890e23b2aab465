"""Torch CPU tensors as numpy views (xejit/runtime/host_views.py): one view object per tensor,
memory and layout; none for a dtype numpy lacks, a subclass or a conjugate view."""
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


@pytest.mark.parametrize("make", [lambda: torch.ones(3, dtype=torch.bfloat16),
                                  lambda: torch.ones(3, dtype=torch.complex64).conj(),
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
