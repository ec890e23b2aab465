"""@xejit.autotune: choice of the fastest config, restore between trials, persistence, pruning."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import xejit
from xejit.autotuner import Config, estimate_gemm, gemm_resources
from xejit.ir.core import bf16, f32, i8, i32
from xejit.kernels.gemm import CONFIGS, gemm_kernel
from tests.matmul.backend import requires_device
from tests.autotune.tune_kernels import accumulate_kernel, repeat_kernel, repeat_reference

ROOT = Path(__file__).resolve().parents[2]
N = 1 << 16


def _grid(meta):
    return (xejit.cdiv(N, meta["BN"]),)


def _tuned(kernel, repeats, rep=5, **kw):
    # 1x256 tiles: a lane holds 16 values, each through REPEAT unrolled exps (1x1024 at REPEAT=32
    # was 2048 exps a lane: 6.7 s of CPU in the CPU driver's build; 1x256 1.1 s)
    configs = [Config({"BN": 256, "REPEAT": r}, num_subgroups=1) for r in repeats]
    return xejit.autotune(configs, key=["n"], warmup=1, rep=rep, **kw)(kernel)


@requires_device
def test_device_path_is_used():
    """Skipped (with the reason) while DSL kernels cannot run on the device."""


def test_picks_the_fastest_config():
    tuned = _tuned(repeat_kernel, [32, 1, 16], cache_results=False, rep=20)
    from xejit.runtime import usm
    x = usm.asarray(np.random.default_rng(0).standard_normal(N).astype(np.float32) + 0.1)
    y = usm.asarray(np.full(N, np.nan, np.float32))    # USM: no staging copies in the timings
    tuned[_grid](x, y, N)
    assert tuned.best_config.kwargs["REPEAT"] == 1, tuned.records
    np.testing.assert_allclose(y, repeat_reference(x, 1), rtol=1e-5)
    record = tuned.records[tuned.key_of({"x": x, "y": y, "n": N})]
    assert len(record.timings) == 3 and not record.from_disk
    # same key: the in-memory choice is reused, no new tuning
    tuned.records.clear()
    tuned[_grid](x, y, N)
    assert tuned.records == {}


def test_restore_value_between_trials():
    tuned = _tuned(accumulate_kernel, [1, 4], restore_value=["y"], cache_results=False)
    x = np.full(N, 2.0, np.float32)
    y = np.full(N, 5.0, np.float32)
    tuned[_grid](x, y, N)
    np.testing.assert_array_equal(y, 7.0)  # the trials ran many times; only the real launch counts


def test_reset_to_zero():
    tuned = _tuned(accumulate_kernel, [1, 4], reset_to_zero=["y"], cache_results=False)
    x = np.full(N, 2.0, np.float32)
    y = np.full(N, 5.0, np.float32)
    tuned[_grid](x, y, N)
    np.testing.assert_array_equal(y, 2.0)  # zeroed after tuning, then y += x once


def test_key_includes_values_and_dtypes():
    tuned = _tuned(repeat_kernel, [1, 2], cache_results=False)
    x32 = np.ones(N, np.float32)
    k1 = tuned.key_of({"x": x32, "y": x32, "n": N})
    k2 = tuned.key_of({"x": x32, "y": x32, "n": N // 2})
    k3 = tuned.key_of({"x": x32.astype(np.float16), "y": x32, "n": N})
    assert len({k1, k2, k3}) == 3


_PROCESS = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    import numpy as np, xejit, xejit.autotuner as at
    from tests.autotune.tune_kernels import repeat_kernel, repeat_reference
    calls = []
    real = at.do_bench
    at.do_bench = lambda *a, **k: calls.append(1) or real(*a, **k)
    configs = [xejit.Config({{"BN": 256, "REPEAT": r}}, num_subgroups=1) for r in (8, 1)]
    tuned = xejit.autotune(configs, key=["n"], warmup=1, rep=5)(repeat_kernel)
    x = np.ones({n}, np.float32); y = np.zeros_like(x)
    tuned[lambda m: (xejit.cdiv({n}, m["BN"]),)](x, y, {n})
    rec = next(iter(tuned.records.values()))
    print(json.dumps({{"best": tuned.best_config.kwargs, "bench_calls": len(calls),
                      "from_disk": rec.from_disk,
                      "ok": bool(np.allclose(y, repeat_reference(x, tuned.best_config.kwargs["REPEAT"])))}}))
""")


