"""spirv-val runs only with XEJIT_VALIDATE=1 (tests/conftest.py sets it): never on a user's
compile or program build."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.codegen import spirv
from xejit.runtime import program

from . import kernels


@xejit.kernel
def _scale(x, y, BN: xl.constexpr):
    n = xl.program_id(0) * BN
    xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), xl.load_tile(xl.init_tile(x, [0, n], [1, BN])) * 3.0)


@pytest.fixture
def validations(monkeypatch):
    calls = []
    real = spirv.validate
    monkeypatch.setattr(spirv, "validate", lambda spv: (calls.append(len(spv)), real(spv))[1])
    return calls


@pytest.mark.parametrize("env", [None, "1"])
def test_spirv_val_only_with_xejit_validate(validations, monkeypatch, env, tmp_path):
    if env is None:
        monkeypatch.delenv("XEJIT_VALIDATE", raising=False)
    else:
        monkeypatch.setenv("XEJIT_VALIDATE", env)
    monkeypatch.setattr(program, "_programs", {})
    program.build_program(kernels.vadd_f32(), cache=False)
    x = np.linspace(-1, 1, 32, dtype=np.float32)
    ck = _scale.compile(x, x, BN=32 + (0 if env is None else 16))   # a new specialization: compiled
    assert ck.spv[:4] == b"\x03\x02\x23\x07"
    assert (len(validations) == 0) if env is None else (len(validations) == 2)
