"""The README's commands are what CI runs: keep them from drifting apart."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    return [line.strip() for line in lines if line.strip().startswith("python3 -m venv .venv &&")]


def test_readme_shows_exactly_two_setup_commands():
    cmds = _commands()
    assert len(cmds) == 2, cmds
    assert cmds[0].endswith("examples/gemm.py") and cmds[1].endswith("-m pytest -q")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _commands()[1] in ci.splitlines()
