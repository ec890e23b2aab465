"""xejit.matmul against float64 references, with torch.matmul's shape rules; outputs poisoned."""
from __future__ import annotations

import zlib
import numpy as np
import pytest
import torch

import xejit
from xejit.matmul import gemm_tuner
from tests.matmul.backend import heavy_on_device, requires_device
from tests.matmul.helpers import check, f64, poisoned, rand, reference

M, N, K = 37, 45, 29          # not multiples of any tile: exercises the boundary handling
DTYPES = [("float32", "numpy"), ("float16", "numpy"), ("int8", "numpy"),
          ("float32", "torch"), ("float16", "torch"), ("bfloat16", "torch"), ("int8", "torch")]


def _result_dtype(dtype):
    return "int32" if dtype == "int8" else dtype


def _t(x):
    """Transpose the last two dims as a view (a column-major operand)."""
    return x.mT if isinstance(x, torch.Tensor) else np.swapaxes(x, -1, -2)


@requires_device
def test_device_path_is_used():
    """Skipped (with the reason) while DSL kernels cannot run on the device."""


CORE = {("float32", "numpy", False, False), ("float32", "numpy", True, False), ("bfloat16", "torch", False, False)}
LAYOUT_CASES = [heavy_on_device(d, lib, at, bt, core=(d, lib, at, bt) in CORE) for d, lib in DTYPES
                for at, bt in [(False, False), (True, False), (False, True), (True, True)]]


@pytest.mark.parametrize("dtype,lib,a_t,b_t", LAYOUT_CASES)
def test_2d_layouts(dtype, lib, a_t, b_t):
    rng = np.random.default_rng(zlib.crc32(repr((dtype, lib, a_t, b_t)).encode()))
    a = _t(rand(rng, (K, M), dtype, lib)) if a_t else rand(rng, (M, K), dtype, lib)
    b = _t(rand(rng, (N, K), dtype, lib)) if b_t else rand(rng, (K, N), dtype, lib)
    out = poisoned((M, N), _result_dtype(dtype), lib)
    r = xejit.matmul(a, b, out=out)
    assert r is out
    check(out, reference(a, b), _result_dtype(dtype))
    check(xejit.matmul(a, b), reference(a, b), _result_dtype(dtype))


def test_transposed_views_are_not_copied():
    rng = np.random.default_rng(7)
    a = rand(rng, (24, 40), "float32").T            # column-major view, no copy
    b = rand(rng, (24 + 8, 56), "float32")[4:28]     # row-major slice with a pitch
    before = set(gemm_tuner().kernel.cache)
    check(xejit.matmul(a, b), reference(a, b), "float32")
    new = [k for k in gemm_tuner().kernel.cache if k not in before]
    specs = {name: spec for k in new for name, spec in (p for p in k if len(p) == 2 and hasattr(p[1], "order"))}
    assert specs["a"].order == (0, 1) and specs["b"].order == (1, 0)