def test_choice_persists_across_processes(tmp_path):
    env = dict(os.environ, XEJIT_CACHE_DIR=str(tmp_path), XEJIT_PRINT_AUTOTUNING="1")
    code = _PROCESS.format(root=str(ROOT), n=N)

    def run():
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr

    first, err1 = run()
    second, err2 = run()
    assert first["bench_calls"] == 2 and not first["from_disk"] and first["ok"]
    assert "chose" in err1
    assert second["bench_calls"] == 0 and second["from_disk"] and second["ok"]
    assert second["best"] == first["best"]
    assert "from the disk cache" in err2


def test_corrupt_cache_entry_retunes(tmp_path, monkeypatch):
    monkeypatch.setenv("XEJIT_CACHE_DIR", str(tmp_path))
    x = np.ones(N, np.float32)
    y = np.zeros_like(x)
    _tuned(repeat_kernel, [8, 1])[_grid](x, y, N)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            f.write_bytes(f.read_bytes()[:-3])
    from xejit.runtime.cache import default_cache
    default_cache().clear_memory()  # as in a new process
    fresh = _tuned(repeat_kernel, [8, 1])
    fresh[_grid](x, y, N)
    assert not next(iter(fresh.records.values())).from_disk


def test_print_autotuning(monkeypatch, capsys):
    monkeypatch.setenv("XEJIT_PRINT_AUTOTUNING", "1")
    tuned = _tuned(repeat_kernel, [1, 8], cache_results=False)
    x = np.ones(N, np.float32)
    tuned[_grid](x, np.zeros_like(x), N)
    err = capsys.readouterr().err
    assert "repeat_kernel" in err and "chose Config(BN: 256" in err


# --- static pruning --------------------------------------------------------------------------

def _gemm_args(dtype=np.float16):
    a = np.zeros((512, 512), dtype)
    c = np.zeros((512, 512), np.float32)
    return {"a": a, "b": a, "bias": c, "c": c, "M": 512, "N": 512, "K": 512}


def test_pruned_for_registers_with_reason():
    big_default = Config({"BM": 256, "BN": 256, "BK": 32}, num_subgroups=32, grf_mode="default")
    big_large = Config({"BM": 256, "BN": 256, "BK": 32}, num_subgroups=32, grf_mode="256")
    tuned = xejit.autotune([big_default, big_large], key=["M"], resources=gemm_resources())(gemm_kernel)
    keep, pruned = tuned.prune(_gemm_args(), target="pvc")
    assert keep == [big_large]
    (cfg, reason), = pruned
    assert cfg == big_default
    assert "registers" in reason and "pvc" in reason and "'default'" in reason


def test_pruned_configs_never_run(monkeypatch, capsys):
    monkeypatch.setenv("XEJIT_PRINT_AUTOTUNING", "1")
    huge = Config({"BN": 256, "REPEAT": 1000}, num_subgroups=1)

    def resources(config, named, target):  # a model that finds one config too large
        return ["needs 9999 registers"] if config.kwargs["REPEAT"] == 1000 else []

    tuned = _tuned(repeat_kernel, [1, 8], cache_results=False, resources=resources)
    tuned.configs.insert(0, huge)
    x = np.ones(N, np.float32)
    tuned[_grid](x, np.zeros_like(x), N)
    record = next(iter(tuned.records.values()))
    assert huge not in record.timings and len(record.timings) == 2
    assert record.pruned == [(huge, f"does not fit {xejit.autotuner.current_target()}: needs 9999 registers")]
    assert "pruned Config(BN: 256, REPEAT: 1000" in capsys.readouterr().err


