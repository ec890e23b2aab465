"""Every example runs and checks its own accuracy against float64 numpy (each poisons its output):
under the interpreter, on the CPU device (generic) and on the GPU code paths emulated on it
(XEJIT_EMULATE=pvc / dg2), at small sizes."""
import pathlib
import runpy
import sys

import pytest

from tests.helpers import use_mode

EXAMPLES = sorted((pathlib.Path(__file__).parents[2] / "examples").glob("*.py"))
# Small problem sizes keep the interpreter and the emulated builds fast; examples without options
# take none. attention.py is run through its main(), which takes the sizes (D=32: the emulated
# builds took 8.4 (pvc) / 9.2 s (dg2) of CPU at D=64, 2.7 / 3.2 s at 32; D=64 is tests/attention's).
ARGS = {"gemm.py": ["--size", "70", "50", "40", "--repeats", "1"]}
SMALL_ATTENTION = {"heads": 2, "S": 37, "D": 32}
#: the examples each emulated GPU path runs (their builds are the slow part of this file)
EMULATED = ("attention.py", "gemm.py")


def _run(path: pathlib.Path, monkeypatch) -> None:
    if path.name == "attention.py":
        runpy.run_path(str(path))["main"](**SMALL_ATTENTION)
        return
    monkeypatch.setattr(sys, "argv", [str(path), *ARGS.get(path.name, [])])
    runpy.run_path(str(path), run_name="__main__")   # each example asserts its own accuracy


@pytest.mark.parametrize("mode", ["interpret", "generic"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, mode, monkeypatch, capsys):
    use_mode(monkeypatch, mode)
    _run(path, monkeypatch)
    assert "error" in capsys.readouterr().out


@pytest.mark.parametrize("mode", ["pvc", "dg2"])
@pytest.mark.parametrize("name", EMULATED)
def test_example_emulated(name, mode, monkeypatch, capsys):
    """On DPAS targets attention.py's P reaches the second tile_mma through SLM (DPAS=True; without
    it the compile failed: the A operand must come from a load); gemm.py takes a small tile there
    (fp32: the FMA fallback) and says it is emulated."""
    use_mode(monkeypatch, mode)
    _run(pathlib.Path(EXAMPLES[0].parent / name), monkeypatch)
    out = capsys.readouterr().out
    assert "error" in out and (name != "gemm.py" or "(emulated)" in out), out
