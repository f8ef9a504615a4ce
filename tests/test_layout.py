"""Tests a contributor can find: a test that needs the real Slurm cluster lives in a
``*_on_slurm.py`` file, every such file is marked ``slurm`` as a whole, and tests/ holds
tests and their helpers, not scripts (the fixture recorders live under scripts/record/).
So ``-m 'not slurm'`` (or SYNERGY_SKIP_SLURM=1) and a file name say the same thing.

Read with ast, not by collecting: a test needs the cluster when it carries the ``slurm``
marker, or asks for the ``slurm_cluster`` fixture directly or through other fixtures
(``slurm_cli``, the controller's ``env``, ...), resolved as pytest resolves them: the
test's own file first, then the nearest conftest.py above it."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT_FIXTURE = "slurm_cluster"


@dataclass(frozen=True)
class Fn:
    """A test or fixture function: where, what it asks for, whether it is marked slurm."""
    path: Path
    name: str
    line: int
    wants: tuple[str, ...]
    marked: bool
    fixture: bool


def _is_slurm_mark(node: ast.expr) -> bool:
    return "mark.slurm" in ast.unparse(node)


def _uses(dec: ast.expr) -> tuple[str, ...]:
    """The names in a ``pytest.mark.usefixtures("...")`` decorator."""
    if isinstance(dec, ast.Call) and "usefixtures" in ast.unparse(dec.func):
        return tuple(a.value for a in dec.args if isinstance(a, ast.Constant))
    return ()


def functions(path: Path) -> tuple[list[Fn], bool]:
    """A file's top-level tests and fixtures (methods of Test classes too), and whether
    its module-level ``pytestmark`` names the slurm marker."""
    tree = ast.parse(path.read_text(), str(path))
    module_marked = any(
        isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark"
                                          for t in n.targets) and _is_slurm_mark(n.value)
        for n in tree.body)
    defs: list[tuple[ast.FunctionDef, bool]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            defs.append((node, False))
        elif isinstance(node, ast.ClassDef):
            cls_marked = any(_is_slurm_mark(d) for d in node.decorator_list)
            defs += [(n, cls_marked) for n in node.body if isinstance(n, ast.FunctionDef)]
    out = []
    for fn, cls_marked in defs:
        fixture = any("fixture" in ast.unparse(d) for d in fn.decorator_list)
        if not (fixture or fn.name.startswith("test")):
            continue
        wants = tuple(a.arg for a in fn.args.args if a.arg not in ("self", "request"))
        wants += tuple(u for d in fn.decorator_list for u in _uses(d))
        marked = cls_marked or any(_is_slurm_mark(d) for d in fn.decorator_list)
        out.append(Fn(path, fn.name, fn.lineno, wants, marked, fixture))
    return out, module_marked


def slurm_needs(tests: Path) -> tuple[list[str], list[str]]:
    """(tests and fixtures outside *_on_slurm.py files that need the cluster,
    *_on_slurm.py files not marked slurm as a whole)."""
    by_file: dict[Path, tuple[list[Fn], bool]] = {
        p: functions(p) for p in sorted(tests.rglob("*.py"))
        if p.name == "conftest.py" or p.name.startswith("test_")}

    def resolve(path: Path, name: str) -> Fn | None:
        """The fixture ``name`` as a test in ``path`` sees it (None: pytest's own)."""
        for fn in by_file[path][0]:
            if fn.fixture and fn.name == name:
                return fn
        for folder in path.parents:
            conftest = folder / "conftest.py"
            if conftest in by_file and conftest != path:
                for fn in by_file[conftest][0]:
                    if fn.fixture and fn.name == name:
                        return fn
            if folder == tests:
                break
        return None

    def needs(fn: Fn, seen: frozenset[tuple[Path, str]] = frozenset()) -> bool:
        if fn.name == ROOT_FIXTURE and fn.fixture:
            return True
        if ROOT_FIXTURE in fn.wants:
            return True
        for name in fn.wants:
            dep = resolve(fn.path, name)
            if dep is not None and (dep.path, dep.name) not in seen and \
                    needs(dep, seen | {(fn.path, fn.name)}):
                return True
        return False

    misplaced, unmarked = [], []
    for path, (fns, module_marked) in by_file.items():
        where = path.relative_to(tests)
        if path.name.endswith("_on_slurm.py"):
            if not module_marked:
                unmarked.append(str(where))
            continue
        if path.name == "conftest.py":
            continue                  # shared fixtures; the tests that use them are checked
        if module_marked:
            misplaced.append(f"{where}: pytestmark = slurm")
        misplaced += [f"{where}:{fn.line} {fn.name}" for fn in fns
                      if fn.marked or needs(fn)]
    return misplaced, unmarked


def test_real_slurm_tests_live_in_on_slurm_files() -> None:
    misplaced, unmarked = slurm_needs(TESTS)
    assert misplaced == [], "move these into a *_on_slurm.py file"
    assert unmarked == [], "give these files pytestmark = pytest.mark.slurm"


def test_tests_holds_no_scripts() -> None:
    # A recorder or other script run by hand belongs under scripts/ (scripts/record/).
    scripts = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")
                     if "__main__" in p.read_text() and "run_name='__main__'" not in
                     p.read_text() and p.name != "test_import_rules.py")
    assert scripts == []


def test_the_check_finds_a_test_through_a_fixture_chain(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "conftest.py").write_text(
        "import pytest\n@pytest.fixture\ndef slurm_cluster():\n    pass\n"
        "@pytest.fixture\ndef slurm_cli(slurm_cluster):\n    pass\n")
    (tmp_path / "sub" / "conftest.py").write_text(
        "import pytest\n@pytest.fixture\ndef env(slurm_cli, tmp_path):\n    pass\n")
    (tmp_path / "sub" / "test_mixed.py").write_text(
        "import pytest\n"
        "def test_unit(tmp_path):\n    pass\n"
        "def test_via_env(env):\n    pass\n"
        "@pytest.mark.slurm\ndef test_marked():\n    pass\n"
        "@pytest.fixture\ndef env2(env):\n    pass\n"
        "@pytest.fixture\ndef env(tmp_path):\n    pass\n")     # shadows the conftest's env
    (tmp_path / "sub" / "test_x_on_slurm.py").write_text("def test_a(slurm_cli):\n    pass\n")
    misplaced, unmarked = slurm_needs(tmp_path)
    assert misplaced == ["sub/test_mixed.py:7 test_marked"]
    assert unmarked == ["sub/test_x_on_slurm.py"]
    (tmp_path / "sub" / "test_mixed.py").write_text("def test_via_env(env):\n    pass\n")
    assert slurm_needs(tmp_path)[0] == ["sub/test_mixed.py:1 test_via_env"]
