import pathlib
import runpy

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parents[2] / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, monkeypatch, capsys):
    monkeypatch.setenv("XEJIT_INTERPRET", "1")
    runpy.run_path(str(path), run_name="__main__")   # each example asserts its own accuracy
    assert "error" in capsys.readouterr().out
