"""Kernels used by the compiler tests and benchmarks."""
import xejit
import xejit.language as xl


@xejit.kernel
def matmul(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


@xejit.kernel
def matmul_int(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.int32)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc)


@xejit.kernel
def matmul_layout(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr,
                  SGL: xl.constexpr, SGD: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc, wg_map=xl.wg_map(SGL, SGD))
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


@xejit.kernel
def matmul_bias_relu(a, b, bias, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    bv = xl.load_tile(xl.init_tile(bias, [0, n], [1, BN]))
    acc = xl.maximum(acc + bv, 0.0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


@xejit.kernel
def matmul_splitk(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr,
                  KSPLIT: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    kc = xl.cdiv(K, KSPLIT)
    k0 = xl.program_id(2) * kc
    ta = xl.init_tile(a, [m, k0], [BM, BK])
    tb = xl.init_tile(b, [k0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, kc, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.atomic_rmw_tile(xl.init_tile(c, [m, n], [BM, BN]), acc, kind="add")


@xejit.kernel
def softmax(x, y, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN]), padding=float("-inf"))
    mx = xl.max(t, 1)
    e = xl.exp(t - mx)
    s = xl.sum(e, 1)
    xl.store_tile(xl.init_tile(y, [m, 0], [BM, BN]), e / s)


@xejit.kernel
def eltwise(x, y, z, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    a = xl.load_tile(xl.init_tile(x, [m, n], [BM, BN]))
    b = xl.load_tile(xl.init_tile(y, [m, n], [BM, BN]))
    r = xl.where(a > b, a * 2.0 - b, xl.exp(b) + 1.0)
    xl.store_tile(xl.init_tile(z, [m, n], [BM, BN]), r.to(z.dtype))


@xejit.kernel
def colsum(x, y, BM: xl.constexpr, BN: xl.constexpr):
    n = xl.program_id(0) * BN
    t = xl.load_tile(xl.init_tile(x, [0, n], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), xl.sum(t, 0))


@xejit.kernel
def transpose(x, y, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    t = xl.load_tile(xl.init_tile(x, [m, n], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [n, m], [BN, BM]), xl.tile_transpose(t))


@xejit.kernel
def unary_exp(x, y, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    a = xl.load_tile(xl.init_tile(x, [m, n], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [m, n], [BM, BN]), xl.exp(a))


@xejit.kernel
def rowsum_layout(x, y, BM: xl.constexpr, BN: xl.constexpr, SGL: xl.constexpr, SGD: xl.constexpr):
    m = xl.program_id(0) * BM
    t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN], wg_map=xl.wg_map(SGL, SGD)))
    xl.store_tile(xl.init_tile(y, [m, 0], [BM, 1]), xl.sum(t, 1))


@xejit.kernel
def rowsum_convert(x, y, BM: xl.constexpr, BN: xl.constexpr, SGL: xl.constexpr, SGD: xl.constexpr,
                   SGL2: xl.constexpr, SGD2: xl.constexpr):
    m = xl.program_id(0) * BM
    t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN], wg_map=xl.wg_map(SGL, SGD)))
    t = xl.convert_layout(t, xl.wg_map(SGL2, SGD2))
    xl.store_tile(xl.init_tile(y, [m, 0], [BM, 1]), xl.sum(t, 1))


@xejit.kernel
def convert_scale(x, y, BM: xl.constexpr, BN: xl.constexpr, SGL: xl.constexpr, SGD: xl.constexpr,
                  SGL2: xl.constexpr, SGD2: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    t = xl.load_tile(xl.init_tile(x, [m, n], [BM, BN], wg_map=xl.wg_map(SGL, SGD)))
    t = xl.convert_layout(t * 2.0, xl.wg_map(SGL2, SGD2))
    xl.store_tile(xl.init_tile(y, [m, n], [BM, BN]), t + 1.0)


@xejit.kernel
def transpose_layout(x, y, BM: xl.constexpr, BN: xl.constexpr, SGL: xl.constexpr, SGD: xl.constexpr,
                     SGL2: xl.constexpr, SGD2: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    t = xl.load_tile(xl.init_tile(x, [m, n], [BM, BN], wg_map=xl.wg_map(SGL, SGD)))
    xl.store_tile(xl.init_tile(y, [n, m], [BN, BM]), xl.tile_transpose(t, xl.wg_map(SGL2, SGD2)))


@xejit.kernel
def colsum_layout(x, y, BM: xl.constexpr, BN: xl.constexpr, SGL: xl.constexpr, SGD: xl.constexpr):
    n = xl.program_id(0) * BN
    t = xl.load_tile(xl.init_tile(x, [0, n], [BM, BN], wg_map=xl.wg_map(SGL, SGD)))
    xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), xl.sum(t, 0))