@pytest.mark.parametrize("dtype,lib", [("float32", "numpy"), ("bfloat16", "torch")])
def test_power_of_two_pitch_b_is_padded_on_the_cpu_device(dtype, lib, monkeypatch):
    """B rows 2 KB apart are copied to a padded pitch for the generic target (cache sets); the
    result is the same GEMM. (The tuned GEMM's: bf16 takes the bf16 dot-product kernels where
    the CPU has them, test_bf16_dot.py, so they are switched off here.)"""
    import sys
    from xejit import cpu_simd_gemm
    xm = sys.modules["xejit.matmul"]   # (xejit.matmul is also the function)
    monkeypatch.setattr(cpu_simd_gemm, "available", lambda: False)
    seen = []
    real = xm._padded_pitch
    monkeypatch.setattr(xm, "_padded_pitch", lambda b, m: seen.append(real(b, m)) or seen[-1])
    rng = np.random.default_rng(9)
    n = 2048 // (4 if dtype == "float32" else 2)
    m = xm._GEMV_BLOCKED_MAX_M + 1   # not a skinny GEMM
    a, b = rand(rng, (m, 64), dtype, lib), rand(rng, (64, n), dtype, lib)
    check(xejit.matmul(a, b), reference(a, b), dtype)
    # (a torch tensor goes as its numpy view: runtime/host_views.py)
    def row_stride(x):
        return x.stride(0) if isinstance(x, torch.Tensor) else x.strides[0] // x.itemsize
    assert row_stride(seen[-1]) == n    # few rows of A: the copy would cost more than it saves
    monkeypatch.setattr(xm, "_PAD_MIN_ROWS", 4)
    check(xejit.matmul(a, b), reference(a, b), dtype)
    from xejit.autotuner import current_target
    from xejit.codegen.targets import get_target
    if get_target(current_target()).conflict_pitch_bytes == 2048 and not xm._interpreting():
        assert row_stride(seen[-1]) == n + 64 // (4 if dtype == "float32" else 2)
        assert tuple(seen[-1].shape) == (64, n)
    else:                       # other targets and the interpreter take B as it is
        assert row_stride(seen[-1]) == n


def test_non_contiguous_strides_are_copied():
    rng = np.random.default_rng(8)
    a = rand(rng, (M, 2 * K), "float32")[:, ::2]     # neither row- nor column-major
    b = rand(rng, (K, N), "float32")
    check(xejit.matmul(a, b), reference(a, b), "float32")


BATCH_CASES = [
    ((3, M, K), (K, N)),          # shared b: one launch over the stacked rows
    ((3, M, K), (3, K, N)),
    ((2, 1, M, K), (3, K, N)),    # broadcast batch dims
    ((1, M, K), (2, 3, K, N)),
    ((K,), (K, N)),               # 1-D operands
    ((M, K), (K,)),
    ((K,), (K,)),
    ((2, M, K), (K,)),
    ((K,), (2, K, N)),
    ((0, M, K), (K, N)),          # empty batch
]


@pytest.mark.parametrize("a_shape,b_shape,dtype,lib", [
    heavy_on_device(a, b, d, lib, core=d == "float32") for a, b in BATCH_CASES
    for d, lib in [("float32", "numpy"), ("bfloat16", "torch"), ("int8", "torch")]])
def test_batched_and_1d(a_shape, b_shape, dtype, lib):
    rng = np.random.default_rng(len(a_shape) * 10 + len(b_shape))
    a, b = rand(rng, a_shape, dtype, lib), rand(rng, b_shape, dtype, lib)
    shape = torch.matmul(torch.empty(a_shape), torch.empty(b_shape)).shape
    out = poisoned(tuple(shape), _result_dtype(dtype), lib)
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), _result_dtype(dtype))
    r = xejit.matmul(a, b)
    assert tuple(r.shape) == tuple(shape)
    check(r, reference(a, b), _result_dtype(dtype))


@pytest.mark.parametrize("case", [heavy_on_device("column-major a, b and out")])
def test_batched_transposed_operands(case):
    rng = np.random.default_rng(9)
    a = _t(rand(rng, (2, K, M), "float32"))
    b = _t(rand(rng, (2, N, K), "float32"))
    out = _t(poisoned((2, N, M), "float32", "numpy"))  # column-major out slices: written in place
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), "float32")


@pytest.mark.parametrize("activation,dtype,lib", [
    heavy_on_device(act, d, lib, core=(act, d) == ("relu", "float32")) for act in (None, "relu", "gelu_tanh")
    for d, lib in [("float32", "numpy"), ("float16", "numpy"), ("bfloat16", "torch")]])
def test_bias_and_activation(activation, dtype, lib):
    rng = np.random.default_rng(11)
    a, b = rand(rng, (2, M, K), dtype, lib), rand(rng, (K, N), dtype, lib)
    bias = rand(rng, (N,), dtype, lib)
    out = poisoned((2, M, N), dtype, lib)
    xejit.matmul(a, b, bias=bias, activation=activation, out=out)
    ref = reference(a, b, bias, activation)
    check(out, ref, dtype)
    if activation == "relu":
        assert (f64(out) == 0).any() and (f64(out) > 0).any()


