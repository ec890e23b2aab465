"""The GEMM kernel written in the xejit DSL, and its configuration space per target.

``gemm_kernel`` computes ``c = act(a @ b + bias)`` for 2D ``a`` [M, K] and ``b`` [K, N] in any
row- or column-major layout (the kernel is specialized on each array's layout, so transposed
views need no copy). It accumulates in fp32 for float inputs and in int32 for int8 inputs.
The epilogue (bias row, ``relu`` or ``gelu_tanh``) is chosen by constexprs, so an unused
epilogue costs nothing.

``CONFIGS[target]`` lists the ``xejit.Config`` candidates the autotuner tries on that target
(``pvc``/``bmg``/``lnl`` share the Xe-HPC/Xe2 space; ``generic`` is for the CPU device).

Example:
    >>> import numpy as np, xejit
    >>> a = np.ones((8, 4), np.float32); b = np.ones((4, 8), np.float32); c = np.empty((8, 8), np.float32)
    >>> gemm_kernel[(1, 1)](a, b, a, c, 8, 8, 4, BM=8, BN=8, BK=4)   # doctest: +SKIP
"""
from __future__ import annotations

# The DSL by module, not through the package: ``xejit/__init__`` imports matmul, which imports this.
from xejit import language as xl
from xejit.autotuner import Config
from xejit.jit import kernel

ACTIVATIONS = (None, "relu", "gelu_tanh")


@kernel
def gemm_kernel(a, b, bias, c, M, N, K,
                BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr,
                ACC: xl.constexpr = xl.float32, HAS_BIAS: xl.constexpr = False,
                ACT: xl.constexpr = None, PRECISION: xl.constexpr = None):
    """c[M, N] = ACT(a[M, K] @ b[K, N] + bias[N]); one workgroup per BM x BN tile of c.
    ``PRECISION="tf32"`` lets fp32 operands go through DPAS as tf32 (``tile_mma``'s input_precision)."""
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], ACC)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc, input_precision=PRECISION)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    if HAS_BIAS:
        acc = acc + xl.load_tile(xl.init_tile(bias, [0, n], [1, BN])).to(ACC)
    if ACT == "relu":   # NaN stays NaN (torch.relu); maximum(NaN, 0) would give 0
        acc = xl.where(acc < 0, 0, acc)
    if ACT == "gelu_tanh":
        inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
        acc = 0.5 * acc * (1.0 + xl.tanh(inner))
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


def _c(bm: int, bn: int, bk: int, sg: int, stages: int = 3, grf: str = "default") -> Config:
    return Config({"BM": bm, "BN": bn, "BK": bk}, num_subgroups=sg, num_stages=stages, grf_mode=grf)


# Xe-HPC / Xe2: large workgroup tiles over many subgroups; 256x256 needs the large register file.
_XE_CONFIGS = [
    _c(256, 256, 32, 32, 3, "256"),
    _c(256, 128, 32, 32, 3, "256"),
    _c(256, 128, 32, 16, 3, "256"),
    _c(128, 256, 32, 16, 3, "256"),
    # 32x32 subgroup tiles with BK=32 fill the default register file and spill 2.2-2.4 KB (Intel's
    # compiler, benchmarks/bench_device_code.py): they take the large one, or BK=16.
    _c(128, 128, 32, 16, 3, "256"),
    _c(128, 128, 32, 8, 3, "256"),
    _c(64, 128, 32, 8, 3, "256"),
    _c(64, 64, 16, 4, 3),
    _c(128, 128, 16, 16, 3),   # fits fp32 (tf32) operands in the default register file
    # small M (decode-like shapes): a thin tile with a long k-step
    _c(8, 512, 64, 32, 3),
    _c(8, 256, 64, 16, 3),
    _c(16, 256, 32, 16, 3),    # BK=64 here spilled 6.9 KB in the boundary-tile copy of the k-loop
    _c(32, 256, 32, 16, 3),
]

# Xe-HPG (Arc A / Flex): 4 KB of registers per thread (128 x 32 B), N=8 DPAS, no large-GRF mode,
# no 2D block IO (codegen/block_reads.py, codegen/transposed_dpas.py). Measured with Intel's
# compiler for acm-g10 (benchmarks/bench_device_code.py, 4096^3, hot k-loop instructions per DPAS,
# 0 spill and 0 private memory unless said): fp16/bf16 32x16 subgroup tiles with BK=16 10.0,
# 16x16 tiles 16.5, 16x8 and decode (8x16) tiles 30.5; int8 (K=32 per DPAS: BK=32; configs with
# BK=16 are pruned for it by the resource model) 16x16 tiles 36.5, 16x8 and decode 71.5. fp16 with
# BK=32 takes the block-read k-loop (transposed_dpas.py takes one K-block per k-step): 16x16 tiles
# spill 3.2 KB there (the autotuner prunes them), decode tiles 58.75.
_DG2_CONFIGS = [
    _c(128, 128, 16, 32, 2),    # fp16/bf16: 32x16 subgroup tiles
    _c(64, 128, 16, 16, 2),
    _c(256, 128, 16, 64, 2),
    _c(128, 64, 16, 32, 2),     # fp16/bf16: 16x16 subgroup tiles
    _c(128, 64, 32, 32, 2),     # int8: 16x16 subgroup tiles
    _c(64, 64, 32, 16, 2),
    _c(32, 64, 32, 16, 2),      # int8: 16x8 subgroup tiles
    _c(8, 256, 16, 16, 2),      # small M (decode-like shapes): fp16/bf16, then int8
    _c(8, 128, 16, 8, 2),
    _c(8, 256, 32, 16, 2),
    _c(8, 128, 32, 8, 2),
]

# The Intel OpenCL CPU device: a workgroup runs on one core, and a subgroup's accumulator must
# stay in the CPU's vector registers, so small tiles win (fp32 512^3 on 2 busy Zen 4 cores:
# 8x32x8/2 81 GFLOP/s, 4x32x16/1 70, 4x32x8/1 69, 8x32x8/1 62, 16x32x8/2 60, 16x64x8/4 60;
# 32x64x16/1 about 39); each builds in about a second, while 64x64 tiles took over a minute in
# the CPU driver. M=1 (decode) shapes want BM=1: 1x64x16/1 4.4 GFLOP/s, 4x32x8/1 1.9.
# Measured on the OpenCL CPU device (docs/compiler.md, "Generic target performance"): 6 rows x 16
# columns per subgroup keeps the accumulators in the 16 AVX2 registers; BK 8-16; larger tiles
# are correct but not faster and take longer to build in the driver.
_GENERIC_CONFIGS = [
    _c(6, 16, 8, 1, 1),
    _c(6, 16, 16, 1, 1),
    _c(12, 16, 16, 2, 1),
    _c(8, 32, 8, 1, 1),
    _c(1, 64, 16, 1, 1),      # decode-like shapes (M = 1)
    _c(1, 32, 8, 1, 1),
]

CONFIGS: dict[str, list[Config]] = {
    "pvc": _XE_CONFIGS,
    "bmg": _XE_CONFIGS,
    "lnl": _XE_CONFIGS,
    "ptl": _XE_CONFIGS,
    "dg2": _DG2_CONFIGS,
    "generic": _GENERIC_CONFIGS,
}


def configs_for(target: str) -> list[Config]:
    """The candidate configs of ``target`` (the generic space for unknown targets)."""
    return list(CONFIGS.get(target, _GENERIC_CONFIGS))
