"""Session-wide: every module the tests compile for an Intel GPU target (pvc, bmg, lnl, ptl, dg2;
emulated modules are CPU modules) also goes through Intel's compiler, and a module it rejects
fails the test that compiled it. Binaries are kept per process by content hash."""
import os

os.environ.setdefault("XEJIT_DEVICE_BUILD", "1")