@pytest.mark.parametrize("case", [heavy_on_device("int8 with an int32 bias")])
def test_int8_bias_relu(case):
    rng = np.random.default_rng(12)
    a, b = rand(rng, (M, K), "int8"), rand(rng, (K, N), "int8")
    bias = rng.integers(-1000, 1000, N).astype(np.int32)
    check(xejit.matmul(a, b, bias=bias, activation="relu"), reference(a, b, bias, "relu"), "int32")


def test_usm_arrays():
    from xejit.runtime import usm
    rng = np.random.default_rng(13)
    a_np, b_np = rand(rng, (M, K), "float32"), rand(rng, (K, N), "float32")
    a, b = usm.asarray(a_np), usm.asarray(b_np)   # numpy views of USM memory
    out = usm.empty((M, N), np.float32)
    out[...] = np.nan
    assert xejit.matmul(a, b, out=out) is out
    check(out, reference(a_np, b_np), "float32")


def test_zero_k():
    a, b = np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    bias = np.arange(4, dtype=np.float32)
    check(xejit.matmul(a, b, bias=bias), np.tile(np.arange(4.0), (3, 1)), "float32")


# --- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,kw,match", [
    (np.ones((3, 4)), np.ones((4, 5)), {}, r"a \(float64 \[3, 4\]\) has an unsupported dtype"),
    (np.ones((3, 4), np.float32), np.ones((4, 5), np.float16), {},
     r"a \(float32 \[3, 4\]\) and b \(float16 \[4, 5\]\) must have the same dtype"),
    (np.ones((3, 4), np.float32), np.ones((5, 6), np.float32), {},
     r"a \(float32 \[3, 4\]\) has K=4 columns but b \(float32 \[5, 6\]\) has 5 rows"),
    (np.ones((2, 3, 4), np.float32), np.ones((3, 4, 5), np.float32), {}, "batch dimensions .* do not broadcast"),
    (np.float32(1.0), np.ones((4, 5), np.float32), {}, "0-d"),
    (np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), {"out": np.empty((3, 4), np.float32)},
     r"out \(float32 \[3, 4\]\) must be float32 \[3, 5\]"),
    (np.ones((3, 4), np.int8), np.ones((4, 5), np.int8), {"out": np.empty((3, 5), np.int8)},
     r"out \(int8 \[3, 5\]\) must be int32 \[3, 5\]"),
    (np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), {"bias": np.ones(4, np.float32)},
     r"bias \(float32 \[4\]\) must have shape \[5\]"),
    (np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), {"activation": "tanh"}, "unknown activation 'tanh'"),
    (np.ones((3, 4), np.int8), np.ones((4, 5), np.int8), {"activation": "gelu_tanh"}, "needs float operands"),
    (torch.ones(3, 4), np.ones((4, 5), np.float32), {}, "must both be torch tensors"),
    (torch.ones(3, 4), torch.ones(4, 5), {"bias": np.ones(5, np.float32)}, "bias is a ndarray; .* torch tensor"),
    (torch.ones(3, 4), torch.ones(4, 5), {"out": np.empty((3, 5), np.float32)}, "out is a ndarray; .* torch tensor"),
    (torch.ones(3, 4, dtype=torch.float64), torch.ones(4, 5, dtype=torch.float64), {}, r"float64 \[3, 4\]"),
])
def test_bad_inputs(a, b, kw, match):
    with pytest.raises(xejit.XejitError, match=match):
        xejit.matmul(a, b, **kw)
    if "torch tensor" in match:   # a type mix-up is a TypeError, as torch.matmul raises
        with pytest.raises(TypeError):
            xejit.matmul(a, b, **kw)


