"""FlashAttention forward (and the FlashAttention-2 backward) written in the xejit DSL.

Layouts the kernels see (``xejit.attention`` builds them, views where it can):

* ``q`` [B*H*Sq, D], ``v`` [B*Hkv*Sk, D]: the heads stacked along the rows (row-major);
* ``kt`` [D, B*Hkv*Sk]: K as a column-major array (a transposed view of K, no copy), so that
  ``q @ k^T`` is a plain ``tile_mma`` with a transposed load of K;
* ``o`` [Sq, B*H*BD] and ``lse`` [Sq, B*H]: one column block per head, rows = query positions,
  so the tile bounds are exactly the query length of each head (a tile of the last query
  block never writes into the next head).

Program ``(i, bh)`` computes query rows ``[i*BM, (i+1)*BM)`` of head ``bh = b*H + h``; it reads
key/value head ``b*Hkv + h // G`` (grouped-query attention: ``G = H // Hkv``). Rows of q, k and v
beyond a head's length read the next head's data (or padding): the key columns ``>= Sk`` are
masked to -inf, so they get zero weight; query rows ``>= Sq`` are computed and dropped by the
store. ``D`` is the head dim, ``BD`` it rounded up to the DPAS granule (padding columns read 0).

The softmax is online (running row max ``m_i`` and sum ``l_i``, base 2: ``qk_scale`` is
``scale * log2(e)``); ``CAUSAL`` masks key ``j > i`` (torch's top-left alignment of ``is_causal``)
and ends the key loop at the diagonal.
"""
from __future__ import annotations

import xejit
import xejit.language as xl
from xejit.autotuner import Config

LOG2E = 1.4426950408889634


@xejit.kernel
def attn_fwd_kernel(q, kt, v, o, lse, Sq, Sk, H, G, qk_scale,
                    BM: xl.constexpr, BN: xl.constexpr, BD: xl.constexpr,
                    CAUSAL: xl.constexpr = False, STORE_LSE: xl.constexpr = True,
                    SG: xl.constexpr = 1, P_SLM: xl.constexpr = False):
    m = xl.program_id(0) * BM
    bh = xl.program_id(1)
    kvh = (bh // H) * (H // G) + (bh % H) // G       # b * Hkv + h // G
    qv = xl.load_tile(xl.init_tile(q, [bh * Sq + m, 0], [BM, BD]))
    tk = xl.init_tile(kt, [0, kvh * Sk], [BD, BN])
    tv = xl.init_tile(v, [kvh * Sk, 0], [BN, BD])
    m_i = xl.full([BM, 1], float("-inf"), xl.float32)
    l_i = xl.zeros([BM, 1], xl.float32)
    acc = xl.zeros([BM, BD], xl.float32)
    rows = xl.arange(0, BM, axis=0) + m               # [BM, 1] query positions
    n_end = Sk
    if CAUSAL:
        n_end = xl.minimum(Sk, m + BM)
    for n in range(0, n_end, BN):
        s = xl.tile_mma(qv, xl.load_tile(tk), wg_map=xl.wg_map([SG, 1], [BM // SG, BN])) * qk_scale
        cols = xl.arange(0, BN, axis=1) + n                       # [1, BN] key positions
        if CAUSAL:
            s = xl.where((cols < Sk) & (cols <= rows), s, float("-inf"))
        else:
            s = xl.where(cols < Sk, s, float("-inf"))
        m_new = xl.maximum(m_i, xl.max(s, axis=1))
        p = xl.exp2(s - m_new)
        alpha = xl.exp2(m_i - m_new)
        l_i = l_i * alpha + xl.sum(p, axis=1)
        pv = p.to(q.dtype)
        if P_SLM:   # DPAS targets: the A operand is re-blocked for the DPAS through shared memory
            pv = xl.convert_layout(pv, xl.wg_map([SG, 1], [BM // SG, BN]))
        acc = xl.tile_mma(pv, xl.load_tile(tv), acc * alpha, wg_map=xl.wg_map([SG, 1], [BM // SG, BD]))
        m_i = m_new
        tk = xl.update_tile_offset(tk, 0, BN)
        tv = xl.update_tile_offset(tv, BN, 0)
    out = acc / l_i
    xl.store_tile(xl.init_tile(o, [m, bh * BD], [BM, BD]), out.to(o.dtype))
    if STORE_LSE:
        xl.store_tile(xl.init_tile(lse, [m, bh], [BM, 1]), m_i + xl.log2(l_i))


def _c(bm: int, bn: int, sg: int, stages: int = 2, grf: str = "default") -> Config:
    return Config({"BM": bm, "BN": bn, "SG": sg, "P_SLM": True}, num_subgroups=sg, num_stages=stages,
                  grf_mode=grf)


# Xe-HPC / Xe2: 8 query rows per subgroup (one DPAS repeat); each subgroup holds a whole K and V
# block, so BN stays small; the large register file (Intel's compiler, fp16 D=64, BN=16 or 32:
# 256 GRF, 0 B spill; D=128 needs BN=16).
_XE_CONFIGS = [
    _c(64, 16, 8, 2, "256"),
    _c(64, 32, 8, 2, "256"),
    _c(128, 16, 16, 2, "256"),
    _c(16, 16, 2, 2, "256"),     # short query blocks (decode)
]

# Xe-HPG (Arc A / Flex): N=8 DPAS, no large register file.
_DG2_CONFIGS = [
    _c(32, 16, 4, 2),
    _c(16, 16, 2, 2),
    _c(8, 8, 1, 2),
]

# The OpenCL CPU device: no DPAS (FMAs with subgroup shuffles, fully unrolled), so small tiles:
# a 4x16 score tile with D=64 builds in about 20 s in the CPU driver, 16x16 with D=80 in minutes.
_GENERIC_CONFIGS = [
    Config({"BM": 4, "BN": 16, "SG": 1, "P_SLM": False}, num_subgroups=1, num_stages=1),
    Config({"BM": 8, "BN": 16, "SG": 1, "P_SLM": False}, num_subgroups=1, num_stages=1),
]

CONFIGS: dict[str, list[Config]] = {
    "pvc": _XE_CONFIGS, "bmg": _XE_CONFIGS, "lnl": _XE_CONFIGS, "ptl": _XE_CONFIGS,
    "dg2": _DG2_CONFIGS, "generic": _GENERIC_CONFIGS,
}


def configs_for(target: str) -> list[Config]:
    """The candidate configs of ``target`` (the generic space for unknown targets)."""
    return list(CONFIGS.get(target, _GENERIC_CONFIGS))
