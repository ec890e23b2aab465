"""``@xejit.kernel``: specialization, IR cache, ``kernel[grid](*args, **meta)`` launch.

A kernel is specialized on each array argument's dtype, rank, memory order (row- or
column-major) and 16-byte alignment, on constexpr values, on the launch options
(num_subgroups, num_stages, grf_mode) and on the values of the module globals and closure
variables it reads (a changed global recompiles it, as in Triton); shapes, strides and scalar
values are runtime values. Grid sizes must be integers; arrays the kernel writes must be writeable.
With ``XEJIT_INTERPRET=1`` or ``@xejit.kernel(interpret=True)`` the kernel's XeTile IR runs
per workgroup in numpy on the host.

Example:
    >>> import numpy as np, xejit, xejit.language as xl
    >>> @xejit.kernel(interpret=True)
    ... def add1(x, y, BN: xl.constexpr):
    ...     n = xl.program_id(0) * BN
    ...     t = xl.load_tile(xl.init_tile(x, [0, n], [1, BN]))
    ...     xl.store_tile(xl.init_tile(y, [0, n], [1, BN]), t + 1.0)
    >>> x = np.arange(8, dtype=np.float32); y = np.zeros_like(x)
    >>> add1[(2,)](x, y, BN=4); y.tolist()
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
"""
from __future__ import annotations

import functools
import hashlib
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from . import options
from .arguments import (LAUNCH_OPTIONS, ArraySpec, array_facts, is_read_only, is_torch,  # noqa: F401
                        launch_grid, memory_order, specialize_arg, to_interpreter_value)
from .errors import XejitError, XejitTypeError, XejitValueError
from .frontend.codegen import Param, build_module
from .ir import Interpreter, print_module
from .ir.core import Module, f32, index
from .launch_plan import remember, try_launch
from .codegen.compiler import compile_kernel
from .codegen.passes.common import written_arrays
from .device_launch import compile_and_launch, resolve_target
from .errors import ArgumentValueError
from .runtime.cache import default_cache
from .runtime.host_views import numpy_view
from .runtime.usm_array import UsmArray, from_object, is_device_object

GRF_MODES = ("default", "256", "auto")


def _interpret_env() -> bool:
    return options.current().interpret


def _compile_and_launch(kernel: "Kernel", module: Module, grid: tuple[int, ...], args: list,
                        options: dict[str, Any]) -> tuple | None:
    """The device path: compile ``module`` for the current device (cached) and launch it;
    returns what :func:`xejit.device_launch.compile_and_launch` returns."""

    return compile_and_launch(kernel, module, grid, args, options)


def dependency_hash(fn: Callable) -> str:
    """Hash ``fn``'s source with the sources of the helpers and kernels it names, transitively,
    and the values of the plain constants it reads from globals or closures.

    Like Triton's cache key: a changed ``@xl.inline`` helper or global constant must not reuse
    code compiled for the old one (the on-disk cache outlives the process).
    """
    h = hashlib.sha256()
    seen: set[int] = set()

    def visit(f: Callable) -> None:
        f = getattr(f, "fn", f)  # a Kernel wraps its function
        if id(f) in seen:
            return
        seen.add(id(f))
        try:
            h.update(inspect.getsource(f).encode())
        except (OSError, TypeError):
            h.update(repr(f).encode())
        code = getattr(f, "__code__", None)
        if code is None:
            return
        scope = dict(getattr(f, "__globals__", {}))
        if f.__closure__:
            scope.update({n: c.cell_contents for n, c in zip(code.co_freevars, f.__closure__)
                          if _cell_is_set(c)})
        for name in sorted(set(code.co_names) | set(code.co_freevars)):
            if name not in scope:
                continue
            v = scope[name]
            if getattr(v, "__xejit_inline__", False) or getattr(v, "__xejit_kernel__", False):
                h.update(name.encode())
                visit(v)
            elif isinstance(v, (bool, int, float, str, tuple)) and not isinstance(v, type):
                h.update(f"{name}={v!r}".encode())

    visit(fn)
    return h.hexdigest()[:16]


def global_fingerprint(v: Any) -> str:
    """A text that stands for a global's value in the on-disk cache key: equal in every process
    for equal values (no addresses), different when the value differs in a way that changes the
    compiled code (plain data by value, helpers and kernels by their dependency hash)."""
    if isinstance(v, (bool, int, float, complex, str, bytes, type(None))):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__}({','.join(global_fingerprint(x) for x in v)})"
    if inspect.ismodule(v):
        return f"module:{v.__name__}"
    if getattr(v, "__xejit_inline__", False) or getattr(v, "__xejit_kernel__", False):
        return f"code:{dependency_hash(v)}"
    if callable(v) and hasattr(v, "__qualname__"):
        return f"callable:{getattr(v, '__module__', '')}.{v.__qualname__}"
    text = repr(v)
    if " at 0x" in text:
        return f"object:{type(v).__module__}.{type(v).__qualname__}"
    return f"{type(v).__qualname__}:{text}"


