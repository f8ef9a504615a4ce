"""``synergy profile``: the profile store (import, export, show, list)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

import click

from profiler.cpulimit import QuotaUnavailable
from profiler.gpu import NvmlSampler
from profiler.harness import PointConfig, measure
from profiler.search import SearchError, SearchResult, optimistic_search

from ..controller.state import StateStore
from ..controller.status import mark_lines, suspect_lines
from ..controller.usage import CONFIRMED
from ..core import Profile, ProfileError, profiles_from_doc, profiles_to_doc
from ..dbfile import DatabaseError
from ..profiles.build import build_profile
from ..profiles.memory_model import StorageModel
from ..profiles.resolve import configured
from ..profiles.store import RESULT_META, ProfileStore, StoredProfile
from ..shipped import SHIPPED_PROFILES
from ..slurm.commands import SlurmCLI
from ..slurm.profiling_job import profiling_job_options
from ..vocabulary import KEY_RE
from .errors import BadInput, Failed, writable_file
from .options import config_or_exit
from .sbatch_cmd import SBATCH_TIMEOUT_S


def _store_path(config_path, store_path) -> Path:
    return Path(store_path or config_or_exit(config_path).profiles.store)


def _store(config_path, store_path, readonly: bool = False) -> ProfileStore:
    """The store; read-only for commands that only look (they create nothing, and a
    missing store is bad input naming the file). A --store in a directory that does not
    exist is a typo: refused, where the store used to make the directory and say nothing
    (the configured store's directory, /var/lib/synergy, is made on first use)."""
    path = _store_path(config_path, store_path)
    if store_path and not readonly and not path.parent.is_dir():
        raise BadInput(f"--store {path}: directory {path.parent} does not exist")
    return ProfileStore(path, readonly=readonly)


STORE_OPTIONS = [
    click.option("--config", "config_path", type=click.Path(dir_okay=False)),
    click.option("--store", "store_path", type=click.Path(dir_okay=False),
                 help="Profile database (default: [profiles] store)."),
]


def store_options(f):
    for opt in reversed(STORE_OPTIONS):
        f = opt(f)
    return f


@click.group("profile")
def profile() -> None:
    """Job profiles: throughput over cores/GPU x memory/GPU, keyed by profile key."""


@profile.command("run", context_settings={"ignore_unknown_options": True,
                                          "allow_interspersed_args": False})
@store_options
@click.option("--key", required=True, help="Profile key (what --profile-key names).")
@click.option("--gpus", default=1, show_default=True, type=click.IntRange(1, 64))
@click.option("--max-cpus", type=click.IntRange(1, 4096),
              help="Most cores to try (default: the allocation's, SLURM_CPUS_ON_NODE).")
@click.option("--budget-s", default=600.0, show_default=True, type=click.FloatRange(1),
              help="Wall budget for the whole profile.")
@click.option("--point-budget-s", default=60.0, show_default=True,
              type=click.FloatRange(1), help="Wall budget for one point.")
@click.option("--steps", default=30, show_default=True, type=click.IntRange(10),
              help="Measured steps per point (after warm-up).")
@click.option("--warmup", default=5, show_default=True, type=click.IntRange(0))
@click.option("--max-points", default=8, show_default=True, type=click.IntRange(2, 32))
@click.option("--dataset-gb", type=click.FloatRange(0, min_open=True),
              help="Dataset size, for the memory model (else memory-insensitive).")
@click.option("--dataset-samples", type=click.FloatRange(1),
              help="Samples per epoch (with --dataset-gb; default: the dataset's size over "
              "the bytes the command reads per sample, as measured).")
@click.option("--disk-gb-s", default=0.5, show_default=True, type=click.FloatRange(0.001))
@click.option("--mem-gb-s", default=10.0, show_default=True, type=click.FloatRange(0.001))
@click.option("--core-fraction", type=click.FloatRange(0, 1, min_open=True),
              help="Make each core of the search this fraction of a physical core, with a "
                   "CFS quota (cgroup; needs root or a delegated cgroup): measures a curve's "
                   "shape on a machine smaller than the job's.")
@click.option("--submit", is_flag=True,
              help="Submit a short, lowest-priority Slurm job that runs this profile.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the profile (model_profiles.json shape, plus measured_points and "
                   "profiling_cpu_s) to this file instead of the store: how a profiling job "
                   "that runs as its user hands its result to the controller.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(config_path, store_path, key, gpus, max_cpus, budget_s, point_budget_s, steps,
            warmup, max_points, dataset_gb, dataset_samples, disk_gb_s, mem_gb_s, core_fraction,
            submit, out, fmt, command) -> None:
    """Profile a training COMMAND: measure its throughput at core counts chosen by
    optimistic search (most cores first, halve while within 10%, refine where it drops),
    model its memory sensitivity, and store the profile under KEY.

    The command reports its steps through profiler.progress (or $SYNERGY_PROGRESS_FILE)
    and sizes its workers from $SYNERGY_PROFILE_CPUS. Run it inside an allocation, or
    with --submit. Nothing is stored unless every measured point succeeded.

    \b
      synergy profile run --key res18 --gpus 1 --max-cpus 12 -- python train.py
    """

    if not KEY_RE.match(key):
        raise click.BadParameter("use 1-64 of A-Z a-z 0-9 _ . : -", param_hint="--key")
    # Where the result goes is checked before minutes of measuring.
    store = None
    if out is not None:
        writable_file(out)
    elif not submit:
        store = _store(config_path, store_path)
    if submit:
        me = ["--key", key, "--gpus", str(gpus), "--budget-s", str(budget_s),
              "--steps", str(steps), "--warmup", str(warmup)]
        if max_cpus:
            me += ["--max-cpus", str(max_cpus)]
        if dataset_gb:
            me += ["--dataset-gb", str(dataset_gb), "--disk-gb-s", str(disk_gb_s),
                   "--mem-gb-s", str(mem_gb_s)]
        if dataset_samples:
            me += ["--dataset-samples", str(dataset_samples)]
        _submit(config_path, store_path, key, gpus, budget_s, max_cpus, me, command)
        return
    cores = max_cpus or int(os.environ.get("SLURM_CPUS_ON_NODE") or os.cpu_count() or 1)
    per_gpu_max = max(1, cores // gpus)
    point = PointConfig(warmup_steps=warmup, steps=steps, budget_s=point_budget_s)
    try:
        # NVML opened once for the run: each point reads the GPUs every half second.
        with NvmlSampler() as probe:
            res = optimistic_search(lambda k: measure(list(command), k * gpus, point, probe,
                                                      core_fraction),
                                    per_gpu_max, max_points=max_points, budget_s=budget_s)
    except QuotaUnavailable as exc:
        raise Failed(f"--core-fraction: {exc}") from None
    except SearchError as exc:
        raise Failed(f"profile of {key} not stored: {exc}") from None
    read_per_sample = _read_bytes_per_sample(res)
    dataset_gb, dataset_samples, memory_note = _dataset(dataset_gb, dataset_samples,
                                                        read_per_sample)
    storage = StorageModel(dataset_gb, disk_gb_s, mem_gb_s) if dataset_gb else None
    curve = {k: m.samples_per_s for k, m in res.points.items()}
    prof = build_profile(key, curve, gpus, storage=storage, samples_per_epoch=dataset_samples)
    _keep(prof, res, curve, out, store, read_per_sample, dataset_gb, dataset_samples)
    if fmt == "json":
        click.echo(json.dumps({"key": key, "curve": curve, "measured_points": len(res.points),
                               "repeats": res.repeats, "profiling_cpu_s": round(res.cpu_s, 2),
                               "wall_s": round(res.wall_s, 2),
                               "read_bytes_per_sample": read_per_sample,
                               "dataset_gb": dataset_gb, "samples_per_epoch": dataset_samples,
                               "ideal": {"cpus_per_gpu": prof.ideal.cpus,
                                         "mem_gb_per_gpu": prof.ideal.mem_gb},
                               "gpu": res.points[max(res.points)].gpu}))
    else:
        _print_profile(key, res, prof, memory_note)


def _dataset(dataset_gb: float | None, dataset_samples: float | None,
             read_per_sample: float | None) -> tuple[float | None, float | None, str]:
    """The dataset's size and samples per epoch for the memory model, and a note on how
    they were found: without --dataset-samples, the size over the bytes the command read
    per sample; nothing read per sample makes the job memory-insensitive."""
    if not dataset_gb or dataset_samples:
        return dataset_gb, dataset_samples, ""
    if read_per_sample and read_per_sample >= 1:
        samples = dataset_gb * 1e9 / read_per_sample
        return dataset_gb, samples, (f"{samples:,.0f} samples per epoch "
                                     f"({read_per_sample:,.0f} bytes read per sample)")
    return None, None, "no data read per sample after warm-up: memory-insensitive"


def _print_profile(key: str, res: SearchResult, prof: Profile, memory_note: str) -> None:
    click.echo(f"profiled {key}: {len(res.points)} points in {res.wall_s:.1f} s, "
               f"{res.cpu_s:.1f} CPU-s ({res.repeats} repeated)")
    for k, m in sorted(res.points.items()):
        click.echo(f"  {k:>3} cores/GPU: {m.samples_per_s:10.2f} samples/s")
    if memory_note:
        click.echo(f"  memory model: {memory_note}")
    click.echo(f"  ideal: {prof.ideal.cpus} cores/GPU, {prof.ideal.mem_gb:g} GB/GPU")


def _keep(prof, res, curve: dict[int, float], out: Path | None, store, read_per_sample,
          dataset_gb, dataset_samples) -> None:
    """The profile to ``--out`` (with how it was measured) or into the store."""
    if out is not None:
        result = {**profiles_to_doc({prof.key: prof}), RESULT_META: {
            "measured_points": len(res.points), "profiling_cpu_s": round(res.cpu_s, 3),
            "wall_s": round(res.wall_s, 3), "curve": curve,
            "read_bytes_per_sample": read_per_sample, "dataset_gb": dataset_gb,
            "samples_per_epoch": dataset_samples}}
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=1) + "\n")
        tmp.replace(out)
    else:
        assert store is not None
        store.put(prof, measured_points=len(res.points), profiling_cpu_s=res.cpu_s,
                  source="profiler")


