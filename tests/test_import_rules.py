"""The import rules of docs/ARCHITECTURE.md, checked on the code: which part of synergy may
import which (and which third-party packages the pure core and the profiler may use), so
the table cannot drift from the code again. Imports inside functions count too."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Part -> the parts of ours it may import (itself always). The same table is in
# docs/ARCHITECTURE.md; a test below checks that they agree.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "vocabulary": set(),
    "dbfile": set(),
    "owndir": set(),
    "shipped": set(),
    "userfiles": set(),
    "config": {"core"},
    "core": set(),
    "decide": {"core", "vocabulary"},
    "profiles": {"core", "dbfile", "vocabulary"},
    "sim": {"core", "decide", "profiles"},
    "whatif": {"core", "decide", "owndir", "profiles", "sim", "slurm", "vocabulary"},
    "slurm": {"core", "vocabulary", "config", "owndir"},
    "site": {"core"},
    "devcluster": {"shipped", "slurm", "config", "site", "owndir", "hook"},
    "hook": {"core", "decide", "profiles", "config", "vocabulary", "slurm"},
    "controller": {"core", "decide", "profiles", "slurm", "hook", "config", "vocabulary",
                   "dbfile", "owndir", "userfiles"},
    "templates": {"shipped"},
    "emulate": {"core", "profiles", "slurm", "vocabulary"},
    "demo": {"core", "owndir", "slurm", "sim", "vocabulary"},
    "cli": {"*"},
    "__main__": {"cli"},
}
# What every part may import: synergy's error classes (each with its exit code).
ANYONE = {"errors"}
# Third-party packages a part may import (the standard library is always allowed).
THIRD_PARTY: dict[str, set[str]] = {
    "core": {"numpy", "highspy"},
    "profiler": {"psutil", "pynvml"},
}


def part_of(path: Path, package: Path) -> str:
    rel = path.relative_to(package)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def imports(path: Path, root: Path) -> list[tuple[str, int, bool]]:
    """(module imported, line, is ours) for every import in the file."""
    rel = path.relative_to(root)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, a.name.split(".")[0] == root.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel.parts[:-1])[:len(rel.parts) - node.level] or []
                mod = ".".join([root.name, *base, *([node.module] if node.module else [])])
                out.append((mod, node.lineno, True))
            elif node.module:
                out.append((node.module, node.lineno, node.module.split(".")[0] == root.name))
    return out


def violations(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        part = part_of(path, root) if root.name == "synergy_slurm" else root.name
        for mod, line, ours in imports(path, root):
            where = f"{path.relative_to(root.parent)}:{line}"
            top = mod.split(".")[0]
            if ours and root.name != "synergy_slurm":
                continue                      # the profiler's own modules
            if ours:
                target = mod.split(".")[1] if "." in mod else part
                allowed = ALLOWED.get(part, set()) | ANYONE
                if target != part and "*" not in allowed and target not in allowed:
                    found.append(f"{where}: {part} imports {target} ({mod})")
            elif top == "synergy_slurm" or (root.name == "profiler" and top == "synergy_slurm"):
                found.append(f"{where}: {part} imports {mod}")
            elif top not in sys.stdlib_module_names and part in THIRD_PARTY \
                    and top not in THIRD_PARTY[part]:
                found.append(f"{where}: {part} imports third-party {top}")
    return found


def test_every_import_follows_the_rules():
    assert violations(REPO / "synergy_slurm") == []
    assert violations(REPO / "profiler") == []


def test_the_rules_catch_a_forbidden_import(tmp_path):
    """The check fails when a forbidden import is added (a copy of the tree with one)."""
    import shutil

    copy = tmp_path / "synergy_slurm"
    shutil.copytree(REPO / "synergy_slurm", copy,
                    ignore=shutil.ignore_patterns("__pycache__", "data"))
    bad = copy / "core" / "profile.py"
    bad.write_text(bad.read_text() + "\n\ndef _x():\n    from ..slurm import model  # noqa\n")
    sim = copy / "sim" / "engine.py"
    sim.write_text(sim.read_text() + "\nimport synergy_slurm.controller.daemon  # noqa\n")
    found = violations(copy)
    assert any("core imports slurm" in f for f in found), found
    assert any("sim imports controller" in f for f in found), found


def test_the_architecture_doc_states_the_same_rules():
    doc = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    for part, allowed in ALLOWED.items():
        names = "everything" if "*" in allowed else (", ".join(sorted(allowed)) or "nothing")
        assert f"| `{part}` | {names} |" in doc, (part, names)