def _cell_is_set(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


class Kernel:
    """A compiled-on-demand kernel: ``kernel[grid](*args, **constexprs_and_options)``."""
    __xejit_kernel__ = True

    def __init__(self, fn: Callable, interpret: bool | None = None):
        self.fn = fn
        self.interpret = interpret
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):
            raise XejitTypeError(f"@xejit.kernel needs a Python function, got {fn!r}") from None
        self.params = list(self.signature.parameters.values())
        self.constexprs = {p.name for p in self.params if _is_constexpr_annotation(p.annotation)}
        self.cache: dict[Any, Module] = {}
        self._quick: dict[Any, tuple] = {}   # _quick_key -> (params, options, module, runtime positions)
        self._written: dict[int, tuple] = {}  # id(module) -> (module, positions of written arrays)
        self._reads: dict[int, tuple] = {}    # id(module) -> (module, the GlobalReads it was built with)
        self._plans: dict[Any, Any] = {}      # prepared launches (xejit.launch_plan)
        functools.update_wrapper(self, fn)

    @functools.cached_property
    def source_hash(self) -> str:
        """Hash of the kernel's source and of everything it may inline (see :func:`dependency_hash`).

        Computed on first use, so helpers defined after the kernel are seen."""
        return dependency_hash(self.fn)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return _GridLaunch(self, grid)

    def __call__(self, *args, **kwargs):
        raise XejitTypeError(f"launch {self.fn.__name__} with a grid: {self.fn.__name__}[grid](...)")

    # --- specialization ---------------------------------------------------------------------

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]):
        """Split a call into (params for the frontend, runtime args, options, key)."""
        options = dict(LAUNCH_OPTIONS)
        for k in list(kwargs):
            if k in LAUNCH_OPTIONS and k not in self.signature.parameters:
                options[k] = kwargs.pop(k)
        _check_options(options)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise XejitTypeError(f"{self.fn.__name__}: {e}") from None
        bound.apply_defaults()
        params, runtime, key = [], [], []
        for p in self.params:
            v = bound.arguments[p.name]
            if isinstance(v, _ConstexprBox):
                v = v.value
            if p.name in self.constexprs:
                params.append(Param(p.name, value=v))
                key.append((p.name, "constexpr", _hashable(v)))
            else:
                try:
                    spec = specialize_arg(v)
                except XejitError as e:
                    raise type(e)(f"{self.fn.__name__}: argument {p.name!r}: {e}") from None
                t = spec.ir_type() if isinstance(spec, ArraySpec) else (index if spec == "int" else f32)
                params.append(Param(p.name, t))
                runtime.append((v, spec))
                key.append((p.name, spec))
        key.append(tuple(sorted(options.items())))
        return params, runtime, options, tuple(key)

    def _module(self, params, options, key) -> Module:
        mod = self.cache.get(key)
        if mod is None or not self._globals_unchanged(mod):
            if mod is not None:   # a global it read changed: rebuilt (Triton's rule: the values
                self._reads.pop(id(mod), None)      # of used globals are part of the key)
                self._written.pop(id(mod), None)
            attrs = {"num_subgroups": options["num_subgroups"], "num_stages": options["num_stages"],
                     "grf_mode": options["grf_mode"]}
            reads: list = []
            mod = build_module(self.fn, params, attrs, global_reads=reads)
            # the values of the globals it read are part of the specialization, hence of the
            # on-disk cache key: a changed global never reuses code compiled for the old value
            mod.attributes["specialization"] = key + (("globals", tuple(sorted(
                (r.name, global_fingerprint(r.value)) for r in reads))),) if reads else key
            mod.attributes["source_hash"] = self.source_hash
            if reads:
                self._reads[id(mod)] = (mod, tuple(reads))
            self.cache[key] = mod
        return mod

    def _globals_unchanged(self, mod: Module) -> bool:
        """Whether every global / closure variable ``mod`` was built with still has its value."""
        hit = self._reads.get(id(mod))
        if hit is None or hit[0] is not mod:
            return True
        return all(r.unchanged() for r in hit[1])

    def compile_ir(self, *args, **kwargs) -> Module:
        """The verified XeTile IR module for these arguments (cached per specialization).

        Arguments may be real arrays or anything with the same dtype/rank/layout."""
        params, _, options, key = self.bind(args, kwargs)
        return self._module(params, options, key)

    def compile(self, *args, target: str | None = None, emulate: bool | None = None, **kwargs):
        """Compile for ``target`` (default: what a launch would compile for -- the target
        ``XEJIT_EMULATE`` names, emulated, else the current device's) without launching.

        Works for every target whether or not its hardware is present; the result has
        ``.asm["xetile" | "xetile-sg" | "xegpu" | "llir" | "spvasm" | "spv"]``, for Intel GPU
        targets also ``.asm["zebin" | "isa"]`` and ``.device_binary`` (Intel's compiler, built on
        first use with the options of ``grf_mode``), ``.report()`` and ``.timings``. Arguments
        may be real arrays or anything with the same dtype/rank/layout.
        """

        params, _, options, key = self.bind(args, kwargs)
        mod = self._module(params, options, key)
        if target is None:
            target, emulated = resolve_target()
            emulate = emulated if emulate is None else emulate
        return compile_kernel(mod, target, num_subgroups=options["num_subgroups"],
                              num_stages=options["num_stages"], grf_mode=options["grf_mode"],
                              emulate=bool(emulate), binary_cache=default_cache())

    def ir_text(self, *args, **kwargs) -> str:
        """The XeTile IR for these arguments as MLIR-like text."""
        return print_module(self.compile_ir(*args, **kwargs))

    # --- launch -----------------------------------------------------------------------------

    def _quick_key(self, args: tuple, kwargs: dict) -> Any:
        """A cheap key that determines the specialization of a call (dtype, strides, size-1 dims
        and 16-byte alignment of arrays; values of constexprs; kind of other scalars), or None when
        the call must take the full path (unhashable keyword values, unknown argument kinds)."""
        parts = []
        usm_type = UsmArray
        for i, a in enumerate(args):
            t = type(a)
            if i in self._constexpr_positions:
                parts.append((t, a))
            elif t is np.ndarray:   # size-1 dims matter: they decide the memory order
                parts.append((a.dtype.str, a.strides, tuple(d == 1 for d in a.shape), a.ctypes.data % 16))
            elif t is int or t is float:
                parts.append(t)
            elif is_torch(a):
                parts.append((a.dtype, a.stride(), tuple(d == 1 for d in a.shape), a.data_ptr() % 16,
                              a.device.type))
            elif t is usm_type:   # a device array's view (DLPack / SUAI / XPU)
                parts.append((a.dtype, a.strides, tuple(d == 1 for d in a.shape), a.ptr % 16, "usm"))
            else:
                return None
        try:
            key = (tuple(parts), tuple(kwargs.items()))
            hash(key)
        except TypeError:
            return None
        return key

    def _written_positions(self, mod: Module) -> tuple[int, ...]:
        """Positions (among the runtime arguments) of the arrays ``mod`` writes."""
        hit = self._written.get(id(mod))
        if hit is None or hit[0] is not mod:
            fn = mod.functions[0]
            ids = written_arrays(fn)
            hit = (mod, tuple(i for i, a in enumerate(fn.args) if id(a) in ids))
            self._written[id(mod)] = hit
        return hit[1]

    @functools.cached_property
    def _constexpr_positions(self) -> frozenset[int]:
        return frozenset(i for i, p in enumerate(self.params) if p.name in self.constexprs)

    def _device_args(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Arrays in SYCL USM memory described by a protocol (torch XPU tensors, DLPack oneAPI
        exporters, ``__sycl_usm_array_interface__`` objects) as ``UsmArray`` views (no copy);
        torch CPU tensors as numpy views where numpy has their dtype (``runtime/host_views.py``:
        then a repeated launch is a prepared one, as for numpy arrays)."""

        def conv(v, name):
            if type(v) in (np.ndarray, int, float, bool) or (is_torch(v) and v.device.type == "cpu"):
                return v
            if isinstance(v, _ConstexprBox) or not is_device_object(v):
                return v
            return from_object(v, f"{self.fn.__name__}: argument {name!r}")
        names = [p.name for p in self.params]
        args = tuple(conv(a, names[i] if i < len(names) else str(i)) for i, a in enumerate(args))
        if kwargs:
            kwargs = {k: (conv(v, k) if k in self.signature.parameters and k not in self.constexprs else v)
                      for k, v in kwargs.items()}
        if not any(isinstance(v, UsmArray) for v in (*args, *kwargs.values())):
            # (beside a device array a torch CPU tensor stays one: the mixed-device error names it)
            args = tuple(numpy_view(a) for a in args)
            if kwargs:
                kwargs = {k: (numpy_view(v) if k not in self.constexprs else v) for k, v in kwargs.items()}
        return args, kwargs

    def run(self, *args, grid: Any, **kwargs) -> None:
        if self._plans and try_launch(self, args, kwargs, grid):
            return   # a prepared launch (xejit.launch_plan): same argument signature as an earlier call
        self._run_full(args, kwargs, grid)

    def _run_full(self, args: tuple, kwargs: dict, grid: Any) -> None:
        """A launch that binds, specializes, compiles (or finds) and marshals everything."""
        if not all(type(a) is np.ndarray or type(a) is int or type(a) is float for a in args) or \
                any(k not in self.constexprs and k not in LAUNCH_OPTIONS for k in kwargs):
            args, kwargs = self._device_args(args, kwargs)
        qk = self._quick_key(args, kwargs)
        call_kwargs = dict(kwargs)   # as given: bind() takes the launch options out of kwargs
        hit = self._quick.get(qk) if qk is not None else None
        if hit is not None and id(hit[2]) in self._reads and not self._globals_unchanged(hit[2]):
            hit = None   # a global the kernel read changed: the full path rebuilds it
        if hit is None:
            params, runtime, options, key = self.bind(args, kwargs)
            mod = self._module(params, options, key)
            runtime_pos = [i for i, p in enumerate(self.params) if p.name not in self.constexprs]
            # remembered when every runtime argument came positionally (keywords: constexprs
            # and options only, which are part of the key)
            if qk is not None and all(i < len(args) for i in runtime_pos) and \
                    all(k in self.constexprs or k in LAUNCH_OPTIONS for k in kwargs):
                self._quick[qk] = (params, options, mod, runtime_pos)
            runtime_values = [v for v, _ in runtime]
        else:
            params, options, mod, runtime_pos = hit
            runtime = None
            runtime_values = [args[i] for i in runtime_pos]
        if callable(grid):
            meta = {p.name: p.value for p in params if p.is_constexpr}
            grid = grid(meta)
        grid = launch_grid(grid, self.fn.__name__)
        for i in self._written_positions(mod):
            if is_read_only(runtime_values[i]):
                name = mod.functions[0].arg_names[i]
                raise ArgumentValueError(f"{self.fn.__name__}: argument {name!r} is read-only but the kernel "
                                         f"writes it; pass a writeable array (e.g. a copy)")
        interpret = self.interpret if self.interpret is not None else _interpret_env()
        if interpret:
            if runtime is None:
                runtime = self.bind(args, kwargs)[1]
            vals = [to_interpreter_value(v, spec) for v, spec in runtime]
            Interpreter().run_grid(mod.functions[0], grid, vals)
        else:
            launched = _compile_and_launch(self, mod, grid, runtime_values, options)
            if launched is not None:
                remember(self, args, call_kwargs, mod, launched, runtime_pos, self._written_positions(mod),
                         {p.name: p.value for p in params if p.is_constexpr})


class _GridLaunch:
    """``kernel[grid]``: calling it launches (a prepared launch first, as :meth:`Kernel.run`; one
    Python frame fewer than a ``functools.partial`` of ``run``, which is paid on every launch)."""

    __slots__ = ("kernel", "grid")

    def __init__(self, kernel: Kernel, grid: Any):
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args, **kwargs) -> None:
        k = self.kernel
        if k._plans and try_launch(k, args, kwargs, self.grid):
            return
        k._run_full(args, kwargs, self.grid)


class _ConstexprBox:
    """Unused placeholder kept for constexpr(...) passed as an argument value."""
    value: Any = None


def _is_constexpr_annotation(a: Any) -> bool:
    if a is inspect.Parameter.empty:
        return False
    if isinstance(a, str):
        return a.split(".")[-1] == "constexpr"
    return getattr(a, "__name__", "") == "constexpr" or type(a).__name__ == "constexpr"


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def _check_options(o: dict[str, Any]) -> None:
    n = o["num_subgroups"]
    if n is not None and (not _is_int(n) or n < 1 or n > 64):
        raise (XejitValueError if _is_int(n) else XejitTypeError)(
            f"num_subgroups must be an int in 1..64, got {n!r}")
    if not _is_int(o["num_stages"]) or o["num_stages"] < 0:
        raise (XejitValueError if _is_int(o["num_stages"]) else XejitTypeError)(
            f"num_stages must be a non-negative int, got {o['num_stages']!r}")
    if o["grf_mode"] not in GRF_MODES:
        raise XejitValueError(f"grf_mode must be one of {GRF_MODES}, got {o['grf_mode']!r}")
    if n is not None:
        o["num_subgroups"] = int(n)
    o["num_stages"] = int(o["num_stages"])


def _is_int(x: Any) -> bool:
    """A Python or numpy integer (not a bool, not a float with an integral value)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def kernel(fn: Callable | None = None, *, interpret: bool | None = None):
    """Decorate a kernel function (``@xejit.kernel`` or ``@xejit.kernel(interpret=True)``)."""
    if fn is None:
        return lambda f: Kernel(f, interpret)
    return Kernel(fn, interpret)
