"""A content-addressed cache of compiled artifacts, in memory and on disk.

Entries live under ``XEJIT_CACHE_DIR`` (default ``~/.cache/xejit``) as ``<key[:2]>/<key>``.
Each file is ``MAGIC | sha256(payload) | payload``: a truncated or corrupted file fails the
check, is deleted and reported as a miss, so it is rebuilt and never loaded. Writes go to a
temporary file in the same directory and are published with ``os.replace``, which is atomic,
so concurrent processes see either no entry or a whole one. The checksum proves an entry is the
bytes that were written, not that its reader can use them: readers validate the payload (e.g.
``xejit.device_launch.usable_entry`` checks the JSON, the ABI and the SPIR-V header and
instruction stream) and :meth:`Cache.discard` an entry they cannot use, which is then rebuilt.

Example:
    >>> import tempfile
    >>> c = Cache(tempfile.mkdtemp())
    >>> k = key_of("kernel source", "pvc", 3)
    >>> c.get(k) is None
    True
    >>> c.put(k, b"spirv"); c.get(k)
    b'spirv'
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

from .. import options

MAGIC = b"XEJITC1\n"
_DIGEST = 32


def default_dir() -> Path:
    return options.current().cache_dir


def key_of(*parts: object) -> str:
    """A stable hex key from the ``repr`` of each part (strings, numbers, tuples of them)."""
    h = hashlib.sha256()
    for p in parts:
        data = p if isinstance(p, bytes) else repr(p).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


class Cache:
    """Bytes by key, in memory and on disk; see the module docstring for the file format."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = Path(directory) if directory is not None else default_dir()
        self._memory: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = self.corrupt = 0

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / key

    def get(self, key: str) -> bytes | None:
        with self._lock:
            if key in self._memory:
                self.hits += 1
                return self._memory[key]
        path = self._path(key)
        try:
            blob = path.read_bytes()
        except OSError:
            self.misses += 1
            return None
        payload = blob[len(MAGIC) + _DIGEST:]
        if blob[:len(MAGIC)] != MAGIC or blob[len(MAGIC):len(MAGIC) + _DIGEST] != hashlib.sha256(payload).digest():
            self.corrupt += 1
            self.misses += 1
            try:
                path.unlink()
            except OSError:
                pass
            return None
        with self._lock:
            self._memory[key] = payload
            self.hits += 1
        return payload

    def put(self, key: str, payload: bytes) -> None:
        with self._lock:
            self._memory[key] = payload
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        except OSError:
            # A read-only or full disk costs only the disk layer; the memory layer still works.
            try:
                os.unlink(tmp)
            except (OSError, UnboundLocalError):
                pass

    def discard(self, key: str) -> None:
        """Forget an entry its user found unusable (well-formed for the cache, but not what the
        reader expects): removed from memory and disk and counted in ``corrupt``, so the next
        ``get`` is a miss and the rebuilt entry replaces it."""
        with self._lock:
            self._memory.pop(key, None)
            self.corrupt += 1
        try:
            self._path(key).unlink()
        except OSError:
            pass

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()


_default: Cache | None = None


def default_cache() -> Cache:
    """The process-wide cache (its directory is read from ``XEJIT_CACHE_DIR`` when first used)."""
    global _default
    if _default is None or _default.directory != default_dir():
        _default = Cache()
    return _default
