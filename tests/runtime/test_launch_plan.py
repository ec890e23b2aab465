"""Prepared launches (xejit.launch_plan): a call with the argument signature of an earlier one
reuses its decisions -- and must never reuse them when anything they depend on changed."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit import device_launch, jit
from xejit.errors import ArgumentValueError
from xejit.runtime import usm

_SHIFT = 1.0


@xejit.kernel
def _axpb(x, y, alpha, BN: xl.constexpr):
    n = xl.program_id(0) * BN
    t = xl.load_tile(xl.init_tile(x, [0, n], [1, BN]))
    xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), t * alpha + _SHIFT)


N = 64


def _ref(x, alpha):
    return x.astype(np.float64) * alpha + _SHIFT


@pytest.fixture
def full_path(monkeypatch):
    """Counts launches that took the full path (binding, specialization, compile cache)."""
    monkeypatch.delenv("XEJIT_INTERPRET", raising=False)
    monkeypatch.delenv("XEJIT_EMULATE", raising=False)
    calls = []
    real = jit._compile_and_launch

    def spy(*a, **k):
        calls.append(a[2])
        return real(*a, **k)
    monkeypatch.setattr(jit, "_compile_and_launch", spy)
    return calls


def _usm_input(rng):
    return usm.asarray(rng.uniform(-2, 2, N).astype(np.float32))


def _poisoned():
    y = usm.empty(N, np.float32)
    y[...] = np.nan
    return y


def test_repeated_launches_take_the_plan_and_stay_correct(full_path):
    rng = np.random.default_rng(1)
    x, y = _usm_input(rng), _poisoned()
    for i, alpha in enumerate((0.5, -1.25, 3.0)):
        x[...] = rng.uniform(-2, 2, N)          # same array, new contents
        y[...] = np.nan
        _axpb[(N // 16,)](x, y, alpha, BN=16)
        np.testing.assert_allclose(y, _ref(x, alpha), rtol=1e-5, atol=1e-6)
    assert len(full_path) <= 2   # the first call, and at most the one that remembered the plan
    for _ in range(2):   # a plan of another signature beside it
        _axpb[(N // 8,)](x, y, 1.0, BN=8)
    before = len(full_path)
    for alpha in (2.0, -0.5):   # new arrays of the same signature, first seen by the plan
        x2, y2 = _usm_input(rng), _poisoned()
        _axpb[(N // 16,)](x2, y2, alpha, BN=16)
        np.testing.assert_allclose(y2, _ref(x2, alpha), rtol=1e-5, atol=1e-6)
    assert len(full_path) == before


def test_another_signature_takes_the_full_path(full_path):
    rng = np.random.default_rng(2)
    x, y = _usm_input(rng), _poisoned()
    for _ in range(2):
        _axpb[(N // 16,)](x, y, 1.5, BN=16)
    before = len(full_path)
    y[...] = np.nan
    _axpb[(N // 32,)](x, y, 1.5, BN=32)                         # another constexpr
    np.testing.assert_allclose(y, _ref(x, 1.5), rtol=1e-5, atol=1e-6)
    assert len(full_path) == before + 1
    x2, y2 = usm.asarray(np.asarray(x).reshape(1, N)), _poisoned().reshape(1, N)   # another rank
    y2[...] = np.nan
    _axpb[(N // 16,)](x2, y2, 1.5, BN=16)
    np.testing.assert_allclose(y2, _ref(x2, 1.5), rtol=1e-5, atol=1e-6)
    assert len(full_path) == before + 2
    big = usm.empty(N + 1, np.float32)                         # 4 bytes past a 16-byte boundary
    big[...] = rng.uniform(-2, 2, N + 1)
    xm = big[1:]
    y[...] = np.nan
    _axpb[(N // 16,)](xm, y, 1.5, BN=16)
    np.testing.assert_allclose(y, _ref(xm, 1.5), rtol=1e-5, atol=1e-6)
    assert len(full_path) == before + 3


def test_host_arrays_are_staged_and_copied_back_after_a_plan_exists(full_path):
    rng = np.random.default_rng(3)
    x, y = _usm_input(rng), _poisoned()
    for _ in range(2):
        _axpb[(N // 16,)](x, y, 0.75, BN=16)
    xh = rng.uniform(-2, 2, N).astype(np.float32)   # plain numpy: not USM memory
    yh = np.full(N, np.nan, np.float32)
    _axpb[(N // 16,)](xh, yh, 0.75, BN=16)
    np.testing.assert_allclose(yh, _ref(xh, 0.75), rtol=1e-5, atol=1e-6)


def test_a_read_only_output_is_refused_after_a_plan_exists(full_path):
    rng = np.random.default_rng(4)
    x, y = _usm_input(rng), _poisoned()
    for _ in range(2):
        _axpb[(N // 16,)](x, y, 1.0, BN=16)
    y[...] = -7.0
    y.flags.writeable = False
    with pytest.raises(ArgumentValueError, match="read-only"):
        _axpb[(N // 16,)](x, y, 1.0, BN=16)
    assert (np.asarray(y) == -7.0).all()


def test_a_changed_global_is_compiled_in(full_path):
    global _SHIFT
    rng = np.random.default_rng(5)
    x, y = _usm_input(rng), _poisoned()
    try:
        for _ in range(2):
            _axpb[(N // 16,)](x, y, 2.0, BN=16)
        _SHIFT = -3.0
        y[...] = np.nan
        _axpb[(N // 16,)](x, y, 2.0, BN=16)
        np.testing.assert_allclose(y, x.astype(np.float64) * 2.0 - 3.0, rtol=1e-5, atol=1e-6)
    finally:
        _SHIFT = 1.0


def test_a_changed_closure_variable_is_compiled_in(full_path):
    shift = 1.0

    @xejit.kernel
    def axpb_closure(x, y, alpha, BN: xl.constexpr):
        n = xl.program_id(0) * BN
        t = xl.load_tile(xl.init_tile(x, [0, n], [1, BN]))
        xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), t * alpha + shift)

    rng = np.random.default_rng(9)
    x, y = _usm_input(rng), _poisoned()
    for _ in range(2):
        axpb_closure[(N // 16,)](x, y, 2.0, BN=16)
    np.testing.assert_allclose(y, x.astype(np.float64) * 2.0 + 1.0, rtol=1e-5, atol=1e-6)
    assert len(full_path) == 1                  # the second launch took the plan
    shift = -3.0                                # noqa: F841  (read by the kernel through its cell)
    y[...] = np.nan
    axpb_closure[(N // 16,)](x, y, 2.0, BN=16)
    assert len(full_path) == 2
    np.testing.assert_allclose(y, x.astype(np.float64) * 2.0 - 3.0, rtol=1e-5, atol=1e-6)


def test_a_compile_only_variable_keeps_the_plan(full_path, monkeypatch):
    rng = np.random.default_rng(10)
    x, y = _usm_input(rng), _poisoned()
    _axpb[(N // 16,)](x, y, 1.5, BN=16)
    before = len(full_path)
    monkeypatch.setenv("XEJIT_PRINT_AUTOTUNING", "1")   # read by the autotuner only
    y[...] = np.nan
    _axpb[(N // 16,)](x, y, 1.5, BN=16)
    assert len(full_path) == before
    np.testing.assert_allclose(y, _ref(x, 1.5), rtol=1e-5, atol=1e-6)


def test_cleared_compile_caches_and_the_environment_are_part_of_the_key(full_path, monkeypatch):
    rng = np.random.default_rng(6)
    x, y = _usm_input(rng), _poisoned()
    for _ in range(2):
        _axpb[(N // 16,)](x, y, 1.0, BN=16)
    before = len(full_path)
    device_launch.clear_memory_caches()
    _axpb[(N // 16,)](x, y, 1.0, BN=16)
    assert len(full_path) == before + 1
    ran = []
    real = jit.Interpreter.run_grid
    monkeypatch.setattr(jit.Interpreter, "run_grid", lambda self, *a: (ran.append(1), real(self, *a))[1])
    monkeypatch.setenv("XEJIT_INTERPRET", "1")   # the same arguments, now for the interpreter
    y[...] = np.nan
    _axpb[(N // 16,)](x, y, 1.0, BN=16)
    assert ran == [1]
    np.testing.assert_allclose(y, _ref(x, 1.0), rtol=1e-5, atol=1e-6)
    monkeypatch.delenv("XEJIT_INTERPRET")
    y[...] = np.nan
    _axpb[(N // 16,)](x, y, 1.0, BN=16)
    np.testing.assert_allclose(y, _ref(x, 1.0), rtol=1e-5, atol=1e-6)
    assert ran == [1]


def test_an_empty_grid_launches_nothing_through_the_plan(full_path):
    rng = np.random.default_rng(8)
    x, y = _usm_input(rng), _poisoned()
    for _ in range(2):
        _axpb[(N // 16,)](x, y, 1.0, BN=16)
    y[...] = -1.0
    _axpb[(0,)](x, y, 1.0, BN=16)
    assert (y == -1.0).all()


def test_torch_cpu_tensors_take_the_plan_as_numpy_views(full_path):
    """Torch CPU tensors launch as their numpy views (runtime/host_views.py): repeated launches
    are prepared ones, a tensor changed in place or given new memory (``set_``) is read afresh
    (its new memory takes the full path once); bfloat16 tensors too (ml_dtypes' numpy bf16)."""
    torch = pytest.importorskip("torch")
    from xejit.runtime import default_device
    if not default_device().system_memory:
        pytest.skip("the device does not read host memory")
    rng = np.random.default_rng(5)

    def repeated(x, y):
        """Launches after the first, x changed in place before each: all prepared, all right."""
        _axpb[(N // 16,)](x, y, 0.5, BN=16)
        first = len(full_path)
        for alpha in (-1.25, 3.0):
            x.mul_(-1)
            y.fill_(float("nan"))
            _axpb[(N // 16,)](x, y, alpha, BN=16)
            np.testing.assert_allclose(y.numpy(), _ref(x.float().numpy(), alpha), rtol=1e-6)
        assert len(full_path) == first

    x, y = torch.from_numpy(rng.uniform(-2, 2, N).astype(np.float32)), torch.full((N,), float("nan"))
    repeated(x, y)
    x.set_(torch.from_numpy(rng.uniform(-2, 2, N).astype(np.float32)))
    y.fill_(float("nan"))
    _axpb[(N // 16,)](x, y, 2.0, BN=16)
    np.testing.assert_allclose(y.numpy(), _ref(x.numpy(), 2.0), rtol=1e-6)
    repeated(x.bfloat16(), torch.full((N,), float("nan")))   # (ml_dtypes' numpy bf16 view)
