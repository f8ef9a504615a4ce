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
import shutil
from dataclasses import dataclass
from pathlib import Path

SCRIPT = "job_submit.lua"
MODULE = "synergy.lua"
# The first line of each file synergy writes: what tells a file of ours from a site's.
SCRIPT_MARK = "-- synergy-slurm: job_submit.lua for a site without rules of its own"
MODULE_MARK = "synergy-slurm's job_submit rules, as a Lua module"


def join_line(conf_dir: Path) -> str:
    """The line a site's job_submit.lua ends with (before its final return) to run
    synergy's rules after its own."""
    return f'dofile("{conf_dir / MODULE}").chain()'


@dataclass(frozen=True)
class Step:
    """One file of the install: ``write`` (new or ours), ``keep`` (the site's, left as it
    is), ``replace`` (the site's, replaced with ``force``: backed up first) or ``refuse``
    (the site's or unknown, and no ``force``)."""

    path: Path
    action: str
    why: str
    source: Path | None = None
    diff: str = ""

    @property
    def changes(self) -> bool:
        return self.action in ("write", "replace")


def plan(conf_dir: Path, script_src: Path, module_src: Path, force: bool) -> list[Step]:
    """What installing into ``conf_dir`` would do, the module first."""
    return [_module_step(conf_dir / MODULE, module_src, force),
            _script_step(conf_dir, script_src, force)]


def _module_step(dst: Path, src: Path, force: bool) -> Step:
    if not dst.exists():
        return Step(dst, "write", "new", src)
    old = _text(dst)
    if old == src.read_text():
        return Step(dst, "keep", "already this version", src)
    if MODULE_MARK in old[:400]:
        return Step(dst, "write", "an earlier synergy.lua: updated", src, _diff(dst, old, src))
    if force:
        return Step(dst, "replace", "not synergy's: replaced (--force), backed up", src,
                    _diff(dst, old, src))
    return Step(dst, "refuse", "exists and is not synergy's (give --force to replace it, "
                "with a backup)", src, _diff(dst, old, src))


def _script_step(conf_dir: Path, src: Path, force: bool) -> Step:
    dst = conf_dir / SCRIPT
    if not dst.exists():
        return Step(dst, "write", "new: synergy's rules alone", src)
    old = _text(dst)
    if old == src.read_text():
        return Step(dst, "keep", "already this version", src)
    if old.startswith(SCRIPT_MARK):
        return Step(dst, "write", "an earlier synergy job_submit.lua: updated", src,
                    _diff(dst, old, src))
    if f'{MODULE}").chain()' in old:
        return Step(dst, "keep", "the site's own, already joined to synergy's rules", src)
    if force:
        return Step(dst, "replace", "the site's own: replaced (--force), backed up; its "
                    "rules no longer run", src, _diff(dst, old, src))
    return Step(dst, "keep", "the site's own: left as it is; add this line at its end, "
                f"before its final return: {join_line(conf_dir)}", src)


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
        assert s.source is not None
        if s.action == "replace":
            backup = s.path.with_name(f"{s.path.name}.bak-{stamp}")
            shutil.copy2(s.path, backup)
            backups.append(backup)
        tmp = s.path.with_name(s.path.name + ".new")
        shutil.copyfile(s.source, tmp)
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


def _diff(dst: Path, old: str, src: Path) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True),
                                        src.read_text().splitlines(keepends=True),
                                        str(dst), f"{dst} (synergy's)", n=2))
