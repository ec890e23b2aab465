"""Kernels for the XeGPU tests (module level so the frontend can read their source)."""
import xejit
import xejit.language as xl


@xejit.kernel(interpret=True)
def gemm(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr,
         PREC: xl.constexpr = "ieee"):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], c.dtype if c.dtype == xl.int32 else xl.float32)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc, input_precision=PREC)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


@xejit.kernel(interpret=True)
def gemm_bias_relu(a, b, bias, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    bias_row = xl.load_tile(xl.init_tile(bias, [0, n], [1, BN])).to(xl.float32)
    acc = xl.maximum(acc + bias_row, 0.0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


@xejit.kernel(interpret=True)
def gemm_prefetch(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, K, BK):
        xl.prefetch_tile(xl.update_tile_offset(ta, 0, BK))
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc)


@xejit.kernel(interpret=True)
def row_sum(x, y, BM: xl.constexpr, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [BM, 1]), xl.tile_reduce(t, "add", 1))


@xejit.kernel(interpret=True)
def col_sum(x, y, BM: xl.constexpr, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), xl.tile_reduce(t, "add", 0))


@xejit.kernel(interpret=True)
def epilogue(x, bias, y, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN])).to(xl.float32)
    r = xl.load_tile(xl.init_tile(bias, [0, 0], [1, BN])).to(xl.float32)
    v = xl.where(t > 0.0, xl.exp(t * 0.5) + r, t - r)
    xl.store_tile(xl.init_tile(y, [m, 0], [BM, BN]), v.to(y.dtype))


@xejit.kernel(interpret=True)
def pad_copy(x, y, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    t = xl.load_tile(xl.init_tile(x, [m, n], [BM, BN]), padding=-3.0)
    xl.store_tile(xl.init_tile(y, [m, n], [BM, BN]), t * 2.0)


@xejit.kernel(interpret=True)
def gather_rows(table, idx, out, N, BM: xl.constexpr, BN: xl.constexpr):
    """out[i, :] = table[idx[i], :BN] for the rows of one tile (an embedding lookup); idx < 0
    marks a missing row (masked off: reads the padding)."""
    m = xl.program_id(0) * BM
    rows = xl.load_tile(xl.init_tile(idx, [m, 0], [BM, 1]))
    offs = rows * N + xl.arange(0, BN)
    vals = xl.load_gather(xl.init_tile(table, offs), rows + xl.zeros([BM, BN], xl.int32) >= 0,
                          padding=-1.0)
    xl.store_tile(xl.init_tile(out, [m, 0], [BM, BN]), vals)


@xejit.kernel(interpret=True)
def row_band_sum(x, y, R, K, BM: xl.constexpr, BK: xl.constexpr):
    """y = the sum of x's [BM, BK] tiles at row R along K (a k-loop moving one descriptor)."""
    t = xl.init_tile(x, [R, 0], [BM, BK])
    acc = xl.zeros([BM, BK], xl.float32)
    for k in range(0, K, BK):
        acc = acc + xl.load_tile(t, padding=0)
        t = xl.update_tile_offset(t, 0, BK)
    xl.store_tile(xl.init_tile(y, [0, 0], [BM, BK]), acc)