def test_every_config_pruned_is_an_error():
    cfg = Config({"BM": 256, "BN": 256, "BK": 32}, num_subgroups=32, grf_mode="default")
    tuned = xejit.autotune([cfg, cfg], key=["M"], resources=gemm_resources())(gemm_kernel)
    with pytest.raises(xejit.XejitError, match="no config fits target pvc"):
        tuned.prune(_gemm_args(np.float32), target="pvc")


def test_dpas_and_block_shape_checks():
    est = estimate_gemm("pvc", 64, 24, 32, 1, "default", bf16, bf16, f32, f32)
    assert any("DPAS N=16" in p for p in est["problems"])
    est = estimate_gemm("pvc", 64, 64, 24, 4, "default", bf16, bf16, f32, f32)
    assert any("DPAS K=16" in p for p in est["problems"])
    est = estimate_gemm("pvc", 96, 64, 32, 5, "default", bf16, bf16, f32, f32)
    assert est["problems"] == ["5 subgroups cannot split the 96x64 tile evenly"]
    assert estimate_gemm("generic", 256, 256, 64, 1, "default", f32, f32, f32, f32)["problems"] == []


@pytest.mark.parametrize("target", ["pvc", "bmg", "dg2"])
def test_config_spaces_fit_their_targets_for_bf16(target):
    """Every config fits bf16 operands (with 2D block IO 32 rows of K are live per k-step: the
    128-deep k-steps fit too, and measure 0 spill in Intel's compiler); the 128-deep ones fit 8-bit
    operands as well. dg2's 8x256x32/8sg fits bf16 B either way (row-major by column parity, the
    A^T spread staged; B^T packed it spilled 736 B). dg2's 256- and 512-deep configs are staged
    in SLM and each fits 8- or 16-bit operands or both: a 16-bit panel with 8 words a work item
    (512x32x256, the fp16 pick) fits, one of 16 words is too many registers to pack (pruned: it
    spills 128-224 B), one of 32 words is not staged, so the whole k-step would be live (pruned);
    8-bit panels fit except int8 512x32x256 (4 words a work item over 8 K-blocks: calibrated)."""
    for c in CONFIGS[target]:
        if target == "dg2" and c.kwargs["BK"] >= 256:
            bm, bn, bk, nsg = c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_subgroups
            e8 = estimate_gemm(target, bm, bn, bk, nsg, c.grf_mode, i8, i8, i32, i32)
            e16 = estimate_gemm(target, bm, bn, bk, nsg, c.grf_mode, bf16, bf16, bf16, f32)
            assert not (e8["problems"] and e16["problems"]), (c, e8, e16)
            for e, size in ((e8, 1), (e16, 2)):
                if e["problems"]:
                    assert all("registers" in p for p in e["problems"]), (c, e)
                else:
                    assert e["slm_bytes"] == 2 * size * bk * bn, (c, e)
            assert (not e16["problems"]) == (bk * bn // 2 // (nsg * 8) <= 8), (c, e16)
            assert (not e8["problems"]) == ((bm, bn, bk, nsg) != (512, 32, 256, 64)), (c, e8)
            continue
        est = estimate_gemm(target, c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_subgroups,
                            c.grf_mode, bf16, bf16, bf16, f32)
        if target == "dg2" and c.kwargs["BM"] == 8 and c.kwargs["BN"] // c.num_subgroups == 64:
            # dg2's 8x64 decode tiles: row-major bf16 B fits at BK=32 (by column parity in both
            # loop versions: 0 spill with a bf16 C, acm-g10), spills deeper (8x512x64/8sg 9024 B,
            # pruned); column-major fits with an fp16 C
            if c.kwargs["BK"] > 32:
                assert est["problems"] and all("registers" in p for p in est["problems"]), (c, est)
            else:
                assert est["problems"] == [], (c, est)
            w = np.empty((64, 64), np.float16)
            est = estimate_gemm(target, c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_subgroups,
                                c.grf_mode, w, w.T, w, f32)
            # ... with a bf16 C as well (each block rounded at its store; 288-480 B of spill before)
            b16 = estimate_gemm(target, c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_subgroups,
                                c.grf_mode, w, w.T, bf16, f32)
            if c.kwargs["BK"] > 64:       # A not staged (over 128 bytes of a row a k-step): int8 only
                assert est["problems"] and all("registers" in p for p in est["problems"]), (c, est)
                continue
            assert not b16["problems"], (c, b16)
        if target != "dg2" and (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_subgroups) == (8, 512, 64, 4):
            # int8's decode tile (8 KB of B a k-step): 16-bit B takes twice that, over half the
            # register file (autotuner.decode_b_kstep_limit)
            assert est["problems"] and all("decode k-step" in p for p in est["problems"]), (c, est)
            est = estimate_gemm(target, 8, 512, 64, 4, c.grf_mode, i8, i8, i32, i32)
        assert est["problems"] == [], (c, est)
        if c.kwargs["BK"] == 128:
            est = estimate_gemm(target, c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_subgroups,
                                c.grf_mode, i8, i8, i32, i32)
            assert est["problems"] == [], (c, est)


@pytest.mark.parametrize("target", ["pvc", "bmg"])
def test_model_prunes_what_intels_compiler_spills(target):
    """Configs Intel's compiler spills but a per-k-step byte count passed (bench_device_code.py,
    4096^3): int8 64x32 subgroup tiles with BK=64 on bmg (4.4 KB; pvc: 0, they fit) and fp32 on FMA
    with BK >= 64 (2.7-30 KB); their neighbours that build with 0 spill still fit."""
    def problems(bm, bn, bk, nsg, grf, op, acc, precision=None):
        return estimate_gemm(target, bm, bn, bk, nsg, grf, op, op, acc, acc, precision)["problems"]
    assert bool(problems(256, 256, 64, 32, "256", i8, i32)) == (target == "bmg")   # bmg spills, pvc 0
    assert not problems(256, 256, 32, 32, "256", i8, i32)              # 0 spill
    assert not problems(128, 128, 128, 16, "256", i8, i32)
    assert not problems(8, 512, 64, 8, "256", i8, i32)
    for bm, bn, bk, nsg, grf in [(128, 128, 64, 16, "256"), (256, 128, 128, 32, "256"), (8, 512, 64, 16, "default"),
                                 (8, 512, 64, 8, "256")]:
        assert problems(bm, bn, bk, nsg, grf, f32, f32), (bm, bn, bk)   # FMA: spills
        if bk == 64 and bm > 8:
            assert not problems(bm, bn, bk, nsg, grf, f32, f32, "tf32")  # DPAS: 0 spill
    assert not problems(128, 128, 32, 16, "256", f32, f32)             # FMA BK=32: 0 spill
    assert not problems(256, 256, 64, 32, "256", bf16, f32)            # the 16-bit pick


# dg2 (acm-g10), 4096^3: the library configs Intel's compiler spills, per dtype and B layout
# (benchmarks/bench_device_code.py --targets dg2 --dtypes fp16 int8 --variants rowB colB): spill bytes.
# Every other config with a whole number of DPAS K-blocks builds with 0 spill and 0 private memory.
DG2_SPILLS = {
    # Row-major B by column / byte parity (M=8): 8x512x32/8sg 20736 B (fp16) / 19 KB (int8) while
    # its cold version packed B^T, 0 since both versions go by parity; 8x256x32/8sg B^T packed
    # spilled 736 B. 8x64 tiles deeper than BK=32 spill with row-major B (measured on the merged
    # tree: fp16 / bf16 BK=64 9024 B, BK=128 18464 B; int8 BK=64 30336 B, BK=128 8896 B).
    ("fp16", False): {(256, 64, 512, 64): 33408, (256, 64, 256, 64): 128, (512, 32, 512, 64): 224,
                      (8, 512, 64, 8): 9024, (8, 512, 128, 8): 18464},
    ("fp16", True): {(128, 128, 16, 32): 4928, (64, 128, 16, 16): 4928, (256, 128, 16, 64): 4928,
                     (256, 64, 128, 64): 8960, (256, 64, 512, 64): 34336, (256, 64, 256, 64): 17088,
                     (256, 64, 64, 64): 5760, (512, 32, 256, 64): 17088, (512, 32, 512, 64): 34336,
                     (8, 512, 128, 8): 4288},     # A 256 bytes of a row a k-step: not staged
    ("int8", False): {(512, 32, 256, 64): 128,      # calibrated in estimate_gemm (4 words a work item)
                      (8, 512, 64, 8): 30336, (8, 512, 128, 8): 8896},
    ("int8", True): {(256, 64, 128, 64): 7296, (256, 64, 512, 64): 18304, (256, 64, 256, 64): 8416,
                     (512, 32, 256, 64): 8416, (512, 32, 512, 64): 18304},
}


@pytest.mark.parametrize("col_b", [False, True], ids=["rowB", "colB"])
@pytest.mark.parametrize("dtype", ["fp16", "int8"])
def test_dg2_model_prunes_exactly_what_intels_compiler_spills(dtype, col_b):
    """Both ways: the resource model keeps every dg2 config that builds spill-free and prunes
    every one that spills (column-major B is not staged in SLM, decode's A is; its cold k-loop
    gathers B)."""
    el, acc, out = {"fp16": (np.float16, f32, np.float16), "int8": (np.int8, i32, np.int32)}[dtype]
    a, c = np.empty((64, 64), el), np.empty((64, 64), out)
    b = np.empty((64, 64), el).T if col_b else np.empty((64, 64), el)
    spills = DG2_SPILLS[dtype, col_b]
    for cfg in CONFIGS["dg2"]:
        key = (cfg.kwargs["BM"], cfg.kwargs["BN"], cfg.kwargs["BK"], cfg.num_subgroups)
        est = estimate_gemm("dg2", *key[:3], cfg.num_subgroups, cfg.grf_mode, a, b, c, acc)
        if dtype == "int8" and key[2] % 32:
            assert any("DPAS K=32" in p for p in est["problems"]), (key, est)
            continue
        regs = [p for p in est["problems"] if "registers" in p]
        assert bool(regs) == (key in spills), (dtype, col_b, key, est)
        assert len(regs) == len(est["problems"]), (key, est)
        if col_b:
            # column-major B is not staged; decode's A panel is (two 8 x BK buffers: decode_slm.py)
            # up to 128 bytes of a row a k-step (two A descriptors). (Row-major B's SLM, a B panel or
            # decode's A^T spread, is checked against Intel's compiler for the picks below:
            # test_dg2_decode_slm_estimate_is_what_the_lowering_allocates.)
            staged = key[0] == 8 and key[2] * a.itemsize <= 128
            assert est["slm_bytes"] == (2 * 8 * key[2] * a.itemsize if staged else 0), (key, est)


# pvc, bmg and lnl, 4096^3: the library configs Intel's compiler spills, per target, dtype and B
# layout (benchmarks/bench_device_code.py --targets pvc bmg lnl --dtypes fp16 int8 fp32 --variants rowB
# colB tf32): spill bytes. Every other config with a whole number of DPAS K-blocks builds
# with 0 spill (int8 with BK=16 is pruned for its DPAS K: never built).
XE_SPILLS = {
    ("pvc", "fp16", False): {},
    ("pvc", "fp16", True): {(256, 256, 64, 32): 1280},
    # int8 64x32 tiles at BK=64: pvc 0 since the per-lane k-loop version gathers each operand block
    # at its DPAS (192 B before); bmg / lnl still spill there (6720 / 6912 B before)
    ("pvc", "int8", False): {},
    ("pvc", "int8", True): {},
    ("bmg", "fp16", False): {},
    ("bmg", "fp16", True): {(256, 256, 64, 32): 1600},
    ("bmg", "int8", False): {(256, 256, 64, 32): 4352},
    ("bmg", "int8", True): {(256, 256, 64, 32): 4032},
    # bf16 (benchmarks/bench_device_code.py --dtypes bf16): the same split as fp16, other spill sizes
    ("pvc", "bf16", False): {},
    ("pvc", "bf16", True): {(256, 256, 64, 32): 1408},
    ("bmg", "bf16", False): {},
    ("bmg", "bf16", True): {(256, 256, 64, 32): 1024},
    ("lnl", "fp16", False): {},
    ("lnl", "fp16", True): {(256, 256, 64, 32): 1600},
    ("lnl", "int8", False): {(256, 256, 64, 32): 4352},
    ("lnl", "int8", True): {(256, 256, 64, 32): 4032},
    # tf32 (fp32 operands, PRECISION="tf32"), row-major B: 64x32 subgroup tiles and 32x32 ones in the
    # default register file spill; 32x16 tiles at BK=32 in it do not (A is live one 16-deep load at
    # a time). Column-major tf32 B: in the large register file B's whole k-step and one A load are
    # live (32x32 tiles at BK=128 and 8x64 at BK=64 spill; 32x32 at BK=64 does not), in the default
    # one 32 rows of K of each (32x16 tiles at BK=32 spill, 8x32 at BK=64 do not).
    ("pvc", "tf32", False): {(256, 256, 64, 32): 30784, (256, 256, 32, 32): 14080, (256, 128, 32, 16): 14016,
                             (128, 256, 32, 16): 13952, (128, 128, 32, 8): 13952, (64, 64, 16, 4): 6464,
                             (128, 128, 16, 16): 6336},
    ("pvc", "tf32", True): {(256, 256, 64, 32): 31744, (256, 256, 32, 32): 14464, (256, 128, 32, 16): 14464,
                            (128, 256, 32, 16): 14464, (128, 128, 32, 8): 14464, (64, 64, 16, 4): 7168,
                            (128, 128, 16, 16): 7168, (128, 128, 128, 16): 27200, (256, 128, 128, 32): 27136,
                            (8, 512, 64, 8): 3200, (32, 256, 32, 16): 6016},   # 8x512x64/8sg: also pruned
                            # by decode_b_kstep_limit (256 registers of B)
    ("bmg", "tf32", False): {(256, 256, 64, 32): 30016, (256, 256, 32, 32): 13632, (256, 128, 32, 16): 13632,
                             (128, 256, 32, 16): 13568, (128, 128, 32, 8): 13568, (64, 64, 16, 4): 6208,
                             (128, 128, 16, 16): 6272},
    # lnl (benchmarks/bench_device_code.py --targets lnl --dtypes bf16 fp32 --variants rowB tf32): the
    # spill sizes of bmg, config for config (tf32's table is set from bmg's below)
    ("lnl", "bf16", False): {},
    ("bmg", "tf32", True): {(256, 256, 64, 32): 30016, (256, 256, 32, 32): 14528, (256, 128, 32, 16): 14528,
                            (128, 256, 32, 16): 14528, (128, 128, 32, 8): 14528, (64, 64, 16, 4): 6656,
                            (128, 128, 16, 16): 6656, (128, 128, 128, 16): 23424, (256, 128, 128, 32): 23360,
                            (32, 256, 32, 16): 6016},   # 8x512x64/8sg: 0 (2688 before immediate offsets)
}
XE_SPILLS[("lnl", "tf32", False)] = XE_SPILLS[("bmg", "tf32", False)]   # measured equal, config for config


@pytest.mark.parametrize("target,dtype,col_b", list(XE_SPILLS))
def test_xe_model_prunes_exactly_what_intels_compiler_spills(target, dtype, col_b):
    """Both ways, on targets with 2D block IO: the resource model keeps every config that builds
    spill-free and prunes, for registers, every one that spills. (Column-major B: the transposed
    loads of the whole k-step are live at once -- fp16 256x256x64/32sg fitted the model before and
    spilled.) bf16 is fp16 to the model (same widths, same loads), and Intel's compiler agrees."""
    if dtype == "bf16":
        import torch
        a = c = torch.empty((64, 64), dtype=torch.bfloat16)
        b = c.T if col_b else c
        acc, prec = f32, None
    else:
        el, acc, out, prec = {"fp16": (np.float16, f32, np.float16, None), "int8": (np.int8, i32, np.int32, None),
                              "tf32": (np.float32, f32, np.float32, "tf32")}[dtype]
        a, c = np.empty((64, 64), el), np.empty((64, 64), out)
        b = np.empty((64, 64), el).T if col_b else np.empty((64, 64), el)
    spills = XE_SPILLS[target, dtype, col_b]
    for cfg in CONFIGS[target]:
        key = (cfg.kwargs["BM"], cfg.kwargs["BN"], cfg.kwargs["BK"], cfg.num_subgroups)
        est = estimate_gemm(target, *key[:3], cfg.num_subgroups, cfg.grf_mode, a, b, c, acc, prec)
        if dtype == "int8" and key[2] % 32:
            assert any("DPAS K=32" in p for p in est["problems"]), (key, est)
            continue
        b_bytes = key[2] * key[1] // key[3] * {"int8": 1, "tf32": 4}.get(dtype, 2)   # decode tiles: [1, nsg]
        if key[0] <= 8 and b_bytes > {"256": 8192}.get(cfg.grf_mode, 4096):
            # a decode k-step of B over half the register file: pruned by a calibration on Intel's
            # compiler (autotuner.decode_b_kstep_limit), whether or not it spills
            assert any("decode k-step" in p for p in est["problems"]), (key, est)
            continue
        regs = [p for p in est["problems"] if "registers" in p]
        assert bool(regs) == (key in spills), (target, dtype, col_b, key, est)
        assert len(regs) == len(est["problems"]), (key, est)


def test_pvc_space_has_the_large_tile():
    assert Config({"BM": 256, "BN": 256, "BK": 32}, num_subgroups=32, num_stages=3,
                  grf_mode="256") in CONFIGS["pvc"]


def test_usage_errors():
    with pytest.raises(xejit.XejitError, match="'m' is not an argument"):
        xejit.autotune([Config({"BN": 4})], key=["m"])(repeat_kernel)
    with pytest.raises(xejit.XejitError, match="must wrap an @xejit.kernel"):
        xejit.autotune([Config({"BN": 4})], key=["n"])(lambda x: x)
    tuned = _tuned(repeat_kernel, [1, 2], cache_results=False)
    x = np.ones(N, np.float32)
    with pytest.raises(xejit.XejitError, match="tuned by @xejit.autotune"):
        tuned[_grid](x, x, N, REPEAT=3)


@pytest.mark.parametrize("dtype,col_b,bk", [("fp16", False, 32), ("int8", False, 32), ("fp16", True, 32),
                                             ("fp16", True, 64)])   # A from two descriptors
def test_dg2_decode_slm_estimate_is_what_the_lowering_allocates(dtype, col_b, bk):
    """The model's SLM bytes of decode's staged A (panel or A^T spread, decode_slm.staged_slm_bytes)
    equal what Intel's compiler allocates for the dg2 decode picks (the lowering's SLM arrays)."""
    el, acc, out = {"fp16": (np.float16, f32, np.float16), "int8": (np.int8, i32, np.int32)}[dtype]
    M, N, K = 8, 512, 128
    a, c = np.ones((M, K), el), np.ones((M, N), out)
    b = np.ones((N, K), el).T if col_b else np.ones((K, N), el)
    bm, bn, nsg = (8, 512, 8) if col_b else (8, 256, 8)
    est = estimate_gemm("dg2", bm, bn, bk, nsg, "default", a, b, c, acc)
    ck = gemm_kernel.compile(a, b, a, c, M, N, K, target="dg2", ACC=acc, BM=bm, BN=bn, BK=bk,
                             num_subgroups=nsg, num_stages=2)
    measured = ck.device_binary.slm_bytes
    assert est["slm_bytes"] and est["slm_bytes"] == measured, (est["slm_bytes"], measured)
    # and the compile report's figure is the lowering's arrays too, not only the IR's buffers
    assert ck.slm_bytes == measured and f"SLM: {measured} B" in ck.report(), (ck.slm_bytes, measured)
