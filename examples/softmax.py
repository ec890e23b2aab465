"""Row softmax with tile_reduce and tile_broadcast, on the default device.

    python examples/softmax.py                   # on the default device
    XEJIT_INTERPRET=1 python examples/softmax.py # in numpy on the host
"""
import numpy as np

import xejit
import xejit.language as xl


@xejit.kernel
def softmax_kernel(x, y, M, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    # columns beyond N read -inf, so they add exp(-inf) = 0 to the sums
    row = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN]), padding=float("-inf")).to(xl.float32)
    row_max = xl.tile_reduce(row, "max", 1)                  # [BM, 1]
    e = xl.exp(row - xl.tile_broadcast(row_max, [BM, BN]))  # explicit broadcast ...
    s = xl.sum(e, axis=1)                                    # [BM, 1]
    xl.store_tile(xl.init_tile(y, [m, 0], [BM, BN]), (e / s).to(y.dtype))   # ... or implicit


def main() -> None:
    M, N = 1000, 97
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float16)
    y = np.full_like(x, np.nan)
    softmax_kernel[(xejit.cdiv(M, 8),)](x, y, M, BM=8, BN=128)
    ref = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    err = np.abs(y - ref).max()
    print(f"softmax of {M}x{N} f16 rows, max abs error vs numpy float64: {err:.2e}")
    assert err < 1e-2


if __name__ == "__main__":
    main()