def _submit(config_path, store_path, key: str, gpus: int, budget_s: float,
            max_cpus: int | None, run_args: list[str], command: tuple[str, ...]) -> None:
    """``profile run --submit``: the same run, as a profiling job of its own."""
    # [slurm]'s commands (its slurm.conf, bin directory), with sbatch's own timeout.
    cli = SlurmCLI.for_config(config_or_exit(config_path).slurm, timeout_s=SBATCH_TIMEOUT_S)
    cli.binary("sbatch")     # "sbatch not found" before anything is written
    script = Path(tempfile.mkdtemp(prefix="synergy-profile-")) / "run.sh"
    script.write_text('#!/bin/sh\nexec "$@"\n')
    script.chmod(0o755)
    me = [sys.executable, "-m", "synergy_slurm.cli.main", "profile", "run"]
    if store_path:
        me += ["--store", str(store_path)]
    if config_path:
        me += ["--config", str(config_path)]
    opts = profiling_job_options(key, gpus, budget_s,
                                 max(1, max_cpus // gpus) if max_cpus else None)
    try:
        out = cli.run("sbatch", ["--parsable", *opts, str(script), *me, *run_args, "--",
                                 *command])
    finally:
        shutil.rmtree(script.parent, ignore_errors=True)   # sbatch sent its copy
    click.echo(f"submitted profiling job {out.strip()}")


def _read_bytes_per_sample(res) -> float | None:
    """The median over measured points of the bytes read per sample (None: unknown)."""
    vals = [m.read_bytes_per_sample for m in res.points.values()
            if m.read_bytes_per_sample is not None]
    return round(statistics.median(vals), 1) if vals else None


@profile.command("import")
@store_options
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def import_cmd(config_path, store_path, file: Path) -> None:
    """Import every profile of a model_profiles.json-shaped FILE."""
    try:
        doc = json.loads(file.read_text())
    except ValueError as exc:
        raise BadInput(f"{file}: not JSON ({exc})") from None
    try:
        profiles_from_doc(doc)   # a bad file is rejected before the store is touched
    except (ProfileError, ValueError) as exc:
        raise BadInput(f"{file}: {exc}") from None
    keys = _store(config_path, store_path).import_doc(doc)
    click.echo(f"imported {len(keys)} profiles: {', '.join(keys)}")


@profile.command("export")
@store_options
@click.option("--key", "keys", multiple=True, help="Only these keys (repeatable).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here instead of stdout.")
def export_cmd(config_path, store_path, keys, out) -> None:
    """Export profiles in the model_profiles.json shape."""
    if out:
        writable_file(out)
    doc = _store(config_path, store_path, readonly=True).export_doc(list(keys) or None)
    text = json.dumps(doc, indent=1)
    if out:
        out.write_text(text + "\n")
    else:
        click.echo(text)


@profile.command("show")
@store_options
@click.argument("key")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def show_cmd(config_path, store_path, key, fmt) -> None:
    """One profile: its points, how many were measured, and what profiling cost; and what
    the closed loop saw of jobs with that key (the controller's state, when readable):
    each job's cores and memory used against what it was given, and the users for whom
    the key is marked suspect.

    KEY is a profile key, or KEY@GPU_TYPE for one measured on nodes of that GPU type
    (``synergy profile list`` shows both forms)."""
    path = _store_path(config_path, store_path)
    known = _resolved(config_path, store_path)
    got = ProfileStore(path, readonly=True).get(key) if path.exists() else None
    if got is None and key in known.profiles:
        # The profiles file's (or the shipped one's): what the hook and controller use.
        got = StoredProfile(known.profiles[key], 0, 0.0, 0.0, known.sources[key], "")
    source = known.sources.get(key)      # None: not among the profiles in use
    evidence, marks = _evidence(config_path, key.split("@")[0])
    if got is None and not evidence and not marks:
        raise BadInput(f"no profile {key!r} ({known.describe()}): its jobs get the "
                       "GPU-proportional share; synergy profile list shows the known keys")
    where = path if source == "store" else known.file
    if fmt == "json":
        click.echo(json.dumps({**(got.show() if got else {"key": key}),
                               "resolved_from": source, "path": str(where) if source
                               else None, "usage": evidence, "suspects": marks}))
        return
    if got is None:
        click.echo(f"{key}: not in the profile store nor the profiles file "
                   f"({known.describe()}): its jobs get the GPU-proportional share")
    else:
        trust = config_or_exit(config_path).profiles.trust
        click.echo(f"{key}: from the {source} ({where}); shapes {known.used_by(key, trust)}"
                   if source else f"{key}: in the store, not in use ({known.describe()})")
        _show_profile(key, got)
    if evidence:
        click.echo("\nwhat running jobs used (per GPU; the closed loop, [usage]):")
        for r in evidence:
            click.echo(f"  job {r['job_id']:<8} {r['user']:<12} cores {r['used_cpus']:5.2f} of "
                       f"{r['granted_cpus']:<3} memory {r['peak_mem_gb']:7.2f} of "
                       f"{r['granted_mem_gb']:g} GB over {r['observed_s'] / 60:.0f} min")
    for line in mark_lines(marks):
        click.echo(line)


def _evidence(config_path, key: str) -> tuple[list[dict], list[dict]]:
    """The closed loop's records for ``key`` from the controller's state (none where it
    cannot be read: no controller yet, or not readable by this user)."""
    try:
        cfg = config_or_exit(config_path)
        path = Path(cfg.controller.state_db)
        if not path.exists():
            return [], []
        state = StateStore(path, readonly=True)
        return state.usage(key), state.suspects(key)
    except (DatabaseError, OSError, sqlite3.Error):
        return [], []


def _show_profile(key: str, got) -> None:
    p = got.profile
    where = f"measured on {p.gpu_type} GPUs; " if p.gpu_type else ""
    where += f"measured for {got.owner} ([profiles] trust); " if got.owner else ""
    ideal = (f"ideal {p.ideal.cpus} cores/GPU, {p.ideal.mem_gb:g} GB/GPU" if p.ideal
             else "no ideal (insensitive)")
    cost = (f"{got.measured_points} points measured, {got.profiling_cpu_s:.1f} CPU-s"
            if got.measured_points else "not measured here")
    click.echo(f"{key}: {where}{ideal}; {cost}")
    click.echo("cores/GPU \\ GB/GPU " + " ".join(f"{m:>8g}" for m in p.mem_grid))
    for c, row in zip(p.cpu_grid, p.throughput, strict=True):
        click.echo(f"{c:>18g} " + " ".join(f"{v:8.3g}" for v in row))


@profile.command("list")
@store_options
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def list_cmd(config_path, store_path, fmt) -> None:
    """The profiles the hook and the controller use, as they resolve them: the profiles
    file ([profiles] file: "file", or "shipped" where it is the paper's profiles synergy
    ships), overlaid with the profile store ("store": measured profiles win), and whose
    jobs each may shape ([profiles] trust). A key that is not listed is unknown: its jobs
    get the GPU-proportional share."""
    known = _resolved(config_path, store_path)
    if fmt == "json":
        click.echo(json.dumps([_listed(known, slot, trust) for slot, trust in
                               _slots(known, config_path)]))
        return
    click.echo(known.describe(), err=True)
    rows = [_listed(known, slot, trust) for slot, trust in _slots(known, config_path)]
    if not rows:
        click.echo("no profiles: every job gets the GPU-proportional share (synergy "
                   "profile import/run fill the store; [profiles] file names a file)",
                   err=True)
        return
    click.echo(f"{'key':<24} {'source':<8} {'ideal c/GPU':>11} {'GB/GPU':>7}  shapes")
    for r in rows:
        ideal = r["ideal"] or {}
        click.echo(f"{r['key']:<24} {r['source']:<8} "
                   f"{ideal.get('cpus_per_gpu', '-'):>11} "
                   f"{ideal.get('mem_gb_per_gpu', '-'):>7}  {r['shapes']}")


def _resolved(config_path, store_path):
    """What :func:`profiles.resolve.configured` gives the hook and the controller (with
    --store: that store instead of [profiles] store). A --store whose directory does not
    exist is a typo."""
    path = _store_path(config_path, store_path)
    if store_path and not path.parent.is_dir():
        raise BadInput(f"--store {path}: directory {path.parent} does not exist")
    known = configured(config_or_exit(config_path).profiles.file, path, SHIPPED_PROFILES)
    if known.problems:
        # What cannot be read is not shown as "no profiles": the hook and the controller
        # would miss the same ones.
        raise BadInput("; ".join(known.problems))
    return known


def _slots(known, config_path) -> list[tuple[str, str]]:
    trust = config_or_exit(config_path).profiles.trust
    return [(slot, trust) for slot in sorted(known.profiles)]


def _listed(known, slot: str, trust: str) -> dict:
    p = known.profiles[slot]
    return {"key": slot, "source": known.sources.get(slot, "store"),
            "file": known.file if known.sources.get(slot) != "store" else None,
            "owner": known.owners.get(slot) or None, "shapes": known.used_by(slot, trust),
            "ideal": {"cpus_per_gpu": p.ideal.cpus, "mem_gb_per_gpu": p.ideal.mem_gb}
            if p.ideal else None}


@profile.command("suspects")
@click.option("--config", "config_path", type=click.Path(dir_okay=False))
@click.option("--clear", "clear_key", metavar="KEY",
              help="Trust KEY again: drop its mark and the use behind it (for --user, or "
              "for every user). Needs write access to the controller's state.")
@click.option("--confirm", "confirm_key", metavar="KEY",
              help="Record that an admin checked the mark of KEY for --user and keeps it.")
@click.option("--user", help="The user whose mark to clear or confirm.")
def suspects_cmd(config_path, clear_key, confirm_key, user) -> None:
    """Profile keys the closed loop marked suspect ([usage]): a user's jobs with the key
    used far less than they were given, so that user's later jobs with it are capped at
    what was seen used (never below proportional). Lists them; --clear lifts a mark (the
    key is trusted until new use says otherwise), --confirm keeps it as reviewed."""
    if clear_key and confirm_key:
        raise click.UsageError("--clear or --confirm, not both")
    if confirm_key and not user:
        raise click.UsageError("--confirm needs --user (a mark is per user)")
    cfg = config_or_exit(config_path)
    path = Path(cfg.controller.state_db)
    if not path.exists():
        raise Failed(f"no controller state at {path}: the controller has not run yet")
    writing = bool(clear_key or confirm_key)
    state = StateStore(path, readonly=not writing)
    if clear_key:
        n = state.clear_suspect(clear_key, user)
        who = f"user {user}" if user else "every user"
        if not n:
            raise BadInput(f"no mark of {clear_key!r} for {who}")
        click.echo(f"cleared {n} mark(s) of {clear_key} for {who}: its jobs get their "
                   "profile's share again")
        return
    if confirm_key:
        if not any(s["user"] == user for s in state.suspects(confirm_key)):
            raise BadInput(f"no mark of {confirm_key!r} for user {user}")
        state.mark_suspect(confirm_key, user, status=CONFIRMED)
        click.echo(f"{confirm_key} for user {user}: confirmed")
        return
    lines = suspect_lines(state)
    if not lines:
        click.echo("no suspect profile keys")
    for line in lines:
        click.echo(line.lstrip("\n"))