def test_tune_limit(monkeypatch):
    from xejit.matmul import tune_limit
    monkeypatch.setenv("XEJIT_MATMUL_TUNE", "0")
    assert tune_limit("generic") == 1
    tuner = gemm_tuner()
    a = rand(np.random.default_rng(14), (M + 3, K), "float32")   # a shape no other test tuned
    b = rand(np.random.default_rng(15), (K, N), "float32")
    before = set(tuner.records)
    check(xejit.matmul(a, b), reference(a, b), "float32")
    (record,) = [r for k, r in tuner.records.items() if k not in before]   # this shape's, not another test's
    # nothing timed; the perf model kept the best-ranked of the configs the other prunes left (on
    # the generic target several; under XEJIT_EMULATE=pvc the shape prune may leave just one)
    reasons = [r for _, r in record.pruned]
    ranked = len(tuner.configs) - sum("perf_model" not in r for r in reasons)
    assert record.timings == {} and ranked >= 1
    assert sum("perf_model" in r for r in reasons) == ranked - 1
    monkeypatch.setenv("XEJIT_MATMUL_TUNE", "all")
    assert tune_limit("generic") is None
    monkeypatch.setenv("XEJIT_MATMUL_TUNE", "")
    assert tune_limit("generic") == 1 and tune_limit("pvc") == 1   # the default: the best-ranked config only
    monkeypatch.setenv("XEJIT_MATMUL_TUNE", "lots")
    with pytest.raises(xejit.XejitError, match="XEJIT_MATMUL_TUNE"):
        tune_limit("generic")


def test_cold_first_call_builds_one_config(monkeypatch, tmp_path):
    """With XEJIT_MATMUL_TUNE unset and an empty cache directory, a new shape compiles only the
    config the cost model ranks best (a cold first call used to build and time every config)."""
    import xejit.device_launch as dl
    monkeypatch.delenv("XEJIT_MATMUL_TUNE", raising=False)
    monkeypatch.setenv("XEJIT_CACHE_DIR", str(tmp_path))
    dl.clear_memory_caches()
    built = []
    real = dl.compile_kernel
    monkeypatch.setattr(dl, "compile_kernel", lambda *a, **k: (built.append(a[0]), real(*a, **k))[1])
    rng = np.random.default_rng(16)
    a, b = rand(rng, (M + 5, K), "float32"), rand(rng, (K, N + 2), "float32")   # a shape no other test tuned
    tuner = gemm_tuner()
    out = xejit.matmul(a, b)
    check(out, reference(a, b), "float32")
    record = next(r for k, r in tuner.records.items() if tuple(k[:3]) == (M + 5, N + 2, K))
    assert record.timings == {}
    if not xejit.options.current().interpret:
        assert len(built) == 1


@pytest.fixture
def fast_path_hits(monkeypatch):
    """From when it is called: a list that gets, per xejit.matmul call that looks for a remembered
    choice (matmul._fast_matmul), whether it took one."""
    import importlib
    mm = importlib.import_module("xejit.matmul")   # (xejit.matmul is also the function)

    def start() -> list:
        hits = []
        real = mm._fast_matmul

        def counted(*x):
            r = real(*x)
            hits.append(r is not None)
            return r
        monkeypatch.setattr(mm, "_fast_matmul", counted)
        return hits
    return start


@requires_device
def test_repeated_calls_reuse_the_choice_and_stay_correct(fast_path_hits):
    """A call with the dtypes, shapes, strides and activation of an earlier one reuses its tuned
    config, grid and result allocation (xejit.matmul._fast_matmul): new operand values, a
    transposed operand, another activation and a retune all give the right result."""
    rng = np.random.default_rng(21)
    a, b = rand(rng, (M, K), "float32"), rand(rng, (K, N), "float32")
    xejit.matmul(a, b)
    hits = fast_path_hits()
    for act in (None, None, "relu"):
        a2, b2 = rand(rng, (M, K), "float32"), rand(rng, (K, N), "float32")
        check(xejit.matmul(a2, b2, activation=act), reference(a2, b2, None, act), "float32")
    bt = np.ascontiguousarray(rand(rng, (N, K), "float32")).T   # column-major b: another key
    check(xejit.matmul(a, bt), reference(a, bt), "float32")
    gemm_tuner().cache.clear()      # a retune: the remembered choice is not used
    check(xejit.matmul(a, b), reference(a, b), "float32")
    assert hits == [True, True, False, False, False]


