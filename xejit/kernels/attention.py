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

import numpy as np

# The DSL by module, not through the package: ``xejit/__init__`` imports attention, which imports this.
from xejit import language as xl
from xejit.autotuner import Config
from xejit.codegen import isa
from xejit.codegen.targets import get_target
from xejit.jit import kernel

LOG2E = 1.4426950408889634


@kernel
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


def _g(bm: int, bn: int) -> Config:
    return Config({"BM": bm, "BN": bn, "SG": 1, "P_SLM": False}, num_subgroups=1, num_stages=1)


# Candidates per target, kernel and head dim class ("small": D <= 64, "large": D > 64); Intel's
# compiler prunes the ones that spill (xejit.autotuner's compiler verdict), the rest are timed.
# In the dk/dv kernel BN is the key block (rows, split over the subgroups) and BM the query block.
#
# Xe-HPC / Xe2 (pvc, bmg, lnl, ptl): 256 GRF. Forward: 8 query rows per subgroup (one DPAS
# repeat), each subgroup holds a whole K and V block, so BN stays small. Backward: dq holds q, dO
# and the fp32 dq block and reads K three ways (K^T, V^T, K): 8 rows spill 4.5 KB at D=128, 4 rows
# none; dk/dv holds K, V and two fp32 accumulators: 8 keys per subgroup spill 45 KB at D=128, 4 none.
_XE = {
    ("fwd", "small"): [_c(64, 16, 8, 2, "256"), _c(64, 32, 8, 2, "256"), _c(16, 16, 2, 2, "256")],
    ("fwd", "large"): [_c(64, 16, 8, 2, "256"), _c(128, 16, 16, 2, "256"), _c(16, 16, 2, 2, "256")],
    ("dq", "small"): [_c(64, 16, 8, 2, "256"), _c(32, 16, 8, 2, "256")],
    ("dq", "large"): [_c(64, 16, 8, 2, "256"), _c(32, 16, 8, 2, "256"), _c(16, 16, 4, 1, "256")],
    ("dkdv", "small"): [_c(16, 64, 8, 2, "256"), _c(16, 32, 8, 2, "256")],
    ("dkdv", "large"): [_c(16, 64, 8, 2, "256"), _c(16, 32, 8, 2, "256"), _c(16, 16, 4, 1, "256")],
}

# Xe-HPG (Arc A / Flex): N=8 DPAS, K=16 for 16-bit types (so BN >= 16), 128 GRF of 32 bytes
# (4 KB per thread) and no 2D block IO (loads are gathers, their addresses in registers too):
# one query row per subgroup is the only forward that does not spill at D=64 (its cold k-loop
# version gathers V per element at each DPAS: with per-row branches it spilled 3.4 KB);
# D=128 and the backward spill in every config of these kernels (each holds a whole K or V block
# of D columns); the least bad is kept, with a warning.
_DG2 = {
    ("fwd", "small"): [_c(2, 16, 2, 1), _c(16, 16, 4, 2)],
    ("fwd", "large"): [_c(2, 16, 2, 1), _c(16, 16, 4, 2)],
    ("dq", "small"): [_c(2, 16, 2, 1)],
    ("dq", "large"): [_c(2, 16, 2, 1)],
    ("dkdv", "small"): [_c(16, 2, 2, 1)],
    ("dkdv", "large"): [_c(16, 2, 2, 1)],
}

# The OpenCL CPU device: no DPAS (FMAs over k loops, docs/compiler.md), so small tiles. Driver
# builds, CPU seconds, fp32 D=64 (benchmarks/bench_build_time.py --only attention): forward
# 2 / 4 / 8 / 1 rows 1.1 / 1.0 / 1.9 / 0.7; dq 1 / 2 / 4 rows 0.6 / 1.1 / 0.8; dk/dv 2 / 4 keys
# 2.2 / 1.3 (4.6-11 s each when the k steps were unrolled); the first config is taken untuned
# (XEJIT_ATTENTION_TUNE=0), the autotuner times the others.
_GENERIC = {
    ("fwd", "small"): [_g(2, 16), _g(4, 16), _g(8, 16), _g(1, 16)],
    ("dq", "small"): [_g(1, 16), _g(2, 16), _g(4, 16)],
    ("dkdv", "small"): [_g(16, 2), _g(16, 4)],
}
_GENERIC.update({(kind, "large"): v for (kind, _), v in _GENERIC.items()})

CONFIGS: dict[str, dict[tuple[str, str], list[Config]]] = {
    "pvc": _XE, "bmg": _XE, "lnl": _XE, "ptl": _XE, "dg2": _DG2, "generic": _GENERIC,
}


def configs_for(target: str, kind: str = "fwd", D: int = 64) -> list[Config]:
    """The candidate configs of kernel ``kind`` ("fwd", "dq", "dkdv") for head dim ``D`` on
    ``target`` (the generic space for unknown targets)."""
    table = CONFIGS.get(target, _GENERIC)
    return list(table[(kind, "small" if D <= 64 else "large")])


# --- backward (FlashAttention-2: recompute P from the saved row log-sum-exp) -------------------
#
# Layouts: q, do [B*H*Sq, D] and k, v [B*Hkv*Sk, D] row-major (heads stacked along the rows), and
# their transposed views qt, dot [D, B*H*Sq], kt, vt [D, B*Hkv*Sk] (column-major, no copies);
# lse (log2 units, as the forward stores it) and delta = rowsum(dO * O): [Sq, B*H] (a column per
# head, read as [BM, 1]) for dq, and [B*H, Sq] (a row per head, read as [1, BM]) for dk/dv;
# dq [Sq, B*H*BD], dk and dv [Sk, B*Hkv*BD] (column blocks: exact row bounds per head).


