"""What synergy would do with a submission: the one path behind ``synergy hook explain``
and ``synergy-sbatch --explain``.

It reads what sbatch would read (the script's ``#SBATCH`` lines, then the command line up
to the script), applies the hook's rules with the table and kill switch on disk, and adds
what the controller knows of the job's profile (the profiles file and the store, read-only;
their errors are reported, not hidden). Nothing is submitted, nothing is created.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Config
from ..vocabulary import MB_PER_GB, comment_profile_key
from .export import table_path
from .rules import HookDecision, Submission, decide
from .sbatch_args import script_directives, script_index, submission_from_args
from .table import DISABLE_NAME, HookTable, TableError, parse_table


@dataclass
class Explanation:
    hook: HookDecision
    controller: dict[str, Any]
    sbatch: list[str]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"hook": self.hook.as_dict(), "controller": self.controller,
                "sbatch": self.sbatch, "notes": self.notes}

    def lines(self) -> list[str]:
        h = self.hook
        out = [f"hook: {'manages' if h.managed else 'passes'} this job ({h.reason})"]
        if h.managed:
            out.append(f"  cores/GPU: {_value(h.cpus_per_gpu, self.controller['asked_cpus'])}")
            mem = _value(h.mem_per_gpu_mb, self.controller["asked_mem"], " MB")
            out.append(f"  memory/GPU: {mem}")
            out.append(self._held() if h.hold else "  not held: Slurm may start it at once")
        ctl = self.controller
        if not h.managed:
            out.append("controller: leaves it as submitted")
        elif ctl["profile_known"]:
            line = (f"controller: profile {ctl['profile_key']}: ideal "
                    f"{ctl['ideal_cpus_per_gpu']} cores/GPU, {ctl['ideal_mem_gb_per_gpu']:g} "
                    "GB/GPU")
            if ctl["speedup_at_ideal"] is not None:
                line += f", {ctl['speedup_at_ideal']:.2f}x over proportional when it fits"
            out.append(line)
        else:
            out.append("controller: no known profile: GPU-proportional share")
            if ctl["profile_key"]:
                out.append(f"  to profile {ctl['profile_key']}: synergy profile run --key "
                           f"{ctl['profile_key']} --out {ctl['profile_key']}.json -- YOUR "
                           "TRAINING COMMAND, in an allocation (user guide, Measuring "
                           "your job's profile), then give the JSON to your admins; or "
                           "the controller profiles it where [profiling] auto is on")
        if h.managed and ctl.get("profiles_from"):
            out.append(f"  profiles: {ctl['profiles_from']}")
        out += [f"note: {n}" for n in self.notes]
        return out


    def _held(self) -> str:
        """For how long a held job waits: the controller's next round (it shapes and
        releases it), or the fail-safe's release when the controller is gone."""
        c = self.controller
        return (f"  held until the controller shapes and releases it: at its next round "
                f"(every {c['interval_s']:g} s), then it waits for room as any job; if "
                f"the controller stops, the fail-safe releases it once its table is "
                f"{c['max_age_s']} s old")


def _value(set_by_hook: int | None, asked: str | None, unit: str = "") -> str:
    if set_by_hook:
        return f"{set_by_hook}{unit} (set by the hook)"
    if asked:
        return f"{asked} (as you asked)"
    return "the partition's default (as submitted)"


def read_submission(args: list[str], uid: int, script_text: str | None = None
                    ) -> tuple[Submission, list[str]]:
    """The hook's view of ``sbatch ARGS``: the script's #SBATCH lines (of ``script_text``
    when given, e.g. a rendered template on stdin), then the command line's options up to
    the script (its own arguments are not sbatch's)."""
    end = script_index(args)
    if script_text is None:
        script_text = read_script(args[end]) if end is not None else ""
    directives = script_directives(script_text)
    options = directives + list(args[:end] if end is not None else args)
    return submission_from_args(options, uid=uid), options


def read_script(path: str) -> str:
    """A batch script's text for its #SBATCH lines ('' for anything but a readable regular
    file: sbatch reports it when it is submitted; a FIFO would block the reader)."""
    if not os.path.isfile(path):
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(1 << 20)
    except OSError:
        return ""


def explain(cfg: Config, args: list[str], uid: int, now: float,
            table_file: Path | None = None, script_text: str | None = None) -> Explanation:
    sub, _ = read_submission(args, uid, script_text)
    path = table_file or table_path(cfg.hook)
    table, err, notes = _table(path)
    decision = decide(table, sub, now, disabled=(path.parent / DISABLE_NAME).exists(),
                      table_error=err)
    key = comment_profile_key(sub.comment)
    view, more = controller_view(cfg, key, table)
    view["interval_s"] = cfg.controller.interval_s
    view["max_age_s"] = cfg.hook.max_age_s
    view["asked_cpus"] = _per_gpu(sub.cpus_per_tres)
    view["asked_mem"] = _per_gpu(sub.mem_per_tres) or ("--mem" if sub.mem_per_node else None)
    return Explanation(decision, view, list(args), notes + more)


def _per_gpu(tres: str) -> str | None:
    return tres.rsplit(":", 1)[-1] if tres else None


def _table(path: Path) -> tuple[HookTable | None, str | None, list[str]]:
    try:
        return parse_table(path.read_text()), None, []
    except OSError:
        return None, f"no hook table at {path}", [
            f"no hook table at {path}: the hook passes every job until the controller "
            "runs in enforce mode (it writes the table every round), or an admin runs "
            "'synergy hook export'"]
    except TableError as exc:
        return None, f"{path}: {exc}", []


def controller_view(cfg: Config, key: str | None, table: HookTable | None
                    ) -> tuple[dict[str, Any], list[str]]:
    """What the controller knows of a profile key (the profiles file, then the store),
    without Slurm. The proportional share is the managed nodes' per GPU, from the table."""
    from ..core import PerGpu
    from ..profiles.resolve import configured

    notes: list[str] = []
    prof = None
    source = None
    if key:
        known = configured(cfg.profiles.file, cfg.profiles.store)
        notes += known.problems
        prof, source = known.profiles.get(key), known.describe()
    view: dict[str, Any] = {"profile_key": key, "profile_known": False,
                            "ideal_cpus_per_gpu": None, "ideal_mem_gb_per_gpu": None,
                            "speedup_at_ideal": None, "profiles_from": source}
    if prof is None or prof.ideal is None:
        return view, notes
    view.update(profile_known=True, ideal_cpus_per_gpu=prof.ideal.cpus,
                ideal_mem_gb_per_gpu=prof.ideal.mem_gb)
    if table is not None:
        fair = PerGpu(table.node_cpus // table.node_gpus,
                      table.node_mem_mb / table.node_gpus / MB_PER_GB)
        view["speedup_at_ideal"] = round(prof.speedup(prof.ideal, fair), 3)
    return view, notes
