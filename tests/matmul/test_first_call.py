"""The first ``xejit.matmul`` in a fresh process with a warm cache: the stored tuning choice
builds only the chosen kernel, and its driver binary is loaded from the cache, not compiled."""
import json
import os
import pathlib
import subprocess
import sys

from xejit.runtime import default_device
from xejit.runtime.opencl_programs import interop_for

ROOT = pathlib.Path(__file__).resolve().parents[2]

_MATMUL_PROCESS = r"""
import json, sys
import numpy as np, xejit
from xejit.runtime import program
rng = np.random.default_rng(int(sys.argv[1]))
a, b = (rng.standard_normal((96, 80)).astype(np.float32), rng.standard_normal((80, 72)).astype(np.float32))
c = xejit.matmul(a, b)
err = float(np.max(np.abs(c - a.astype(np.float64) @ b.astype(np.float64))))
print(json.dumps({"from_spirv": program.build_stats.from_spirv, "from_binary": program.build_stats.from_binary,
                  "max_err": err}))
"""


def _run(cache_dir, seed: int) -> dict:
    env = {**os.environ, "XEJIT_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", _MATMUL_PROCESS, str(seed)], env=env, capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_warm_first_call_builds_only_the_chosen_kernel(tmp_path):
    cold = _run(tmp_path, 1)
    warm = _run(tmp_path, 2)
    assert cold["from_spirv"] >= 1 and cold["max_err"] < 1e-3
    assert warm["max_err"] < 1e-3
    if interop_for(default_device().queue) is not None:     # driver binaries kept: nothing compiled
        assert (warm["from_spirv"], warm["from_binary"]) == (0, 1)
    else:
        assert warm["from_spirv"] + warm["from_binary"] == 1
