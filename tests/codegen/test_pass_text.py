"""Text tests of the passes, as LLVM and xDSL write theirs: each ``text/*.mlir`` file holds IR in the
printer's syntax, a ``// RUN: <python -m xejit opt arguments>`` first line, and ``// CHECK`` lines
that the ``filecheck`` package matches against the output of the passes."""
from __future__ import annotations

import contextlib
import io
import pathlib
import shutil
import subprocess
import sys

import pytest

from xejit.__main__ import main

TEXT = pathlib.Path(__file__).parent / "text"
FILES = sorted(TEXT.glob("*.mlir"))


def filecheck_command() -> str:
    exe = pathlib.Path(sys.executable).with_name("filecheck")
    return str(exe) if exe.exists() else (shutil.which("filecheck") or "filecheck")


def run_opt(path: pathlib.Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("// RUN: "), f"{path.name}: the first line must be '// RUN: <opt arguments>'"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["opt", str(path), *first[len("// RUN: "):].split()])
    assert status == 0, f"{path.name}: python -m xejit opt failed"
    return out.getvalue()


def filecheck(check_file: pathlib.Path, text: str) -> subprocess.CompletedProcess:
    return subprocess.run([filecheck_command(), str(check_file)], input=text, capture_output=True, text=True,
                          check=False)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_pass_output_matches_checks(path):
    res = filecheck(path, run_opt(path))
    assert res.returncode == 0, res.stdout + res.stderr


def test_there_are_text_tests():
    assert len(FILES) >= 5


def test_a_wrong_check_fails(tmp_path):
    """The harness can fail: the same output against a CHECK it does not contain."""
    path = TEXT / "blocking_pvc_f16.mlir"
    wrong = tmp_path / "wrong.mlir"
    wrong.write_text(path.read_text().replace("CHECK-COUNT-8: xegpu.dpas", "CHECK-COUNT-9: xegpu.dpas"))
    assert filecheck(wrong, run_opt(path)).returncode != 0
