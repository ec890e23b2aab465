"""GEMM with transpose, broadcast, layout conversion and reduction: the XeTile RFC's appendix 2.2,
scaled to this machine.

    C      = A @ BT.T + bias[None, :]        (A: [M, K], BT: [N, K], bias: [N])
    rowsum = C.sum(axis=1)                   (accumulated across the N blocks with atomics)

Each workgroup computes a BM x BN block of C with 4 subgroups. B arrives transposed ([N, K]
rows): each subgroup loads its part of a BT tile and `tile_transpose` redistributes it as the
tile_mma B operand through shared local memory. After the k-loop the block is stored, then
`convert_layout` hands whole rows to each subgroup for the row reduction (the RFC's
`tile_conv_layout`), and `atomic_rmw_tile` adds the block's row sums into `rowsum`.

    python examples/gemm_transpose_reduce.py                    # on the default device
    XEJIT_EMULATE=pvc python examples/gemm_transpose_reduce.py  # the pvc code path, DPAS emulated
    XEJIT_INTERPRET=1 python examples/gemm_transpose_reduce.py  # in numpy on the host
"""
import os

import numpy as np

import xejit
import xejit.language as xl


@xejit.kernel
def gemm_bt_bias_rowsum(a, bt, bias, c, rowsum, K, BM: xl.constexpr, BN: xl.constexpr,
                        BK: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    mp_c = xl.wg_map([2, 2], [BM // 2, BN // 2])           # 2 x 2 subgroups over the C block
    mp_b = xl.wg_map([2, 2], [BK, BN // 2])                # B as the tile_mma wants it
    mp_bt = xl.wg_map([2, 2], [BN // 2, BK])               # BT as loaded (the swap of mp_b)
    mp_rows = xl.wg_map([4, 1], [BM // 4, BN])             # whole rows per subgroup
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tbt = xl.init_tile(bt, [n, 0], [BN, BK], wg_map=mp_bt)
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, K, BK):
        b = xl.tile_transpose(xl.load_tile(tbt), wg_map=mp_b)   # [BN, BK] -> [BK, BN] through SLM
        acc = xl.tile_mma(xl.load_tile(ta), b, acc, wg_map=mp_c)
        ta = xl.update_tile_offset(ta, 0, BK)
        tbt = xl.update_tile_offset(tbt, 0, BK)
    out = acc + xl.load_tile(xl.init_tile(bias, [0, n], [1, BN])).to(xl.float32)   # broadcast rows
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), out)
    rows = xl.convert_layout(out, mp_rows)                   # the RFC's tile_conv_layout
    xl.atomic_rmw_tile(xl.init_tile(rowsum, [m, 0], [BM, 1]), xl.sum(rows, axis=1), "add")


def run(M: int = 200, N: int = 96, K: int = 160, dtype=np.float16, BM: int = 32, BN: int = 32,
        BK: int = 16) -> float:
    """Run on the default device (or as XEJIT_EMULATE / XEJIT_INTERPRET say); return the max
    relative error of C and of the row sums against float64 numpy."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype(dtype)
    bt = rng.uniform(-1, 1, (N, K)).astype(dtype)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    rowsum = np.zeros((M, 1), np.float32)                    # accumulated into
    gemm_bt_bias_rowsum[(xejit.cdiv(M, BM), xejit.cdiv(N, BN))](a, bt, bias, c, rowsum, K,
                                                                BM=BM, BN=BN, BK=BK, num_subgroups=4)
    ref = a.astype(np.float64) @ bt.astype(np.float64).T + bias
    err_c = np.abs(c - ref).max() / np.abs(ref).max()
    err_r = np.abs(rowsum[:, 0] - ref.sum(1)).max() / np.abs(ref).sum(1).max()
    return max(err_c, err_r)


def main() -> None:
    err = run()
    where = os.environ.get("XEJIT_EMULATE") or ("interpreter" if os.environ.get("XEJIT_INTERPRET") else
                                                 xejit.runtime.default_device().name)
    print(f"C = A @ BT.T + bias, rowsum(C): 200x96x160 f16 on {where}, max relative error {err:.2e}")
    assert err < 1e-3


if __name__ == "__main__":
    main()
