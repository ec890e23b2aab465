import numpy as np
import pytest

from xejit.errors import ArgumentError, LaunchError, XejitError
from xejit.runtime import build_program, usm

from . import kernels

RTOL_F32 = 1e-5


@pytest.fixture(scope="module")
def vadd():
    return build_program(kernels.vadd_f32()).kernel("vadd", ["ptr_in", "ptr_in", "ptr", "i32", "f32"])


@pytest.fixture(scope="module")
def rotate():
    return build_program(kernels.block_read_rotate()).kernel("rotate", ["ptr_in", "ptr"])


def _ref_vadd(a, b, alpha):
    return a.astype(np.float64) + alpha * b.astype(np.float64)


@pytest.mark.parametrize("n,block", [(1000, 64), (4096, 256), (1, 1), (77, 16)])
def test_vadd_numpy_arrays_copy_in_and_out(vadd, n, block):
    rng = np.random.default_rng(n)
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    c = np.full(n + 8, np.nan, np.float32)  # poisoned, with a tail the kernel must not touch
    vadd.launch((-(-n // block),), (block,), a, b, c, n, 0.5)
    np.testing.assert_allclose(c[:n], _ref_vadd(a, b, 0.5), rtol=RTOL_F32, atol=1e-6)
    assert np.isnan(c[n:]).all()


def test_vadd_usm_arrays_are_zero_copy(vadd):
    rng = np.random.default_rng(1)
    n = 513
    a = usm.asarray(rng.standard_normal(n).astype(np.float32))
    b = usm.asarray(rng.standard_normal(n).astype(np.float32))
    c = usm.empty(n, np.float32)
    c[:] = np.nan
    view = c[:]  # a view of USM memory is also passed without a copy
    vadd.launch((3,), (256,), a, b, view, n, -2.0)
    np.testing.assert_allclose(c, _ref_vadd(a, b, -2.0), rtol=RTOL_F32, atol=1e-6)


def test_vadd_interior_usm_view(vadd):
    rng = np.random.default_rng(2)
    base = usm.asarray(rng.standard_normal(64).astype(np.float32))
    out = np.full(32, np.nan, np.float32)
    vadd.launch((1,), (32,), base[16:48], base[32:64], out, 32, 1.0)
    np.testing.assert_allclose(out, _ref_vadd(base[16:48], base[32:64], 1.0), rtol=RTOL_F32)


def test_vadd_torch_cpu_tensors(vadd):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(300, generator=g), torch.randn(300, generator=g)
    c = torch.full((300,), float("nan"))
    vadd.launch((5,), (64,), a, b, c, 300, 3.0)
    np.testing.assert_allclose(c.numpy(), _ref_vadd(a.numpy(), b.numpy(), 3.0), rtol=RTOL_F32, atol=1e-6)


def test_block_read_and_shuffle(rotate):
    n = 16 * 64
    x = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    rotate.launch((4,), (256,), x, y)
    ref = x.reshape(-1, 16)[:, (np.arange(16) + 1) % 16].reshape(-1)
    np.testing.assert_array_equal(y, ref)


def test_column_major_array_keeps_its_memory_order(rotate):
    x = np.asfortranarray(np.random.default_rng(5).standard_normal((16, 4)).astype(np.float32))
    y = np.full(64, np.nan, np.float32)
    rotate.launch((1,), (64,), x, y)  # the kernel reads raw memory: column-major order
    flat = x.reshape(-1, order="F")
    np.testing.assert_array_equal(y, flat.reshape(-1, 16)[:, (np.arange(16) + 1) % 16].reshape(-1))


def _args(n=16):
    return [np.ones(n, np.float32), np.ones(n, np.float32), np.zeros(n, np.float32), n, 1.0]


@pytest.mark.parametrize("mutate,error,match", [
    (lambda a: a[:-1], ArgumentError, "takes 5 arguments"),
    (lambda a: a + [1], ArgumentError, "takes 5 arguments"),
    (lambda a: [a[0], "x", *a[2:]], ArgumentError, "must be an array"),
    (lambda a: [*a[:3], 1.5, a[4]], ArgumentError, "must be an integer"),
    (lambda a: [*a[:3], 2**40, a[4]], ArgumentError, "does not fit in i32"),
    (lambda a: [*a[:3], "16", a[4]], ArgumentError, "must be a number"),
    (lambda a: [np.ones((16, 4), np.float32)[:, 1], *a[1:]], ArgumentError, "unsupported array layout"),
])
def test_bad_arguments_are_clear_errors(vadd, mutate, error, match):
    with pytest.raises(error, match=match):
        vadd.launch((1,), (16,), *mutate(_args()))


def test_read_only_output_is_rejected(vadd):
    args = _args()
    args[2].flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        vadd.launch((1,), (16,), *args)


@pytest.mark.parametrize("grid,block", [((0,), (16,)), ((1, 1), (16,)), ((1,), (2**20,)), ((1.5,), (16,))])
def test_bad_ranges_are_launch_errors(vadd, grid, block):
    with pytest.raises(LaunchError):
        vadd.launch(grid, block, *_args())


def test_signature_must_match_the_kernel():
    prog = build_program(kernels.vadd_f32())
    with pytest.raises(LaunchError, match="takes 5"):
        prog.kernel("vadd", ["ptr"])
    with pytest.raises(LaunchError, match="no kernel named"):
        prog.kernel("nope", [])
    with pytest.raises(XejitError):
        prog.kernel("vadd", ["ptr", "ptr", "ptr", "int", "f32"])


def test_objects_with_the_sycl_usm_array_interface_are_zero_copy(vadd):
    # dpctl 0.22 has no usm_ndarray (it moved to dpnp); anything exposing
    # __sycl_usm_array_interface__ is passed as is, here dpctl's own USM memory objects.
    import dpctl.memory as dm
    q = vadd.device.queue
    n = 64
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ma, mb, mc = (dm.MemoryUSMShared(n * 4, queue=q) for _ in range(3))
    ma.copy_from_host(a.view(np.uint8)); mb.copy_from_host(b.view(np.uint8))
    mc.copy_from_host(np.full(n, np.nan, np.float32).view(np.uint8))
    vadd.launch((1,), (n,), ma, mb, mc, n, 2.0)
    np.testing.assert_allclose(mc.copy_to_host().view(np.float32), _ref_vadd(a, b, 2.0), rtol=RTOL_F32, atol=1e-6)


def test_grid_dimension_0_is_the_kernels_dimension_0():
    k = build_program(kernels.ids_2d()).kernel("ids2d", ["ptr"])
    out = np.full((3 * 2, 4 * 8), -1, np.int32)   # dim 1 (rows): 3 groups of 2; dim 0 (cols): 4 of 8
    k.launch((4, 3), (8, 2), out)
    y, x = np.indices(out.shape)
    np.testing.assert_array_equal(out, x + 1000 * y)


# --- the jit's repeated-launch path ---------------------------------------------------------------

import xejit  # noqa: E402
import xejit.language as xl  # noqa: E402


@xejit.kernel
def _scale_copy(x, y, S: xl.constexpr, BN: xl.constexpr):
    n = xl.program_id(0) * BN
    t = xl.load_tile(xl.init_tile(x, [0, n], [2, BN]))
    xl.store_tile(xl.init_tile(y, [0, n], [2, BN]), t * S)


def test_repeated_launches_respecialize_on_layout_alignment_and_constexprs(monkeypatch):
    """The quick path keys a call by dtype, strides, 16-byte alignment and constexpr values: a
    change of any of them must compile for it, never reuse the previous specialization."""
    monkeypatch.delenv("XEJIT_INTERPRET", raising=False)
    rng = np.random.default_rng(7)
    base = rng.uniform(0.5, 1.5, (2, 40)).astype(np.float32)
    misaligned = np.zeros(81, np.float32)[1:].reshape(2, 40)   # 4 bytes past a 16-byte boundary
    misaligned[...] = base
    for _ in range(2):   # the second round runs entirely on the quick path
        # one constexpr value for every layout (a different value would hide a layout missing
        # from the key), then another value for the same layout
        for x, s in ((base, 2.0), (np.asfortranarray(base), 2.0), (base.astype(np.float16), 2.0),
                     (misaligned, 2.0), (base, 3.0)):
            y = np.full(x.shape, np.nan, x.dtype)
            _scale_copy[(3,)](x, y, s, 16)                  # constexprs positionally
            np.testing.assert_allclose(y, x.astype(np.float64) * s, rtol=1e-3)
            y2 = np.full(x.shape, np.nan, x.dtype)
            _scale_copy[(3,)](x, y2, S=s, BN=16)            # and by keyword
            np.testing.assert_array_equal(y2, y)
            # the module the quick path launches is the one the full specialization gives
            quick = _scale_copy._quick[_scale_copy._quick_key((x, y, s, 16), {})][2]
            assert quick is _scale_copy.compile_ir(x, y, S=s, BN=16)
    assert _scale_copy.compile_ir(misaligned, misaligned, S=1.0, BN=16).functions[0].args[0].type.aligned16 is False
    # same strides, but a size-1 dim makes one row-major and the other column-major
    one, four = np.zeros((2, 1), np.float32, order="F"), np.zeros((2, 4), np.float32, order="F")
    assert one.strides == four.strides
    assert _scale_copy._quick_key((one, one, 2.0, 16), {}) != _scale_copy._quick_key((four, four, 2.0, 16), {})


def test_zero_copy_arguments_are_remembered_only_while_the_array_lives():
    import gc

    from xejit.runtime import launch, usm
    a = usm.empty((2, 40), np.float32)
    a[...] = 1.0
    y = usm.empty((2, 40), np.float32)
    _scale_copy[(3,)](a, y, 2.0, 16)
    assert id(a) in launch._zero_copy
    key = id(a)
    del a
    gc.collect()
    assert key not in launch._zero_copy
    np.testing.assert_array_equal(y, 2.0)


def test_staging_buffers_are_reused_never_shared_within_a_launch(vadd, monkeypatch):
    """Host arrays are staged in USM buffers kept for later launches (launch._staging): the
    arrays of one launch never share a buffer, a later launch reuses them, results stay right."""
    from xejit.runtime import launch
    monkeypatch.setattr(launch, "_staging", launch._StagingPool())
    seen = []
    real = launch._marshal

    def marshal(kernel, values, queue=None):
        m = real(kernel, values, queue)
        seen.append([mem._pointer for _, _, mem in m.staging])
        return m
    monkeypatch.setattr(launch, "_marshal", marshal)
    n, rng = 3000, np.random.default_rng(17)
    for _ in range(3):
        a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        c = np.full(n, np.nan, np.float32)
        vadd.launch((-(-n // 64),), (64,), a, b, c, n, 1.5)
        np.testing.assert_allclose(c, _ref_vadd(a, b, 1.5), rtol=RTOL_F32, atol=1e-6)
    assert all(len(set(ptrs)) == 3 for ptrs in seen)          # a, b and c: three buffers
    assert set(seen[1]) == set(seen[0]) and set(seen[2]) == set(seen[0])   # reused
    launch.release_staging_buffers()


def test_a_float_grid_is_refused_after_the_same_int_grid_launched(vadd):
    a = usm.asarray(np.linspace(-1, 1, 64, dtype=np.float32))
    c = usm.empty(64, np.float32)
    c[...] = np.nan
    vadd.launch((1,), (64,), a, a, c, 64, 0.5)    # its ranges are remembered: (1.0,) == (1,) as a key
    np.testing.assert_allclose(c, 1.5 * a.astype(np.float64), rtol=1e-6)
    with pytest.raises(LaunchError, match="positive integers"):
        vadd.launch((1.0,), (64,), a, a, c, 64, 0.5)


@pytest.mark.parametrize("n,alpha,err", [(2 ** 31, 1.0, "does not fit in i32"), (True, 1.0, "must be a number"),
                                         (64, 1, None), (np.int32(64), np.float32(0.5), None)])
def test_scalar_arguments_of_every_python_and_numpy_type(vadd, n, alpha, err):
    a = usm.asarray(np.linspace(-1, 1, 64, dtype=np.float32))
    c = usm.empty(64, np.float32)
    c[...] = np.nan
    if err:
        with pytest.raises(ArgumentError, match=err):
            vadd.launch((1,), (64,), a, a, c, n, alpha)
        return
    vadd.launch((1,), (64,), a, a, c, n, alpha)
    np.testing.assert_allclose(c, (1 + float(alpha)) * a.astype(np.float64), rtol=1e-6)
