"""Session-wide: every module the tests compile for an Intel GPU target (pvc, bmg, lnl, ptl, dg2;
emulated modules are CPU modules) also goes through Intel's compiler, and a module it rejects
fails the test that compiled it. Binaries are kept per process by content hash. Every SPIR-V
module the compiler emits is checked by spirv-val (``XEJIT_VALIDATE=1``; off for users), also in
the subprocesses tests start (they inherit the environment)."""
import os

os.environ.setdefault("XEJIT_DEVICE_BUILD", "1")
os.environ.setdefault("XEJIT_VALIDATE", "1")

# Property tests draw the same examples on every run (a CI run must not fail on an example no
# earlier run drew); XEJIT_HYPOTHESIS=explore draws new ones, to look for bugs.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("fixed", derandomize=True)
_hypothesis_settings.register_profile("explore", derandomize=False)
_hypothesis_settings.load_profile("explore" if os.environ.get("XEJIT_HYPOTHESIS") == "explore" else "fixed")
