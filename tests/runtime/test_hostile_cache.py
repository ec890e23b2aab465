"""Hostile compile-cache entries: an entry with a valid checksum whose payload is not what the
reader expects (wrong structure, not base64, not SPIR-V, truncated SPIR-V, a wrong ABI) is a
miss -- rebuilt and replaced -- and never reaches the driver (a truncated module used to kill
the process inside it)."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from xejit.codegen.spirv import SPIRV_MAGIC, structure_problem
from xejit.device_launch import usable_entry
from xejit.runtime.cache import Cache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good():
    """(metadata, SPIR-V) of a real compiled kernel, as the cache stores it."""
    from tests.runtime import hostile_cache_kernel as hk
    ck = hk.add_one.compile(np.ones(16, np.float32), np.ones(16, np.float32), BN=16, target="generic")
    meta = {"spv": base64.b64encode(ck.spv).decode(), "name": ck.name, "signature": list(ck.signature),
            "arg_plan": [list(p) for p in ck.arg_plan], "workgroup_size": list(ck.workgroup_size)}
    return meta, ck.spv


def test_structure_of_a_real_module_is_whole(good):
    meta, spv = good
    assert structure_problem(spv) is None and structure_problem(spv, meta["name"]) is None


@pytest.mark.parametrize("cut", [4, 8, 12, 64, 100, 0.5, 0.9])
def test_truncated_spirv_is_detected(good, cut):
    _, spv = good
    n = int(len(spv) * cut) // 4 * 4 if isinstance(cut, float) else len(spv) - cut
    assert structure_problem(spv[:n]) is not None


@pytest.mark.parametrize("mutate,needle", [
    (lambda s: s[:3], "whole number of words"),
    (lambda s: s[:-1], "whole number of words"),
    (lambda s: (0x03022307).to_bytes(4, "little") + s[4:], "bad magic"),
    (lambda s: b"\0" * 4 + s[4:], "bad magic"),
    (lambda s: s[:12] + b"\0" * 4 + s[16:], "id bound is 0"),
    (lambda s: s + (5 << 16 | 1).to_bytes(4, "little"), "runs past"),       # a 5-word instruction, 1 word long
    (lambda s: s[:20] + (0).to_bytes(4, "little") + s[24:], "runs past"),    # a word count of 0
    (lambda s: b"".join([s, s[20:24]]), ""),                                 # a trailing extra instruction
])
def test_malformed_spirv_is_detected(good, mutate, needle):
    _, spv = good
    problem = structure_problem(mutate(spv))
    assert problem is not None and needle in problem


def test_entry_point_name_is_checked(good):
    meta, spv = good
    assert "no entry point named 'other'" in structure_problem(spv, "other")
    assert int.from_bytes(spv[:4], "little") == SPIRV_MAGIC


def _variants(meta: dict, spv: bytes) -> dict[str, bytes]:
    """Checksum-valid cache payloads that the reader must refuse."""
    def j(**changes):
        m = dict(meta)
        for k, v in changes.items():
            if v is KeyError:
                m.pop(k)
            else:
                m[k] = v
        return json.dumps(m).encode()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return {
        "not-utf8": b"\xff\xfe\x00garbage",
        "not-json": b"{spv: nope",
        "json-list": json.dumps([meta["spv"], meta["name"]]).encode(),
        "json-number": b"42",
        "no-spv": j(spv=KeyError),
        "spv-not-str": j(spv=123),
        "spv-not-base64": j(spv="!!!! not base64 ****"),
        "spv-base64-junk-chars": j(spv=meta["spv"][:40] + "$$" + meta["spv"][40:]),
        "spv-non-ascii": j(spv="é" + meta["spv"]),
        "spv-not-spirv": j(spv=b64(b"\x7fELF" + b"\0" * 60)),
        "spv-truncated": j(spv=b64(spv[: len(spv) // 2 // 4 * 4])),
        "spv-truncated-at-end": j(spv=b64(spv[:-8])),
        "spv-empty": j(spv=""),
        "no-name": j(name=KeyError),
        "wrong-name": j(name="not_the_kernel"),
        "name-not-str": j(name=["k"]),
        "signature-unknown-kind": j(signature=["ptr_in", "i64", "i64", "ptrX", "i64", "i64"]),
        "signature-short": j(signature=meta["signature"][:-1]),
        "signature-not-list": j(signature="ptr"),
        "plan-index-out-of-range": j(arg_plan=[[9, *p[1:]] if i == 0 else p for i, p in enumerate(meta["arg_plan"])]),
        "plan-kind-mismatch": j(arg_plan=[[p[0], "f32", p[2]] if i == 1 else p for i, p in enumerate(meta["arg_plan"])]),
        "plan-bad-what": j(arg_plan=[[p[0], p[1], "shapeX"] if i == 1 else p for i, p in enumerate(meta["arg_plan"])]),
        "plan-not-triples": j(arg_plan=[p[:2] for p in meta["arg_plan"]]),
        "plan-float-index": j(arg_plan=[[0.0, *p[1:]] if i == 0 else p for i, p in enumerate(meta["arg_plan"])]),
        "wg-empty": j(workgroup_size=[]),
        "wg-zero": j(workgroup_size=[0, 1, 1]),
        "wg-float": j(workgroup_size=[16.0, 1, 1]),
        "wg-str": j(workgroup_size="16"),
    }


def test_usable_entry_accepts_the_real_entry(good):
    meta, spv = good
    got_meta, got_spv = usable_entry(json.dumps(meta).encode(), 2)
    assert got_spv == spv and got_meta["name"] == meta["name"]


def test_usable_entry_refuses_every_malformed_payload(good):
    meta, spv = good
    for name, blob in _variants(meta, spv).items():
        assert usable_entry(blob, 2) == (None, None), name


def test_discard_removes_memory_and_disk_entry(tmp_path):
    c = Cache(tmp_path)
    c.put("ab" * 32, b"payload")
    c.discard("ab" * 32)
    assert c.corrupt == 1 and Cache(tmp_path).get("ab" * 32) is None and c.get("ab" * 32) is None


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from xejit import device_launch
    from xejit.runtime.cache import Cache, default_cache
    from tests.runtime import hostile_cache_kernel as hk
    from tests.runtime.test_hostile_cache import _variants

    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 2.0, 16).astype(np.float32)
    def run():
        y = np.full(16, np.nan, np.float32)
        hk.add_one[(1,)](x, y, BN=16)
        np.testing.assert_allclose(y, x.astype(np.float64) * 2.0 + 1.0, rtol=1e-6)

    run()                                              # the good entry, written to the cache dir
    cache_dir = default_cache().directory
    keys = [p.name for p in cache_dir.rglob("*") if p.is_file() and not p.name.startswith(".")]
    (key,) = [k for k in keys if b'"spv"' in (Cache(cache_dir).get(k) or b"")]
    good = json.loads(Cache(cache_dir).get(key))
    import base64
    spv = base64.b64decode(good["spv"])
    for name, blob in _variants(good, spv).items():
        Cache(cache_dir).put(key, blob)                # checksum-valid, unusable
        device_launch.clear_memory_caches()
        default_cache().clear_memory()
        before = default_cache().corrupt
        run()                                          # rebuilt, never handed to the driver
        assert default_cache().corrupt == before + 1, name
        assert device_launch.usable_entry(Cache(cache_dir).get(key), 2)[0] is not None, name  # replaced
        print("ok", name, flush=True)
    print("done")
""")


