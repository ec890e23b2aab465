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
and, with ``TRIM`` (set by the host when ``Sq <= Sk``), ends the key loop at the diagonal.
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
                    SG: xl.constexpr = 1, P_SLM: xl.constexpr = False, TRIM: xl.constexpr = True):
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
    if CAUSAL and TRIM:
        # keys past the diagonal are all masked: stop there. Not xl.minimum(Sk, m + BM): a loop
        # bound through min/max makes the CPU device's code 5-10x slower (measured, fp32 D=64);
        # the blocks past Sk that m + BM may add are masked (the host sets TRIM when Sq <= Sk)
        n_end = m + BM
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

# Xe-HPG (Arc A / Flex): N=8 DPAS, K=16 for 16-bit types (so BN >= 16), no large register file
# (4 KB per thread): a K and a V block of D=64 alone fill it; 4 query rows per subgroup spill
# 7.0 KB (fp16, D=64), 8 rows 11.9 KB (Intel's compiler). Correct, not fast.
_DG2_CONFIGS = [
    _c(16, 16, 4, 2),
    _c(8, 16, 2, 2),
]

# The OpenCL CPU device: no DPAS (FMAs with subgroup shuffles, fully unrolled), so small tiles:
# a 4x16 score tile with D=64 builds in about 20 s in the CPU driver, 16x16 with D=80 in minutes.
_GENERIC_CONFIGS = [
    Config({"BM": 4, "BN": 16, "SG": 1, "P_SLM": False}, num_subgroups=1, num_stages=1),
    Config({"BM": 8, "BN": 16, "SG": 1, "P_SLM": False}, num_subgroups=1, num_stages=1),
    Config({"BM": 1, "BN": 16, "SG": 1, "P_SLM": False}, num_subgroups=1, num_stages=1),   # decode
]

CONFIGS: dict[str, list[Config]] = {
    "pvc": _XE_CONFIGS, "bmg": _XE_CONFIGS, "lnl": _XE_CONFIGS, "ptl": _XE_CONFIGS,
    "dg2": _DG2_CONFIGS, "generic": _GENERIC_CONFIGS,
}


def configs_for(target: str) -> list[Config]:
    """The candidate configs of ``target`` (the generic space for unknown targets)."""
    return list(CONFIGS.get(target, _GENERIC_CONFIGS))


# --- backward (FlashAttention-2: recompute P from the saved row log-sum-exp) -------------------
#
# Layouts: q, do [B*H*Sq, D] and k, v [B*Hkv*Sk, D] row-major (heads stacked along the rows), and
# their transposed views qt, dot [D, B*H*Sq], kt, vt [D, B*Hkv*Sk] (column-major, no copies);
# lse (log2 units, as the forward stores it) and delta = rowsum(dO * O): [Sq, B*H] (a column per
# head, read as [BM, 1]) for dq, and [B*H, Sq] (a row per head, read as [1, BM]) for dk/dv;
# dq [Sq, B*H*BD], dk and dv [Sk, B*Hkv*BD] (column blocks: exact row bounds per head).


