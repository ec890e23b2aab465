"""Generated hostile kernels (hypothesis): each is compiled and launched (GPU targets emulated on
the CPU device) in a child process with a time and memory limit (``runner.py``); none may crash,
hang, raise a non-xejit exception or an "internal compiler error", and a kernel that runs must
write what the numpy interpreter writes. Derandomized, so a failure reproduces; the generator is
``kernel_source``. ``XEJIT_HOSTILE_LOG=<file>`` appends every case's outcome as a JSON line."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]

SHAPES = st.sampled_from(["[8, 16]", "[16, 16]", "[0, 16]", "[8, -16]", "[3, 5]", "[8, 16, 2]", "[8]",
                          "[2**40, 16]", "[8.5, 16]", "'8x16'", "[BM, BN]"])
DTYPES = st.sampled_from(["xl.float32", "xl.float16", "xl.bfloat16", "xl.int8", "xl.uint8", "xl.int32",
                          "xl.int1", "'float'", "None", "3"])
VALUES = st.sampled_from(["0", "1", "-1", "300", "2**31", "2**70", "1e40", "float('nan')", "float('-inf')",
                          "'a'", "None", "[1, 2]", "1.5", "True"])
OFFSETS = st.sampled_from(["[0, 0]", "[-8, 0]", "[2**62, 0]", "[0.5, 0]", "[0]", "['a', 0]", "[m, 0]"])
STATEMENTS = st.one_of(
    st.builds("t = xl.load_tile(xl.init_tile(x, {}, {}), padding={})".format, OFFSETS, SHAPES, VALUES),
    st.builds("t = xl.full({}, {}, {})".format, SHAPES, VALUES, DTYPES),
    st.builds("t = xl.zeros({}, {})".format, SHAPES, DTYPES),
    st.builds("t = t.to({})".format, DTYPES),
    st.builds("t = t + {}".format, VALUES),
    st.builds("t = t * xl.full({}, 2.0, xl.float32)".format, SHAPES),
    st.builds("t = xl.tile_mma(t, xl.load_tile(xl.init_tile(y, [0, 0], {})), None)".format, SHAPES),
    st.builds("t = xl.tile_reduce(t, 'add', {})".format, st.sampled_from(["0", "1", "2", "-1", "'x'"])),
    st.builds("t = xl.tile_broadcast(t, {})".format, SHAPES),
    st.builds("t = xl.tile_transpose(t)".format),
    st.builds("t = xl.exp(t) if {} else t".format, st.sampled_from(["True", "BM > 4", "t"])),
    st.builds("for k in range({}):\n    t = t + 1.0".format, st.sampled_from(["2", "2.5", "BM", "x", "-3", "0"])),
    st.builds("xl.store_tile(xl.init_tile(y, {}, {}), t)".format, OFFSETS, SHAPES),
    st.builds("xl.store_tile(t, {})".format, VALUES),
    st.just("t = undefined_name + 1"),
    st.just("t = xl.arange(0, BN)"),
    st.just("t = xl.load_gather(xl.init_tile(x, xl.arange(0, BN) * 1000000), padding=-1.0)"),
)


@st.composite
def kernel_source(draw) -> str:
    body = draw(st.lists(STATEMENTS, min_size=1, max_size=4))
    lines = ["m = xl.program_id(0) * BM",
             "t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN]))"] + body + [
             "xl.store_tile(xl.init_tile(y, [m, 0], [BM, BN]), t)"]
    src = "\n".join(lines)
    return textwrap.dedent('''\
        import numpy as np
        import xejit
        import xejit.language as xl


        @xejit.kernel
        def kernel(x, y, BM: xl.constexpr, BN: xl.constexpr):
        {body}


        ARGS = (np.random.default_rng(0).uniform(1, 2, (16, 16)).astype(np.float32), np.zeros((16, 16), np.float32))
        KWARGS = dict(BM=8, BN=16)
        ''').format(body=textwrap.indent(src, "    "))


# Well-formed statements on t ([BM, BN] float32) at the edges where a result goes silently wrong:
# casts out of range and of NaN, integer division by zero, out-of-range gathers and scatters,
# reductions, a loop, a GEMM. A kernel made of them runs; its output must equal the interpreter's.
CONSTS = st.sampled_from(["0.0", "1.5", "-2.0", "300.0", "1e30"])
RUNNABLE = st.one_of(
    st.builds("t = t + {}".format, CONSTS),
    st.builds("t = t * {}".format, CONSTS),
    st.builds("t = t / {}".format, CONSTS),
    st.builds("t = xl.maximum(t, {})".format, CONSTS),
    st.builds("t = xl.where(t > {}, t, -t)".format, CONSTS),
    st.builds("t = t.to({}).to(xl.float32)".format,
              st.sampled_from(["xl.float16", "xl.bfloat16", "xl.int8", "xl.uint8", "xl.int32", "xl.int1"])),
    st.builds("t = xl.{}(t)".format, st.sampled_from(["exp", "tanh", "abs", "floor", "sqrt", "log"])),
    st.builds("t = (t.to(xl.int32) {} {}).to(xl.float32)".format, st.sampled_from(["//", "%"]),
              st.sampled_from(["0", "3", "-2"])),
    st.builds("t = xl.tile_broadcast(xl.{}(t, {}), [BM, BN])".format, st.sampled_from(["sum", "max", "min"]),
              st.sampled_from(["0", "1"])),
    st.builds("t = t + xl.tile_broadcast(xl.load_gather(xl.init_tile(x, xl.arange(0, BN) * {} + {}), "
              "padding=-1.0), [BM, BN])".format, st.sampled_from(["1", "17", "-3", "1000000"]),
              st.sampled_from(["0", "5", "250"])),
    st.builds("xl.store_scatter(xl.init_tile(y, xl.arange(0, BN) * {} + {}), xl.sum(t, 0))".format,
              st.sampled_from(["1", "17", "-3", "1000000"]), st.sampled_from(["128", "200", "250"])),
    st.just("for k in range(3):\n    t = t * 0.5 + 1.0"),
    st.just("t = xl.tile_mma(t, xl.load_tile(xl.init_tile(x, [0, 0], [BN, BN])), None)"),
)


@st.composite
def runnable_kernel_source(draw) -> str:
    body = draw(st.lists(RUNNABLE, min_size=1, max_size=4))
    lines = ["m = xl.program_id(0) * BM",
             "t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN]))"] + body + [
             "xl.store_tile(xl.init_tile(y, [m, 0], [BM, BN]), t)"]
    return textwrap.dedent('''\
        import numpy as np
        import xejit
        import xejit.language as xl


        @xejit.kernel
        def kernel(x, y, BM: xl.constexpr, BN: xl.constexpr):
        {body}


        _x = np.random.default_rng(1).uniform(-4, 4, (16, 16)).astype(np.float32)
        _x.flat[[3, 40, 77, 130, 201]] = [300.5, -1e6, np.nan, np.inf, -129.0]
        ARGS = (_x, np.zeros((16, 16), np.float32))
        KWARGS = dict(BM=8, BN=16)
        ''').format(body=textwrap.indent("\n".join(lines), "    "))


def _run(tmp: Path, src: str, target: str) -> dict:
    path = tmp / "k.py"
    path.write_text(src)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("XEJIT_EMULATE", None)
    env.pop("XEJIT_INTERPRET", None)
    try:
        p = subprocess.run([sys.executable, "-m", "tests.hostile.runner", str(path), target], check=False, capture_output=True,
                           text=True, timeout=120, cwd=ROOT, env=env)
        result = {"outcome": "crash", "returncode": p.returncode, "stderr": p.stderr[-2000:]} if p.returncode \
            else json.loads(p.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        result = {"outcome": "hang"}
    log = os.environ.get("XEJIT_HOSTILE_LOG")   # one JSON line per case, for the table of docs/errors.md
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"target": target, **result, "source": src}) + "\n")
    return result


def _check(result: dict, src: str) -> None:
    assert result["outcome"] in ("ok", "error"), f"{result}\n--- kernel ---\n{src}"
    if result["outcome"] == "error":
        assert result["located"] or "argument" in result["message"] or "launch" in result["message"], \
            f"an error without the kernel's line: {result}\n--- kernel ---\n{src}"


# The default run takes a few cases per target (each a child process: ~2-8 s); the slow
# run's test_many_* below take 150 / 60 on three targets.
DEFAULT_EXAMPLES = 4


@pytest.mark.parametrize("target", ["generic", "pvc"])
@settings(max_examples=DEFAULT_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(src=kernel_source())
def test_generated_kernels_end_cleanly(tmp_path_factory, target, src):
    _check(_run(tmp_path_factory.mktemp("k"), src, target), src)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["generic", "pvc", "dg2"])
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(src=kernel_source())
def test_many_generated_kernels_end_cleanly(tmp_path_factory, target, src):
    _check(_run(tmp_path_factory.mktemp("k"), src, target), src)


@pytest.mark.parametrize("target", ["generic", "pvc"])
@settings(max_examples=DEFAULT_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(src=runnable_kernel_source())
def test_runnable_kernels_match_the_interpreter(tmp_path_factory, target, src):
    _check(_run(tmp_path_factory.mktemp("k"), src, target), src)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["generic", "pvc", "dg2"])
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(src=runnable_kernel_source())
def test_many_runnable_kernels_match_the_interpreter(tmp_path_factory, target, src):
    _check(_run(tmp_path_factory.mktemp("k"), src, target), src)