def test_unusable_entries_are_rebuilt_on_the_device(tmp_path):
    """In a child process, so that an entry that reached the driver and killed it fails this
    test instead of the whole run."""
    env = dict(os.environ, XEJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("XEJIT_INTERPRET", None)
    env.pop("XEJIT_EMULATE", None)
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"child exited with {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert proc.stdout.strip().endswith("done")
    assert proc.stdout.count("ok ") == len(_variants({"spv": "", "name": "k", "signature": [], "arg_plan": [],
                                                       "workgroup_size": []}, b""))


def test_debug_entries_need_their_sites(good):
    """An XEJIT_DEBUG=1 entry (a last plan step for the report buffer) is usable only with its
    list of checked sites, and a normal entry only without one."""
    meta, _ = good
    sites = [{"loc": "k.py:3:4", "kind": "load_gather", "array": "x"}]
    dbg = {**meta, "signature": meta["signature"] + ["ptr"], "arg_plan": meta["arg_plan"] + [[-1, "ptr", "debug"]]}
    assert usable_entry(json.dumps({**dbg, "debug_sites": sites}).encode(), 2)[0] is not None
    for bad in ({**dbg}, {**dbg, "debug_sites": "x"}, {**dbg, "debug_sites": [{"loc": 3}]},
                {**meta, "debug_sites": sites}, {**dbg, "signature": meta["signature"] + ["i64"], "debug_sites": sites}):
        assert usable_entry(json.dumps(bad).encode(), 2) == (None, None), bad
