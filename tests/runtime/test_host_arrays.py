"""Host arrays (numpy, torch CPU tensors) passed by address on a device that reads host memory
(the ``usm_system_allocations`` aspect; codegen/abi.py "addr" kinds): no staging copy into USM,
results written in place, read-only outputs still refused, ``XEJIT_HOST_ARRAYS=copy`` stages."""
import numpy as np
import pytest
import torch

import xejit
from tests.kernels import matmul
from xejit.runtime import default_device, launch

pytestmark = pytest.mark.skipif(not default_device().system_memory,
                                reason="the device does not read host memory (no usm_system_allocations)")


M, N, K = 37, 45, 29


def _launch(a, b, c):
    matmul[(xejit.cdiv(M, 8), xejit.cdiv(N, 16))](a, b, c, M, N, K, BM=8, BN=16, BK=8)


def _ref(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


@pytest.fixture
def on_device(monkeypatch):
    for v in ("XEJIT_INTERPRET", "XEJIT_EMULATE", "XEJIT_HOST_ARRAYS"):
        monkeypatch.delenv(v, raising=False)


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (M, K)).astype(np.float32), rng.uniform(-1, 1, (K, N)).astype(np.float32))


def _signatures(monkeypatch):
    """The argument kinds of each launch that took the full path (marshalled every argument)."""
    seen = []
    real = launch._marshal
    monkeypatch.setattr(launch, "_marshal", lambda k, v, q=None: (seen.append(k.signature), real(k, v, q))[1])
    return seen


def test_numpy_arrays_are_written_in_place_without_a_copy(on_device, monkeypatch):
    seen = _signatures(monkeypatch)
    a, b = _inputs(1)
    wide = np.full((M, N + 7), np.nan, np.float32)   # c is a padded-pitch view: the rest stays poisoned
    c = wide[:, :N]
    taken = launch._staging.taken
    for seed in (1, 2, 3):   # the full path, then prepared launches (xejit.launch_plan) with new values
        a[...], b[...] = _inputs(seed)
        c[...] = np.nan
        _launch(a, b, c)
        np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-5)
        assert np.isnan(wide[:, N:]).all()
    assert launch._staging.taken == taken   # no USM staging buffer was used
    assert seen and {"addr", "addr_in"} <= set(seen[0]) and not {"ptr", "ptr_in"} & set(seen[0])


def test_torch_cpu_tensors_are_written_in_place_without_a_copy(on_device):
    a, b = (torch.from_numpy(x) for x in _inputs(4))
    c = torch.full((M, N), float("nan"))
    taken = launch._staging.taken
    _launch(a, b, c)
    assert launch._staging.taken == taken
    np.testing.assert_allclose(c.numpy(), _ref(a.numpy(), b.numpy()), rtol=1e-5, atol=1e-5)


def test_read_only_numpy_output_is_refused(on_device):
    a, b = _inputs(5)
    c = np.full((M, N), np.nan, np.float32)
    _launch(a, b, c)   # a prepared launch exists: the refusal must still happen
    c[...] = np.nan
    c.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _launch(a, b, c)
    assert np.isnan(c).all()
    a.flags.writeable = False   # read-only inputs are fine
    c2 = np.full((M, N), np.nan, np.float32)
    _launch(a, b, c2)
    np.testing.assert_allclose(c2, _ref(a, b), rtol=1e-5, atol=1e-5)


def test_copy_mode_stages_and_compiles_pointer_arguments(on_device, monkeypatch):
    """XEJIT_HOST_ARRAYS=copy: a separate build (pointer arguments) and USM staging, same results."""
    a, b = _inputs(6)
    c = np.full((M, N), np.nan, np.float32)
    _launch(a, b, c)
    monkeypatch.setenv("XEJIT_HOST_ARRAYS", "copy")
    seen = _signatures(monkeypatch)
    taken = launch._staging.taken
    c[...] = np.nan
    _launch(a, b, c)
    np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-5)
    assert launch._staging.taken == taken + 3 and "ptr" in seen[-1] and "addr" not in seen[-1]
    monkeypatch.delenv("XEJIT_HOST_ARRAYS")
    c[...] = np.nan
    _launch(a, b, c)
    assert launch._staging.taken == taken + 3   # by address again (the earlier prepared launch)
    assert all("addr" in sig for sig in seen[1:])
    np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-5)


def test_bad_host_arrays_value(monkeypatch):
    monkeypatch.setenv("XEJIT_HOST_ARRAYS", "sometimes")
    with pytest.raises(xejit.XejitError, match="XEJIT_HOST_ARRAYS"):
        xejit.options.current()