@requires_device
@pytest.mark.parametrize("m", [1, M])   # the skinny kernel's recipe, the tuned GEMM's
def test_repeated_calls_with_out_reuse_the_choice_and_keep_its_checks(m, fast_path_hits):
    """A call with ``out=`` of an earlier call's dtypes, shapes and strides takes the remembered
    choice too (a decode loop's call); an ``out`` that is read-only still raises, one that shares
    memory with an operand still gets the right result, and another ``out`` layout is another key."""
    rng = np.random.default_rng(22)
    k, n = (512, 256) if m == 1 else (K, N)     # (m = 1: enough of b for the skinny kernel)
    a, b = rand(rng, (m, k), "float32"), rand(rng, (k, n), "float32")
    out = poisoned((m, n), "float32", "numpy")
    xejit.matmul(a, b, out=out)
    hits = fast_path_hits()
    for _ in range(2):
        a, b, out = rand(rng, (m, k), "float32"), rand(rng, (k, n), "float32"), poisoned((m, n), "float32", "numpy")
        assert xejit.matmul(a, b, out=out) is out
        check(out, reference(a, b), "float32")
    pitched = poisoned((m, n + 3), "float32", "numpy")[:, :n]
    assert xejit.matmul(a, b, out=pitched) is pitched
    check(pitched, reference(a, b), "float32")
    read_only = poisoned((m, n), "float32", "numpy")
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        xejit.matmul(a, b, out=read_only)
    # an out that is (rows of) an operand's memory, the layouts' second call: into a new array first
    s = k if m == 1 else m
    sq = rand(rng, (s, s), "float32")
    row = sq[:m]
    want = reference(row, sq)
    xejit.matmul(row.copy(), sq.copy(), out=poisoned(row.shape, "float32", "numpy"))
    check(xejit.matmul(row, sq, out=row), want, "float32")
    assert hits[:2] == [True, True] and hits[2] is False


@requires_device
@pytest.mark.parametrize("m,dtype", [(1, "float32"), (M, "float32"), (1, "int8"), (M, "float16"),
                                     (1, "bfloat16"), (M, "bfloat16")])
def test_torch_cpu_tensors_take_the_numpy_path(m, dtype, fast_path_hits):
    """2D torch CPU tensors numpy can view (bfloat16 as ml_dtypes' numpy bfloat16) go through
    numpy views and the remembered choices
    (the weights' view is kept per tensor): results right with and without ``out=``, a weight
    changed in place or given new memory (``set_``) read afresh; autograd still takes the op."""
    rng = np.random.default_rng(23)
    k, n = (512, 256) if m == 1 else (K, N)
    rdt = _result_dtype(dtype)
    w = rand(rng, (k, n), dtype, "torch")
    xejit.matmul(rand(rng, (m, k), dtype, "torch"), w)
    hits = fast_path_hits()
    x = rand(rng, (m, k), dtype, "torch")
    got = xejit.matmul(x, w)
    assert isinstance(got, torch.Tensor) and str(got.dtype) == f"torch.{rdt}"
    check(got, reference(x, w), rdt)
    out = poisoned((m, n), rdt, "torch")
    assert xejit.matmul(x, w, out=out) is out
    check(out, reference(x, w), rdt)
    w.mul_(-1)                                         # the same memory, new values
    check(xejit.matmul(x, w), reference(x, w), rdt)
    w.set_(rand(rng, (k, n), dtype, "torch"))          # new memory
    check(xejit.matmul(x, w), reference(x, w), rdt)
    assert hits[0] is True and len(hits) == 4
    if dtype != "int8":
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        xejit.matmul(xg, wg).sum().backward()
        assert len(hits) == 4                          # the op, not the numpy path
        check(xg.grad, reference(np.ones((m, n)), f64(w).T), dtype)


