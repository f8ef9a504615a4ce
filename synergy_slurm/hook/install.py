"""Installing the hook beside slurm.conf without ever overwriting a site's own rules.

Two files: ``synergy.lua`` (synergy's rules, a module) and ``job_submit.lua`` (what
slurmctld runs). A site without a job_submit.lua gets synergy's two-line one. A site that
has its own keeps it: the install says which line joins synergy's rules to it (at its end),
and replaces it only when told to (``force``), keeping a backup and showing the difference.
A file synergy wrote before (it carries synergy's first line) is synergy's to update.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

SCRIPT = "job_submit.lua"
MODULE = "synergy.lua"
# The first line of each file synergy writes: what tells a file of ours from a site's.
SCRIPT_MARK = "-- synergy-slurm: job_submit.lua for a site without rules of its own"
MODULE_MARK = "synergy-slurm's job_submit rules, as a Lua module"
_SAFE_DIR = re.compile(r"^/[\w.\-/]*$")


def join_line(conf_dir: Path, state_dir: Path) -> str:
    """The line a site's job_submit.lua ends with (before its final return) to run
    synergy's rules after its own, reading the table in ``state_dir``."""
    return f'dofile("{conf_dir / MODULE}").chain("{state_dir}")'


def check_dir(path: Path, what: str) -> None:
    """A directory that may be written into Lua source slurmctld runs: absolute (slurmctld
    does not run where the admin typed the command) and letters, digits, . _ - / only."""
    if not _SAFE_DIR.fullmatch(str(path)):
        raise ValueError(f"{what} {str(path)!r}: must be an absolute path of letters, digits "
                         "and . _ - / only (it is written into job_submit.lua)")


# The line that joins synergy's rules: dofile(<module>).chain(<state dir or nothing>), the
# module named by a string or, in the shipped script, by `here .. "/synergy.lua"`.
_CHAIN = re.compile(r'dofile\(\s*(?:"(?P<module>[^"]*)"|here\s*\.\.\s*"/synergy\.lua")\s*\)'
                    r'\s*\.chain\(\s*(?:"(?P<state>[^"]*)")?\s*\)')


def table_dir(script: str, script_dir: Path) -> Path | None:
    """Where the hook that ``script`` (a job_submit.lua in ``script_dir``) runs reads its
    table: the state directory its chain() line names, else the module's directory (a
    bare chain()). None when no line joins synergy's rules (a Lua comment does not)."""
    for line in script.splitlines():
        code = line.split("--", 1)[0]
        m = _CHAIN.search(code)
        if m is None:
            continue
        if m.group("state"):
            return Path(m.group("state"))
        module = m.group("module")
        return Path(module).parent if module else script_dir
    return None


def installed_table_dir(conf_dir: Path) -> Path | None:
    """Where the hook installed beside slurm.conf in ``conf_dir`` reads its table (None:
    no job_submit.lua there, unreadable, or not joined to synergy's rules)."""
    try:
        return table_dir((conf_dir / SCRIPT).read_text(errors="replace"), conf_dir)
    except OSError:
        return None


def render_script(template: str, state_dir: Path) -> str:
    """The shipped stand-alone job_submit.lua, naming the state directory (the template's
    bare ``chain()`` reads the table beside the module)."""
    check_dir(state_dir, "state directory")
    if ".chain()" not in template:
        raise RuntimeError("the shipped job_submit.lua has no chain() call")
    return template.replace(".chain()", f'.chain("{state_dir}")', 1)


@dataclass(frozen=True)
class Step:
    """One file of the install: ``write`` (new or ours), ``keep`` (the site's, left as it
    is), ``replace`` (the site's, replaced with ``force``: backed up first) or ``refuse``
    (the site's or unknown, and no ``force``)."""

    path: Path
    action: str
    why: str
    text: str = ""
    diff: str = ""

    @property
    def changes(self) -> bool:
        return self.action in ("write", "replace")


def plan(conf_dir: Path, state_dir: Path, script_src: Path, module_src: Path,
         force: bool) -> list[Step]:
    """What installing into ``conf_dir`` would do, the module first. The stand-alone
    script reads the hook table in ``state_dir``."""
    check_dir(conf_dir, "--conf-dir")
    script = render_script(script_src.read_text(), state_dir)
    return [_module_step(conf_dir / MODULE, module_src.read_text(), force),
            _script_step(conf_dir, state_dir, script, force)]


def _module_step(dst: Path, new: str, force: bool) -> Step:
    if not dst.exists():
        return Step(dst, "write", "new", new)
    old = _text(dst)
    if old == new:
        return Step(dst, "keep", "already this version", new)
    if MODULE_MARK in old[:400]:
        return Step(dst, "write", "an earlier synergy.lua: updated", new, _diff(dst, old, new))
    if force:
        return Step(dst, "replace", "not synergy's: replaced (--force), backed up", new,
                    _diff(dst, old, new))
    return Step(dst, "refuse", "exists and is not synergy's (give --force to replace it, "
                "with a backup)", new, _diff(dst, old, new))


def _script_step(conf_dir: Path, state_dir: Path, new: str, force: bool) -> Step:
    dst = conf_dir / SCRIPT
    if not dst.exists():
        return Step(dst, "write", "new: synergy's rules alone", new)
    old = _text(dst)
    if old == new:
        return Step(dst, "keep", "already this version", new)
    if old.startswith(SCRIPT_MARK):
        return Step(dst, "write", "an earlier synergy job_submit.lua: updated", new,
                    _diff(dst, old, new))
    line = join_line(conf_dir, state_dir)
    bare = f'dofile("{conf_dir / MODULE}").chain()'     # the table beside the module
    if line in old or (bare in old and Path(state_dir) == Path(conf_dir)):
        return Step(dst, "keep", "the site's own, already joined to synergy's rules", new)
    if f'{MODULE}").chain(' in old:
        return Step(dst, "keep", "the site's own, joined to synergy's rules with another "
                    f"state directory: make its line {line}", new)
    if force:
        return Step(dst, "replace", "the site's own: replaced (--force), backed up; its "
                    "rules no longer run", new, _diff(dst, old, new))
    return Step(dst, "keep", "the site's own: left as it is; add this line at its end, "
                f"before its final return: {line}", new)


def apply(steps: list[Step], stamp: str) -> list[Path]:
    """Carry out the steps (each file replaced atomically; a replaced file of the site's
    first copied to ``FILE.bak-STAMP``). Returns the backups made. Nothing is written if
    any step refuses."""
    if any(s.action == "refuse" for s in steps):
        return []
    backups = []
    for s in steps:
        if not s.changes:
            continue
        if s.action == "replace":
            backup = s.path.with_name(f"{s.path.name}.bak-{stamp}")
            shutil.copy2(s.path, backup)
            backups.append(backup)
        tmp = s.path.with_name(s.path.name + ".new")
        tmp.write_text(s.text)
        tmp.chmod(0o644)
        tmp.replace(s.path)
    script = next((s.path for s in steps if s.path.name == SCRIPT), None)
    if script is not None and script.exists() and any(s.changes for s in steps):
        # job_submit/lua reloads the script when its mtime changes: a new module alone
        # would wait for the next `scontrol reconfigure`.
        os.utime(script)
    return backups


def _text(path: Path) -> str:
    return path.read_text(errors="replace")


def _diff(dst: Path, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True),
                                        new.splitlines(keepends=True),
                                        str(dst), f"{dst} (synergy's)", n=2))
