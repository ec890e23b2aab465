"""The scripts of examples/ run and agree with float64 numpy on each code path: the CPU device
(generic) and the GPU paths emulated on it (XEJIT_EMULATE=pvc / dg2), at small sizes."""
import runpy
import sys
from pathlib import Path

import pytest

from .helpers import use_mode

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("mode", ["generic", "pvc", "dg2"])
def test_attention_example(mode, monkeypatch):
    """examples/attention.py: on DPAS targets P reaches the second tile_mma through SLM (DPAS=True);
    without it the emulated compile failed (the A operand must come from a load). The example
    asserts its error against float64 numpy (< 1e-5) and poisons its output."""
    use_mode(monkeypatch, mode)
    main = runpy.run_path(str(EXAMPLES / "attention.py"))["main"]
    main(heads=2, S=37, D=64)


@pytest.mark.parametrize("mode", ["generic", "pvc", "dg2"])
def test_gemm_example(mode, monkeypatch, capsys):
    """examples/gemm.py at a ragged size; under emulation its small tile (fp32: the FMA fallback)."""
    use_mode(monkeypatch, mode)
    monkeypatch.setattr(sys, "argv", ["gemm.py", "--size", "70", "50", "40", "--repeats", "1"])
    runpy.run_path(str(EXAMPLES / "gemm.py"), run_name="__main__")   # raises SystemExit on a bad error
    out = capsys.readouterr().out
    assert "max relative error" in out and (mode == "generic" or "(emulated)" in out), out
