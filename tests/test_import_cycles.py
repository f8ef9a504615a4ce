"""No import circle among synergy's modules: a circle makes what a module holds depend on
which of the two was imported first, and hides a layering the import rules do not see
(they check parts, not the modules inside one). Imports inside functions count too: a lazy
import only postpones the circle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "synergy_slurm"

# Module -> module edges allowed although they close a circle. Each entry is a debt with its
# reason; a test below fails once the edge is gone, so the entry cannot outlive the circle.
# Imports a circle may go through, each with why; none today (the two simulators, which
# imported each other, are apart: sim.simulate runs the one a config names).
ALLOWED_EDGES: set[tuple[str, str]] = set()


def module_names(package: Path) -> dict[Path, str]:
    """Every module file and its dotted name (a package by its __init__)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        out[path] = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return out


def edges_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of ours this file imports, anywhere in it: ``from pkg import sub`` names
    the submodule where ``sub`` is one, else the package."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                if sub in known:
                    out.add(sub)
                elif mod in known:
                    out.add(mod)
    out.discard(name)
    return out


def import_graph(package: Path) -> dict[str, set[str]]:
    names = module_names(package)
    known = set(names.values())
    return {name: edges_of(path, name, known) for path, name in names.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        group.append(top)
                        if top == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_circle() -> None:
    graph = import_graph(PACKAGE)
    for src, dst in ALLOWED_EDGES:
        graph[src].discard(dst)
    assert circles(graph) == [], "import circles (break them, do not allow-list them)"


def test_every_allowed_edge_still_exists() -> None:
    graph = import_graph(PACKAGE)
    stale = sorted(e for e in ALLOWED_EDGES if e[1] not in graph[e[0]])
    assert stale == [], "these imports are gone: remove them from ALLOWED_EDGES"


def test_the_check_sees_a_circle_through_a_lazy_import(tmp_path: Path) -> None:
    # The check itself: a circle closed inside a function, and one through a package's
    # __init__, are both found; a one-way import is not a circle.
    pkg = tmp_path / "synergy_slurm"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import thing\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from .sub import d\n")
    (pkg / "sub" / "__init__.py").write_text("from .d import x\n")
    (pkg / "sub" / "d.py").write_text("from .. import sub\n")
    (pkg / "e.py").write_text("import synergy_slurm.a\n")
    assert circles(import_graph(pkg)) == [["synergy_slurm.a", "synergy_slurm.b"],
                                          ["synergy_slurm.sub", "synergy_slurm.sub.d"]]