@xejit.kernel
def attn_bwd_dq_kernel(q, kt, k, vt, do, lse, delta, dq, Sq, Sk, H, G, qk_scale, sm_scale,
                       BM: xl.constexpr, BN: xl.constexpr, BD: xl.constexpr,
                       CAUSAL: xl.constexpr = False, SG: xl.constexpr = 1, P_SLM: xl.constexpr = False,
                       TRIM: xl.constexpr = True):
    """dq = scale * sum_j dS_ij k_j with dS = P * (dO V^T - delta); one program per BM query rows."""
    m = xl.program_id(0) * BM
    bh = xl.program_id(1)
    kvh = (bh // H) * (H // G) + (bh % H) // G
    qv = xl.load_tile(xl.init_tile(q, [bh * Sq + m, 0], [BM, BD]))
    dov = xl.load_tile(xl.init_tile(do, [bh * Sq + m, 0], [BM, BD]))
    l_i = xl.load_tile(xl.init_tile(lse, [m, bh], [BM, 1]))
    d_i = xl.load_tile(xl.init_tile(delta, [m, bh], [BM, 1]))
    tkt = xl.init_tile(kt, [0, kvh * Sk], [BD, BN])
    tvt = xl.init_tile(vt, [0, kvh * Sk], [BD, BN])
    tk = xl.init_tile(k, [kvh * Sk, 0], [BN, BD])
    acc = xl.zeros([BM, BD], xl.float32)
    rows = xl.arange(0, BM, axis=0) + m
    n_end = Sk
    if CAUSAL and TRIM:   # as in the forward: no min/max in a loop bound
        n_end = m + BM
    for n in range(0, n_end, BN):
        s = xl.tile_mma(qv, xl.load_tile(tkt), wg_map=xl.wg_map([SG, 1], [BM // SG, BN])) * qk_scale
        cols = xl.arange(0, BN, axis=1) + n
        if CAUSAL:
            s = xl.where((cols < Sk) & (cols <= rows), s, float("-inf"))
        else:
            s = xl.where(cols < Sk, s, float("-inf"))
        p = xl.exp2(s - l_i)
        dp = xl.tile_mma(dov, xl.load_tile(tvt), wg_map=xl.wg_map([SG, 1], [BM // SG, BN]))
        ds = (p * (dp - d_i)).to(q.dtype)
        if P_SLM:
            ds = xl.convert_layout(ds, xl.wg_map([SG, 1], [BM // SG, BN]))
        acc = xl.tile_mma(ds, xl.load_tile(tk), acc, wg_map=xl.wg_map([SG, 1], [BM // SG, BD]))
        tkt = xl.update_tile_offset(tkt, 0, BN)
        tvt = xl.update_tile_offset(tvt, 0, BN)
        tk = xl.update_tile_offset(tk, BN, 0)
    xl.store_tile(xl.init_tile(dq, [m, bh * BD], [BM, BD]), (acc * sm_scale).to(dq.dtype))


@xejit.kernel
def attn_bwd_dkdv_kernel(q, qt, k, v, do, dot, lse_r, delta_r, dk, dv, Sq, Sk, H, G, qk_scale, sm_scale,
                         BM: xl.constexpr, BN: xl.constexpr, BD: xl.constexpr,
                         CAUSAL: xl.constexpr = False, SG: xl.constexpr = 1, P_SLM: xl.constexpr = False):
    """dv_j = sum_i P_ij^T dO_i, dk_j = scale * sum_i dS_ij^T q_i over the G query heads of a
    key/value head, computed transposed (S^T = K Q^T) so that no tile is transposed; one program
    per BN keys. Here BN is the key block (rows) and BM the query block (columns)."""
    n = xl.program_id(0) * BN
    kvh = xl.program_id(1)                           # b * Hkv + j
    Hkv = H // G
    bh0 = (kvh // Hkv) * H + (kvh % Hkv) * G         # first query head of this key/value head
    kv_ = xl.load_tile(xl.init_tile(k, [kvh * Sk + n, 0], [BN, BD]))
    vv = xl.load_tile(xl.init_tile(v, [kvh * Sk + n, 0], [BN, BD]))
    dk_acc = xl.zeros([BN, BD], xl.float32)
    dv_acc = xl.zeros([BN, BD], xl.float32)
    keys = xl.arange(0, BN, axis=0) + n              # [BN, 1]
    m_start = 0
    if CAUSAL:
        m_start = (n // BM) * BM
    for g in range(0, G):
        bh = bh0 + g
        tqt = xl.init_tile(qt, [0, bh * Sq + m_start], [BD, BM])
        tq = xl.init_tile(q, [bh * Sq + m_start, 0], [BM, BD])
        tdot = xl.init_tile(dot, [0, bh * Sq + m_start], [BD, BM])
        tdo = xl.init_tile(do, [bh * Sq + m_start, 0], [BM, BD])
        tl = xl.init_tile(lse_r, [bh, m_start], [1, BM])
        td = xl.init_tile(delta_r, [bh, m_start], [1, BM])
        for m in range(m_start, Sq, BM):
            st = xl.tile_mma(kv_, xl.load_tile(tqt), wg_map=xl.wg_map([SG, 1], [BN // SG, BM])) * qk_scale
            qpos = xl.arange(0, BM, axis=1) + m      # [1, BM]
            if CAUSAL:
                keep = (qpos < Sq) & (keys <= qpos)
            else:
                keep = (qpos < Sq) & (keys >= 0)
            pt = xl.where(keep, xl.exp2(st - xl.load_tile(tl)), 0.0)
            ptv = pt.to(q.dtype)
            if P_SLM:
                ptv = xl.convert_layout(ptv, xl.wg_map([SG, 1], [BN // SG, BM]))
            dv_acc = xl.tile_mma(ptv, xl.load_tile(tdo), dv_acc, wg_map=xl.wg_map([SG, 1], [BN // SG, BD]))
            dpt = xl.tile_mma(vv, xl.load_tile(tdot), wg_map=xl.wg_map([SG, 1], [BN // SG, BM]))
            dst = (pt * (dpt - xl.load_tile(td))).to(q.dtype)
            if P_SLM:
                dst = xl.convert_layout(dst, xl.wg_map([SG, 1], [BN // SG, BM]))
            dk_acc = xl.tile_mma(dst, xl.load_tile(tq), dk_acc, wg_map=xl.wg_map([SG, 1], [BN // SG, BD]))
            tqt = xl.update_tile_offset(tqt, 0, BM)
            tq = xl.update_tile_offset(tq, BM, 0)
            tdot = xl.update_tile_offset(tdot, 0, BM)
            tdo = xl.update_tile_offset(tdo, BM, 0)
            tl = xl.update_tile_offset(tl, 0, BM)
            td = xl.update_tile_offset(td, 0, BM)
    xl.store_tile(xl.init_tile(dk, [n, kvh * BD], [BN, BD]), (dk_acc * sm_scale).to(dk.dtype))
    xl.store_tile(xl.init_tile(dv, [n, kvh * BD], [BN, BD]), dv_acc.to(dv.dtype))
