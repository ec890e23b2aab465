"""FlashAttention forward in the DSL: online softmax over key/value blocks, on the default device.

    python examples/attention.py                   # on the default device
    XEJIT_INTERPRET=1 python examples/attention.py # in numpy on the host

One workgroup computes BM query rows of one head: for each block of BN keys it takes the scores
S = Q K^T (a tile_mma with a transposed load of K), updates the running row max m and row sum l,
rescales the accumulator and adds P V (the second tile_mma). The library version with autotuned
configs, grouped-query attention, bf16 and torch autograd is ``xejit.attention``
(``xejit/kernels/attention.py``).
"""
import math

import numpy as np

import xejit
import xejit.language as xl
from xejit.codegen.targets import get_target
from xejit.device_launch import resolve_target


@xejit.kernel
def flash_attention(q, kt, v, o, S, qk_scale, BM: xl.constexpr, BN: xl.constexpr, D: xl.constexpr,
                    CAUSAL: xl.constexpr, SG: xl.constexpr = 1, DPAS: xl.constexpr = False):
    """q, v, o: [heads * S, D] (heads stacked along the rows); kt: K^T, a column-major [D, heads * S]."""
    m = xl.program_id(0) * BM
    head = xl.program_id(1) * S
    qv = xl.load_tile(xl.init_tile(q, [head + m, 0], [BM, D]))
    tk = xl.init_tile(kt, [0, head], [D, BN])
    tv = xl.init_tile(v, [head, 0], [BN, D])
    m_i = xl.full([BM, 1], float("-inf"), xl.float32)       # running row max (log2 units)
    l_i = xl.zeros([BM, 1], xl.float32)                     # running row sum
    acc = xl.zeros([BM, D], xl.float32)
    rows = xl.arange(0, BM, axis=0) + m                     # [BM, 1] query positions
    n_end = m + BM if CAUSAL else S   # causal: stop at the diagonal (blocks past S are masked;
                                      # a min() in a loop bound is 5-10x slower on the CPU device)
    for n in range(0, n_end, BN):
        s = xl.tile_mma(qv, xl.load_tile(tk)) * qk_scale    # [BM, BN]
        cols = xl.arange(0, BN, axis=1) + n                 # [1, BN] key positions
        keep = (cols < S) & (cols <= rows) if CAUSAL else cols < S   # keys past S: next head's rows
        s = xl.where(keep, s, float("-inf"))
        m_new = xl.maximum(m_i, xl.max(s, axis=1))
        p = xl.exp2(s - m_new)                              # row broadcasts, like numpy
        alpha = xl.exp2(m_i - m_new)
        l_i = l_i * alpha + xl.sum(p, axis=1)
        pv = p.to(q.dtype)
        if DPAS:   # Intel GPUs: the probabilities reach the DPAS through shared local memory
            pv = xl.convert_layout(pv, xl.wg_map([SG, 1], [BM // SG, BN]))
        acc = xl.tile_mma(pv, xl.load_tile(tv), acc * alpha)
        m_i = m_new
        tk = xl.update_tile_offset(tk, 0, BN)
        tv = xl.update_tile_offset(tv, BN, 0)
    # o is [S, heads * D], a column block per head: rows of the last block past S fall outside
    # the array and are dropped (with heads stacked along the rows they would hit the next head)
    xl.store_tile(xl.init_tile(o, [m, xl.program_id(1) * D], [BM, D]), (acc / l_i).to(o.dtype))


def main(heads: int = 4, S: int = 100, D: int = 64) -> None:
    # DPAS targets (also under XEJIT_EMULATE=pvc / dg2) need P re-blocked through SLM for the
    # second tile_mma: its A operand must come from a load (or convert_layout), not from registers
    target, _ = resolve_target()
    dpas = get_target(target).has_dpas
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((heads, S, D)).astype(np.float32) for _ in range(3))
    o = np.full((S, heads * D), np.nan, np.float32)         # poisoned: every element must be written
    flash_attention[(xejit.cdiv(S, 4), heads)](
        q.reshape(-1, D), k.reshape(-1, D).T, v.reshape(-1, D), o, S, math.log2(math.e) / math.sqrt(D),
        BM=4, BN=16, D=D, CAUSAL=True, DPAS=dpas)
    out = o.reshape(S, heads, D).transpose(1, 0, 2)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) / math.sqrt(D)
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    err = np.abs(out - ref).max() / np.abs(ref).max()
    print(f"causal attention on {target}, {heads} heads x {S} x {D} f32, relative error vs numpy float64: {err:.2e}")
    assert err < 1e-5
    # the library version: xejit.attention(q, k, v, causal=True) (autotuned; torch autograd too)


if __name__ == "__main__":
    main()
