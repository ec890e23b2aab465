"""The package's import graph (docs/compiler.md, "A map of the package"): no import cycles, no
module importing a layer above its own, and no function-local import of an xejit module except
``xejit.torch_ops`` (it needs torch, an optional dependency)."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "xejit"

# (module prefix, layer): a module may import its own layer and the ones below.
LAYERS = [
    ("xejit.errors", 0), ("xejit.options", 0), ("xejit._version", 0),
    ("xejit.ir", 1),
    ("xejit.language", 2), ("xejit.frontend", 2), ("xejit.codegen", 2), ("xejit.toolchain", 2),
    ("xejit.runtime", 3),
    ("xejit.arguments", 4), ("xejit.launch_plan", 4), ("xejit.device_launch", 4), ("xejit.cpu_simd_gemm", 4),
    ("xejit.jit", 5),
    ("xejit.autotuner", 6),
    ("xejit.kernels", 7),
    ("xejit.matmul", 8),
    ("xejit.attention", 9),
    ("xejit.torch_ops", 10),
    ("xejit.__main__", 11), ("xejit", 11),
]
LAZY_ALLOWED = {"xejit.torch_ops"}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def layer(mod: str) -> int:
    best = max((p for p, _ in LAYERS if mod == p or mod.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def imports(mod: str) -> list[tuple[str, bool, int]]:
    """(imported xejit module, inside a function?, line) for every import in ``mod``."""
    path = MODULES[mod]
    tree = ast.parse(path.read_text())
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                out.extend((a.name, in_function, child.lineno) for a in child.names if a.name.startswith("xejit"))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    pkg = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(pkg + ([base] if base else []))
                if base.startswith("xejit"):
                    for a in child.names:
                        name = f"{base}.{a.name}"
                        out.append((name if name in MODULES else base, in_function, child.lineno))
            visit(child, inner)

    visit(tree, False)
    return [(m, f, n) for m, f, n in out if m in MODULES and m != mod]


GRAPH = {m: imports(m) for m in MODULES}


def test_no_upward_imports():
    bad = [f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)}) at line {n}"
           for m, edges in GRAPH.items() for t, lazy, n in edges
           if layer(t) > layer(m) and not (lazy and t in LAZY_ALLOWED)]
    assert not bad, "\n".join(bad)


def test_no_function_local_imports_of_xejit_modules():
    bad = [f"{m}:{n} imports {t} inside a function" for m, edges in GRAPH.items()
           for t, lazy, n in edges if lazy and t not in LAZY_ALLOWED]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    edges = {m: {t for t, lazy, _ in e if not (lazy and t in LAZY_ALLOWED)} for m, e in GRAPH.items()}
    # the package __init__ imports everything; a submodule importing ``xejit`` itself is a cycle
    state: dict[str, int] = {}
    cycles = []

    def dfs(v, stack):
        state[v] = 1
        stack.append(v)
        for w in edges[v]:
            if state.get(w) == 1:
                cycles.append(stack[stack.index(w):] + [w])
            elif w not in state:
                dfs(w, stack)
        stack.pop()
        state[v] = 2

    for m in sorted(edges):
        if m not in state:
            dfs(m, [])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("mod", ["xejit.jit", "xejit.ir.core", "xejit.codegen.lowering_base"])
def test_the_graph_is_read(mod):
    """The test above can fail: these modules do import others."""
    assert GRAPH[mod]
