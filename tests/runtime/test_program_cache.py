"""Driver binaries kept across processes (xejit/runtime/opencl_programs.py, program.build_program):
a fresh process with a warm cache loads the binary instead of compiling SPIR-V, runs it correctly,
and a binary the driver refuses is discarded and rebuilt."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from xejit.runtime import default_cache, default_device, program
from xejit.runtime.opencl_programs import interop_for

from . import kernels

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(interop_for(default_device().queue) is None,
                                reason="driver binaries are kept for OpenCL devices only")

_VADD_PROCESS = r"""
import json, sys
import numpy as np
from xejit.runtime import build_program, program
from tests.runtime import kernels
rng = np.random.default_rng(int(sys.argv[1]))
a, b = (rng.standard_normal(300).astype(np.float32) for _ in range(2))
c = np.full(300, np.nan, np.float32)
k = build_program(kernels.vadd_f32(), validate=False).kernel("vadd", ["ptr_in", "ptr_in", "ptr", "i32", "f32"])
k.launch((5,), (64,), a, b, c, 300, -0.75)
err = float(np.max(np.abs(c - (a.astype(np.float64) - 0.75 * b.astype(np.float64)))))
print(json.dumps({"from_spirv": program.build_stats.from_spirv, "from_binary": program.build_stats.from_binary,
                  "max_err": err}))
"""


def _run(code: str, cache_dir, *args: str) -> dict:
    env = {**os.environ, "XEJIT_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_fresh_process_loads_the_driver_binary_instead_of_compiling(tmp_path):
    cold = _run(_VADD_PROCESS, tmp_path, "1")
    warm = _run(_VADD_PROCESS, tmp_path, "2")
    assert (cold["from_spirv"], cold["from_binary"]) == (1, 0)
    assert (warm["from_spirv"], warm["from_binary"]) == (0, 1)
    assert cold["max_err"] < 1e-5 and warm["max_err"] < 1e-5     # NaN-poisoned output: NaN fails too


def _fresh_build(monkeypatch, tmp_path, **kw):
    monkeypatch.setenv("XEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(program, "_programs", {})        # no in-process hit
    before = (program.build_stats.from_spirv, program.build_stats.from_binary)
    prog = program.build_program(kernels.vadd_f32(), validate=False, **kw)
    return prog, (program.build_stats.from_spirv - before[0], program.build_stats.from_binary - before[1])


def _launch_vadd(prog) -> None:
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(100).astype(np.float32) for _ in range(2))
    c = np.full(100, np.nan, np.float32)
    prog.kernel("vadd", ["ptr_in", "ptr_in", "ptr", "i32", "f32"]).launch((2,), (64,), a, b, c, 100, 2.0)
    np.testing.assert_allclose(c, a.astype(np.float64) + 2.0 * b.astype(np.float64), rtol=1e-5, atol=1e-6)


def test_a_binary_the_driver_refuses_is_discarded_and_rebuilt(monkeypatch, tmp_path):
    _, counts = _fresh_build(monkeypatch, tmp_path)
    assert counts == (1, 0)
    entries = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(entries) == 1
    key = entries[0].name
    default_cache().put(key, b"\x7fELF not a program")       # well-formed for the cache, useless to the driver
    prog, counts = _fresh_build(monkeypatch, tmp_path)
    assert counts == (1, 0)
    _launch_vadd(prog)
    default_cache().clear_memory()
    assert default_cache().get(key).startswith(b"\x7fELF\x02")  # replaced by the real binary
    prog, counts = _fresh_build(monkeypatch, tmp_path)
    assert counts == (0, 1)
    _launch_vadd(prog)


def test_cache_false_always_compiles(monkeypatch, tmp_path):
    _fresh_build(monkeypatch, tmp_path)
    _, counts = _fresh_build(monkeypatch, tmp_path, cache=False)
    assert counts == (1, 0)


def test_build_options_are_part_of_the_key(monkeypatch, tmp_path):
    _fresh_build(monkeypatch, tmp_path)
    _, counts = _fresh_build(monkeypatch, tmp_path, options="-cl-fast-relaxed-math")
    assert counts == (1, 0)


def test_concurrent_builds_of_one_module_build_it_once(monkeypatch, tmp_path):
    import threading

    monkeypatch.setenv("XEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(program, "_programs", {})
    before = program.build_stats.from_spirv
    spv, got, start = kernels.vadd_f32(), [], threading.Barrier(3)

    def build():
        start.wait()
        got.append(program.build_program(spv, validate=False, cache=False))
    threads = [threading.Thread(target=build) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 3 and all(p is got[0] for p in got)
    assert program.build_stats.from_spirv - before == 1
    _launch_vadd(got[0])


def test_the_cpu_vector_isa_is_part_of_the_key(monkeypatch):
    """AVX2 and AVX-512 machines report one device name ("AMD EPYC") and the runtime compiles for
    the host's ISA: a cache shared between them must not hand zmm code to an AVX2 machine."""
    dev = default_device()
    if not dev.sycl_device.is_cpu:
        pytest.skip("the vector ISA is keyed for CPU devices")
    keys = set()
    for regs in ((16, 32), (32, 64)):
        monkeypatch.setattr(program, "cpu_vector_registers", lambda regs=regs: regs)
        keys.add(program._binary_key("0" * 64, dev, ""))
    assert len(keys) == 2
