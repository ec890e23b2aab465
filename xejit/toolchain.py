"""Installing Intel's GPU compiler (ocloc + IGC) into a folder of xejit's own, from Debian.

``python -m xejit toolchain install`` downloads Debian sid's ``intel-ocloc`` and the libraries it
needs from the Debian mirror this machine is configured with (``apt-get download`` with a private
sources list and state folder: nothing on the system changes), unpacks them with ``dpkg -x`` and
writes an ``ocloc`` wrapper that runs it through sid's own glibc loader (IGC 2.x needs a newer
glibc than Debian 12 has). The versions below were tested; when the mirror no longer has one,
the newest it has is taken and recorded in ``manifest.json`` next to the wrapper.

Example:
    >>> sorted(TESTED)[:3]
    ['intel-ocloc', 'libc6', 'libgcc-s1']
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .codegen.intel_compiler import Toolchain, ToolchainMissingError, find_toolchain, toolchain_dir

__all__ = ["install", "TESTED", "debian_mirror"]

#: Package versions this project was tested with (Debian sid, 2026-11).
TESTED = {
    "intel-ocloc": "26.27.39122.14-1",
    "libigc2": "2.40.14-1",
    "libigdfcl2": "2.40.14-1",
    "libigdgmm12": "22.10.2+ds1-1",
    "libc6": "2.43-7",
    "libstdc++6": "16.2.0-4",
    "libgcc-s1": "16.2.0-4",
    "zlib1g": "1:1.3.dfsg+really1.3.2-4",
}
_DEFAULT_MIRROR = "http://deb.debian.org/debian"


def debian_mirror() -> str:
    """The Debian mirror of this machine's apt configuration (deb822 or one-line format)."""
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        m = re.search(r"^URIs:\s*(\S+)", path.read_text(errors="replace"), re.M)
        if m and "security" not in m.group(1):
            return m.group(1).rstrip("/")
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]:
        if path.exists():
            m = re.search(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)", path.read_text(errors="replace"), re.M)
            if m and "security" not in m.group(1):
                return m.group(1).rstrip("/")
    return _DEFAULT_MIRROR


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"xejit toolchain: {msg}", file=sys.stderr, flush=True)


def install(*, force: bool = False, quiet: bool = False) -> Toolchain:
    """Install ocloc into :func:`toolchain_dir` (``XEJIT_TOOLCHAIN_DIR``) unless one is found
    already (or ``force``); returns the toolchain. Raises :class:`ToolchainMissingError` when it
    cannot."""
    if not force:
        tc = find_toolchain(refresh=True)
        if tc is not None:
            _say(f"found {tc.describe()}", quiet)
            return tc
    dest = toolchain_dir()
    for tool in ("apt-get", "dpkg"):
        if shutil.which(tool) is None:
            raise ToolchainMissingError(f"installing Intel's compiler needs Debian's {tool}, which this machine lacks; "
                                        "install Intel's GPU driver packages (they ship ocloc) or set XEJIT_OCLOC")
    mirror = debian_mirror()
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".xejit-toolchain-", dir=dest.parent))
    try:
        for d in ("lists/partial", "cache/archives/partial", "debs", "root"):
            (work / d).mkdir(parents=True)
        (work / "sources.list").write_text(f"deb [trusted=yes] {mirror} sid main\n")
        apt = ["apt-get", "-q", "-o", f"Dir::Etc::SourceList={work / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
               "-o", f"Dir::State::Lists={work / 'lists'}/", "-o", f"Dir::Cache={work / 'cache'}/",
               "-o", "APT::Architectures=amd64", "-o", "Debug::NoLocking=1"]
        _say(f"reading Debian sid's package lists from {mirror}", quiet)
        out = subprocess.run([*apt, "update"], capture_output=True, text=True)
        if out.returncode != 0:
            raise ToolchainMissingError(f"apt-get update against {mirror} (sid) failed:\n{out.stderr[-2000:]}")
        got: dict[str, str] = {}
        for pkg, version in TESTED.items():
            r = subprocess.run([*apt, "download", f"{pkg}={version}"], cwd=work / "debs", capture_output=True, text=True)
            if r.returncode != 0:   # sid moved on: take the newest it has
                _say(f"{pkg} {version} is gone from the mirror; taking the newest", quiet)
                r = subprocess.run([*apt, "download", pkg], cwd=work / "debs", capture_output=True, text=True)
                if r.returncode != 0:
                    raise ToolchainMissingError(f"apt-get download {pkg} from {mirror} (sid) failed:\n{r.stderr[-2000:]}")
        for deb in sorted((work / "debs").glob("*.deb")):
            fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version"], capture_output=True,
                                    text=True, check=True).stdout
            meta = dict(line.split(": ", 1) for line in fields.strip().splitlines())
            got[meta["Package"]] = meta["Version"]
            subprocess.run(["dpkg", "-x", str(deb), str(work / "root")], check=True, capture_output=True)
        _say("unpacked " + ", ".join(f"{p} {v}" for p, v in sorted(got.items())), quiet)
        libdir = work / "root/usr/lib/x86_64-linux-gnu"
        binaries = sorted((work / "root/usr/bin").glob("ocloc*"))
        if not binaries or not (libdir / "ld-linux-x86-64.so.2").exists():
            raise ToolchainMissingError("the downloaded packages hold no ocloc binary or glibc loader")
        final = dest
        wrapper = work / "ocloc"
        # Paths are written for the final location: the folder is renamed into place below.
        rel_lib = final / "root/usr/lib/x86_64-linux-gnu"
        rel_bin = final / "root/usr/bin" / binaries[0].name
        wrapper.write_text(f'#!/bin/sh\nexec "{rel_lib}/ld-linux-x86-64.so.2" --library-path "{rel_lib}" '
                           f'"{rel_bin}" "$@"\n')
        wrapper.chmod(0o755)
        shutil.rmtree(work / "debs")
        shutil.rmtree(work / "cache")
        shutil.rmtree(work / "lists")
        (work / "manifest.json").write_text(json.dumps({"mirror": mirror, "suite": "sid", "packages": got}, indent=1))
        if final.exists():
            shutil.rmtree(final)
        os.replace(work, final)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    tc = find_toolchain(refresh=True)
    if tc is None:
        raise ToolchainMissingError(f"Intel's compiler was unpacked into {dest} but does not run "
                                    f"(try: {dest / 'ocloc'} --version)")
    _say(f"installed {tc.describe()}", quiet)
    return tc
