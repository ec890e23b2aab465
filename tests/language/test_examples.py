"""Every example runs, on the device and under the interpreter, and checks its own accuracy."""
import pathlib
import runpy
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parents[2] / "examples").glob("*.py"))
# Small problem sizes keep the interpreter fast; examples without options take none.
ARGS = {"gemm.py": ["--size", "70", "50", "40", "--repeats", "1"]}


@pytest.mark.parametrize("interpret", ["1", "0"], ids=["interpreter", "device"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, interpret, monkeypatch, capsys):
    monkeypatch.setenv("XEJIT_INTERPRET", interpret)
    monkeypatch.setattr(sys, "argv", [str(path), *ARGS.get(path.name, [])])
    runpy.run_path(str(path), run_name="__main__")   # each example asserts its own accuracy
    assert "error" in capsys.readouterr().out