@kernel
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


@kernel
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
    for g in range(G):
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


# --- compile without launching (the GPU compile report, the tests of the chosen configs) --------

def _empty(shape: tuple[int, ...], dtype: str):
    """An uninitialised array of ``dtype`` (a torch tensor for bfloat16, which numpy lacks)."""
    if dtype == "bfloat16":
        import torch
        return torch.empty(shape, dtype=torch.bfloat16)
    return np.empty(shape, dtype)


def _t(x):
    return x.t() if hasattr(x, "t") and callable(x.t) else x.T


def compile_for(kind: str, target: str, D: int, dtype: str, config: Config, *, causal: bool = True,
                B: int = 1, H: int = 8, G: int = 1, Sq: int = 1024, Sk: int = 1024, emulate: bool = False):
    """``kind`` ("fwd", "dq" or "dkdv") compiled for ``target`` with ``config`` (for the dk/dv
    kernel: BN is the key block, BM the query block), on arrays of the layouts ``xejit.attention``
    launches with; nothing is launched. The result's ``.device_binary`` is Intel's compiler's
    build for GPU targets; ``emulate``: the GPU target's code for the CPU device instead."""
    BD = -(-D // 16) * 16
    Hkv = H // G
    q = _empty((B * H * Sq, D), dtype)
    k = _empty((B * Hkv * Sk, D), dtype)
    lse_c = _empty((Sq, -(-(B * H) // 4) * 4), "float32")
    qk_scale = LOG2E / D ** 0.5
    opts = dict(BD=BD, CAUSAL=causal, emulate=emulate, **config.all_kwargs())
    if kind == "fwd":
        o = _empty((Sq, B * H * BD), dtype)
        return attn_fwd_kernel.compile(q, _t(k), k, o, lse_c, Sq, Sk, H, G, qk_scale, TRIM=Sq <= Sk,
                                       target=target, **opts)
    if kind == "dq":
        dq = _empty((Sq, B * H * BD), dtype)
        return attn_bwd_dq_kernel.compile(q, _t(k), k, _t(k), q, lse_c, lse_c, dq, Sq, Sk, H, G, qk_scale,
                                          D ** -0.5, TRIM=Sq <= Sk, target=target, **opts)
    if kind == "dkdv":
        lse_r = _empty((B * H, Sq), "float32")
        dk = _empty((Sk, B * Hkv * BD), dtype)
        return attn_bwd_dkdv_kernel.compile(q, _t(q), k, k, q, _t(q), lse_r, lse_r, dk, dk, Sq, Sk, H, G,
                                            qk_scale, D ** -0.5, target=target, **opts)
    raise ValueError(f"kind must be 'fwd', 'dq' or 'dkdv', got {kind!r}")


def inner_dpas_loop(binary):
    """The hot loop of an attention kernel (:func:`xejit.codegen.isa.innermost_dpas_loop`): the
    backward's dk/dv query loop sits inside a loop over the query heads."""
    return isa.innermost_dpas_loop(isa.parse(binary.isa))


def dpas_per_step(target: str, kind: str, config: Config, D: int) -> int:
    """The tile arithmetic of one loop step: three (forward: two) products of a subgroup's rows."""
    t = get_target(target)
    kw = config.kwargs
    rows = (kw["BN"] if kind == "dkdv" else kw["BM"]) // kw["SG"]
    cols = kw["BM"] if kind == "dkdv" else kw["BN"]     # the other length of the score block
    bd, k = -(-D // 16) * 16, t.dpas.k_of("fp16")
    reps = -(-rows // t.dpas.max_m)
    scores = reps * (cols // t.dpas.n) * (bd // k)          # S (and dP): rows x cols over BD
    update = reps * (bd // t.dpas.n) * (cols // k)          # rows x BD over cols
    return {"fwd": scores + update, "dq": 2 * scores + update, "dkdv": 2 * scores + 2 * update}[kind]


def compile_report(target: str, kind: str, D: int, dtype: str) -> list[dict]:
    """Compile the candidates of (target, kind, D, dtype) in order until Intel's compiler accepts
    one (no spill, no private memory in the hot loop: the autotuner's verdict); a row each, the
    accepted one (else the least bad) marked ``chosen``: the config the library takes untuned."""
    rows = []
    for cfg in configs_for(target, kind, D):
        kw = cfg.kwargs
        row = {"target": target, "kind": kind, "D": D, "dtype": dtype, "grf_mode": cfg.grf_mode,
               "config": f"{kw['BM']}x{kw['BN']}/{cfg.num_subgroups}sg"}
        try:
            b = compile_for(kind, target, D, dtype, cfg).device_binary
            loop = inner_dpas_loop(b)
            row.update(grf=b.grf_count, spill=b.spill_bytes, private=b.private_bytes,
                       dpas=loop.dpas if loop else 0, tile_dpas=dpas_per_step(target, kind, cfg, D),
                       block_loads=loop.block_loads if loop else 0, per_dpas=loop.per_dpas if loop else None,
                       accepted=b.spill_bytes == 0 and not (b.hot_loop and b.hot_loop.private_sends))
        except Exception as e:  # noqa: BLE001  (a row that failed says so)
            row.update(error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}", accepted=False)
        rows.append(row)
        if row["accepted"]:
            break
    accepted = [r for r in rows if r["accepted"]]
    chosen = accepted[0] if accepted else min((r for r in rows if "error" not in r), key=lambda r: r["spill"],
                                              default=None)
    if chosen is not None:
        chosen["chosen"] = True
    return rows
