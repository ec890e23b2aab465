"""Kernels shared by the interpreter tests (module-level so the frontend can read their source)."""
import xejit
import xejit.language as xl


@xejit.kernel(interpret=True)
def matmul_kernel(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr,
                  ACC: xl.constexpr = xl.float32):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], ACC)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


@xl.inline
def relu(x):
    return xl.maximum(x, 0.0)


@xejit.kernel(interpret=True)
def matmul_bias_relu(a, b, bias, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr,
                     BK: xl.constexpr, ACT: xl.constexpr = "relu"):
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
    acc = acc + bias_row
    if ACT == "relu":
        acc = relu(acc)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


@xejit.kernel(interpret=True)
def softmax_kernel(x, y, N, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    row = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN]), padding=float("-inf")).to(xl.float32)
    row_max = xl.tile_reduce(row, "max", 1)
    e = xl.exp(row - xl.tile_broadcast(row_max, [BM, BN]))
    denom = xl.sum(e, axis=1)
    xl.store_tile(xl.init_tile(y, [m, 0], [BM, BN]), (e / denom).to(y.dtype))


@xejit.kernel(interpret=True)
def splitk_kernel(a, b, c, M, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr,
                  SPLIT: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    s = xl.program_id(2)
    chunk = xl.cdiv(xl.cdiv(K, SPLIT), BK) * BK
    k0 = s * chunk
    ta = xl.init_tile(a, [m, k0], [BM, BK])
    tb = xl.init_tile(b, [k0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(k0, xl.minimum(k0 + chunk, K), BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.atomic_rmw_tile(xl.init_tile(c, [m, n], [BM, BN]), acc, "add")


@xejit.kernel(interpret=True)
def gather_scatter_kernel(x, idx, y, n, BN: xl.constexpr):
    """y[idx[i]] = x[idx[i]] * 2 for the i < n of this block; other y untouched."""
    i0 = xl.program_id(0) * BN
    lanes = xl.arange(0, BN) + i0
    mask = lanes < n
    offs = xl.load_gather(xl.init_tile(idx, lanes), mask)
    vals = xl.load_gather(xl.init_tile(x, offs), mask, padding=-1.0)
    xl.store_scatter(xl.init_tile(y, offs), vals * 2.0, mask)