def test_the_custom_op_is_for_autograd_and_compile(monkeypatch):
    """A plain call on torch CPU tensors (here bfloat16 with a bias: not through numpy views)
    computes directly; with an operand that requires grad it goes through torch.ops.xejit.matmul."""
    import xejit.torch_ops as ops
    calls = []
    real = ops.matmul_op
    monkeypatch.setattr(ops, "matmul_op", lambda *x: calls.append(1) or real(*x))
    rng = np.random.default_rng(24)
    a, b, bias = rand(rng, (M, K), "bfloat16", "torch"), rand(rng, (K, N), "bfloat16", "torch"), \
        rand(rng, (N,), "bfloat16", "torch")
    check(xejit.matmul(a, b, bias=bias), reference(a, b, bias), "bfloat16")
    assert calls == []
    with torch.no_grad():
        check(xejit.matmul(a.requires_grad_(), b, bias=bias), reference(a, b, bias), "bfloat16")
    assert calls == []
    check(xejit.matmul(a, b, bias=bias).detach(), reference(a, b, bias), "bfloat16")
    assert calls == [1]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_column_major_b_is_copied_row_major_without_block_io(lib, monkeypatch):
    """On targets without 2D block IO (the CPU device) a column-major B (``x @ w.T``) of a GEMM
    with more than 8 rows is copied once to row-major (the kernel would gather its rows); the
    result is the same GEMM, and skinny GEMMs take B as it is. (Up to _BT_MAX_M rows the CPU
    device reads such a B in place by dot products instead, test_bf16_dot.py: off here.)"""
    import sys
    xm = sys.modules["xejit.matmul"]
    monkeypatch.setattr(xm, "_BT_MAX_M", 0)
    seen = []
    real = xm._row_major_b
    monkeypatch.setattr(xm, "_row_major_b", lambda b, m: seen.append(real(b, m)) or seen[-1])
    rng = np.random.default_rng(10)
    a, w = rand(rng, (20, 64), "float32", lib), rand(rng, (48, 64), "float32", lib)
    check(xejit.matmul(a, _t(w)), reference(a, _t(w)), "float32")
    from xejit.autotuner import current_target
    from xejit.codegen.targets import get_target
    # (torch CPU tensors reach it as numpy views: _through_numpy_views)
    strides = tuple(seen[-1].stride()) if isinstance(seen[-1], torch.Tensor) else tuple(s // 4 for s in seen[-1].strides)
    if not get_target(current_target()).has_block_io and not xm._interpreting():
        assert strides == (48, 1)
    else:
        assert strides == (1, 64)


@requires_device
@pytest.mark.parametrize("m,n,k", [(1, 300, 333), (20, 300, 333), (M, N, K), (300, 512, 600)])
def test_numpy_bfloat16_arrays(m, n, k):
    """numpy arrays of ml_dtypes' bfloat16 (JAX's, and torch bf16 tensors' views here) are bf16
    operands: a result of that dtype, with and without a poisoned ``out=``, against float64 (the
    skinny kernel, its row blocks, the tuned GEMM and the packed kernels)."""
    import ml_dtypes
    rng = np.random.default_rng(m * 7 + n)
    a = (rng.standard_normal((m, k)) + 0.1).astype(ml_dtypes.bfloat16)
    b = (rng.standard_normal((k, n)) + 0.1).astype(ml_dtypes.bfloat16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = xejit.matmul(a, b)
    assert type(got) is np.ndarray and got.dtype == np.dtype(ml_dtypes.bfloat16)
    check(got.astype(np.float64), ref, "bfloat16")
    out = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    assert xejit.matmul(a, b, out=out) is out
    check(out.astype(np.float64), ref, "bfloat16")
