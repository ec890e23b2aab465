"""The GEMM of DESIGN.md, run on the host by the numpy interpreter.

    XEJIT_INTERPRET=1 python examples/gemm.py
"""
import os

os.environ.setdefault("XEJIT_INTERPRET", "1")  # the device compiler does not exist yet

import numpy as np  # noqa: E402

import xejit  # noqa: E402
import xejit.language as xl  # noqa: E402


@xejit.kernel
def matmul_kernel(a, b, c, M, N, K,
                  BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])      # a: 2D array argument; base shape/strides come from it
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, K, BK):                   # runtime bounds; loop-carried values are found by the frontend
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


def main() -> None:
    M, N, K = 300, 260, 200                     # unaligned: tiles are padded on load, clipped on store
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = np.asfortranarray(rng.standard_normal((K, N)).astype(np.float32))   # B column-major
    c = np.full((M, N), np.nan, np.float32)
    meta = dict(BM=256, BN=256, BK=32, num_subgroups=32)
    print(matmul_kernel.ir_text(a, b, c, M, N, K, **meta))
    matmul_kernel[(xejit.cdiv(M, 256), xejit.cdiv(N, 256))](a, b, c, M, N, K, **meta)
    err = np.abs(c - a.astype(np.float64) @ b).max() / np.abs(a.astype(np.float64) @ b).max()
    print(f"max relative error vs numpy float64: {err:.2e}")
    assert err < 1e-5


if __name__ == "__main__":
    main()
