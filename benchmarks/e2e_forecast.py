#!/usr/bin/env python3
"""synergy whatif's forecasts for a site that never ran synergy, checked against real runs.

1. A seeded mix of emulated training jobs that carry no synergy tag and really use known
   shares of their cores and known memory (synergy.emulate --use-cores / --use-mem-mb): an
   image model keeps its one core busy, a language model asks for three cores per GPU and
   keeps a tenth of them busy, a speech model half. It runs on plain Slurm, on one node of
   2 GPUs and 4 cores (1 core per GPU by default): few enough jobs at a time to run truly
   on this machine's 2 cores, so what accounting records is what the jobs did.
2. ``synergy whatif`` reads that window's ``sacct --json`` export (no -X: the steps carry
   the use): each job's measured core use against its truth, each key's class against its
   truth, and the three forecasts.
3. The same mix runs again with the hook and the controller enforcing (TUNE, no
   requeues, a round every second) and each key's profile stored (the class's model the
   job emulates, as 'synergy profile run' would have measured it); the jobs now name their
   key (synergy-sbatch --profile-key). Its export gives the real gain: the plain window's
   mean JCT over the synergy window's, by Slurm's own records (submission to end).

The guaranteed forecast should be at or below the real gain, the expected within 15% of
it. The last line printed is one JSON object with ``guaranteed``, ``expected`` (forecast
gains in mean JCT), ``real``, ``use_error_max`` (largest relative error of a job's measured
core use) and ``class_accuracy`` (share of GPU-hours whose key's class was right).

    python benchmarks/e2e_forecast.py --json [--slurm 26.05] [--out DIR] [--seed 3]
    python benchmarks/e2e_forecast.py --replay-only --out DIR   # from the saved exports

Needs root. About 2 x 5 minutes. --out (default /tmp/synergy-e2e-forecast) keeps both
windows' exports as plain.json and synergy.json, the cluster (cluster.toml), the profiles
(profiles.json) and the truth (runs.json).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import e2e_whatif  # the figures from Slurm's records, as the whatif benchmark reads them
from arrivals import plain_then_synergy, submit_at_arrivals
from click.testing import CliRunner

from synergy_slurm import devcluster
from synergy_slurm.cli.main import main as synergy
from synergy_slurm.devcluster import local_spec
from synergy_slurm.devcluster.releases import RELEASES
from synergy_slurm.profiles import load_profiles
from synergy_slurm.site import load_site
from synergy_slurm.slurm.commands import SlurmCLI
from synergy_slurm.slurm.sacct import parse_history
from synergy_slurm.slurm.sacct_usage import parse_usage
from synergy_slurm.whatif.infer import key_of

SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference"
SCHED_S = 5.0
CONTROLLER_INTERVAL_S = 1.0
USER = "root"
CLUSTER = """# benchmarks/e2e_forecast.py: one node, 2 GPUs, 4 cores (1 core + 62.5 GB per GPU)
[[nodes]]
name = "f"
count = 1
cpus = 4
mem_gb = 125
gpus = 2

[[partitions]]
name = "gpu"
nodes = ["f"]
default = true
def_cpu_per_gpu = 1
def_mem_gb_per_gpu = 62.5
"""


@dataclass(frozen=True)
class Kind:
    """One kind of job of the mix: its class, the model it emulates (the class's median,
    what whatif's expected forecast replays it with), its name, the cores per GPU it asks
    for (0: the partition's default), the share of them it keeps busy, its memory."""

    cls: str
    model: str
    name: str
    cpus_per_gpu: int
    use_cores: float
    use_mem_mb: int


KINDS = (Kind("image", "res18", "resnet-train", 0, 0.95, 600),
         Kind("language", "lstm", "lstm-lm", 3, 0.10, 300),
         Kind("speech", "m5", "asr-m5", 0, 0.50, 400))
WEIGHTS = (2, 4, 2)


@dataclass(frozen=True)
class Job:
    job_id: int
    kind: str           # a Kind's name
    arrival: float      # seconds after the first submission
    seconds: float      # wall seconds at the share it asks for


def mix(n: int, seed: int) -> list[Job]:
    """n jobs, image : language : speech = 2 : 4 : 2, 60-110 s each at what they ask for,
    arrivals 10 s apart on average."""
    rng = random.Random(seed)
    kinds = [k.name for k, w in zip(KINDS, WEIGHTS, strict=True) for _ in range(w)]
    jobs, t = [], 0.0
    for i in range(n):
        jobs.append(Job(i + 1, kinds[i % len(kinds)] if i < len(kinds) else rng.choice(kinds),
                        t, rng.uniform(60, 110)))
        t += rng.expovariate(1 / 10)
    order = list(range(len(jobs)))
    rng.shuffle(order)              # the kinds' order, not their arrivals
    return [Job(jobs[i].job_id, jobs[o].kind, jobs[i].arrival, jobs[i].seconds)
            for i, o in enumerate(order)]


def kind(name: str) -> Kind:
    return next(k for k in KINDS if k.name == name)


def key(k: Kind) -> str:
    return f"{USER}.{k.name}"


def profiles_doc(paper: Path) -> dict:
    """The paper's profiles, plus each kind's model under its key (what profiling it
    would have stored)."""
    doc = json.loads(paper.read_text())
    for k in KINDS:
        doc["models"][key(k)] = doc["models"][k.model]
    return doc


def run_mix(cli: SlurmCLI, jobs: list[Job], profiles, profiles_path: Path, work: Path,
            tag: str, tagged: bool) -> None:
    """Submit each job at its arrival, wait until all are gone."""
    state = work / tag
    state.mkdir()

    def sbatch_args(j: Job) -> list[str]:
        k = kind(j.kind)
        prof = profiles[k.model]
        cpus = k.cpus_per_gpu or 1
        iterations = prof.iterations_in(j.seconds, cpus, 62.5)
        cmd = (f"exec {sys.executable} -m synergy_slurm.emulate --profiles {profiles_path} "
               f"--model {key(k)} --iterations {iterations} --scale 1 "
               f"--use-cores {k.use_cores} --use-mem-mb {k.use_mem_mb} "
               f"--state {state}/job{j.job_id}.state")
        shape = [f"--cpus-per-gpu={k.cpus_per_gpu}"] if k.cpus_per_gpu else []
        comment = [f"--comment=synergy:profile={key(k)}"] if tagged else []
        return ["--gpus=1", "--time=30", *shape, *comment, f"--job-name={k.name}", "-o",
                str(state / f"job{j.job_id}.out"), "--wrap", cmd]

    submit_at_arrivals(cli, jobs, sbatch_args)


def export(cli: SlurmCLI, n: int, path: Path, since: float) -> Path:
    """The window's jobs with their steps (no -X), as an admin would save them for
    synergy whatif --from."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 1))
    names = {k.name for k in KINDS}
    for _ in range(30):     # slurmdbd hears of the last end a moment later
        doc = json.loads(cli.run("sacct", ["-a", "-D", "--json", "-S", start]))
        parsed, _ = parse_history(json.dumps(doc))
        ids = {j.job_id for j in parsed if j.name in names and j.submit >= since - 1}
        done = [j for j in parsed if j.job_id in ids and j.end]
        if len(ids) >= n and len(done) == len(ids):
            break
        time.sleep(1)
    doc["jobs"] = [r for r in doc["jobs"] if r.get("job_id") in ids]
    path.write_text(json.dumps(doc))
    return path


def runs(args, out: Path) -> dict:
    """The two real runs; their exports written to out/plain.json and out/synergy.json."""
    (out / "cluster.toml").write_text(CLUSTER)
    (out / "profiles.json").write_text(json.dumps(profiles_doc(SHARED / "model_profiles.json")))
    profiles_path = out / "profiles.json"
    profiles = load_profiles(profiles_path)
    site = load_site(out / "cluster.toml")
    jobs = mix(args.jobs, args.seed)
    spec = local_spec(Path("/tmp/synergy-bench-forecast"), port=18517, hook=True,
                      slurm=args.slurm, binds=(str(out),), accounting=True, site=site,
                      enforce_memory=bool(devcluster.memory_cgroups()))
    work = Path(tempfile.mkdtemp(prefix="synergy-forecast-"))
    work.chmod(0o755)
    devcluster.down(devcluster.existing_spec(spec.state_dir))
    _, spec = devcluster.up(spec, timeout_s=90)
    version = devcluster.release_info(spec).get("version", "?")
    cfg_doc = {
        "slurm": {"conf": str(spec.conf_path), "bindir": str(spec.bindir)
                  if spec.bindir.is_dir() else ""},
        "hook": {"dir": str(spec.etc), "state_dir": str(spec.etc), "partitions": ["gpu"],
                 "default_partition": "gpu", "override_user_shape": True},
        "profiles": {"file": str(profiles_path), "store": str(work / "profiles.db")},
        "controller": {"mode": "enforce", "allocator": "tune",
                       "interval_s": CONTROLLER_INTERVAL_S, "state_db": str(work / "state.db"),
                       "audit_log": str(work / "audit.jsonl"), "requeue_budget": 0}}
    try:
        cli = devcluster.slurm_cli(spec, timeout_s=60)
        walls = plain_then_synergy(
            cfg_doc, lambda phase: run_mix(cli, jobs, profiles, profiles_path, work, phase,
                                           tagged=phase == "synergy"),
            lambda phase, since: export(cli, len(jobs), out / f"{phase}.json", since))
        plain_wall, synergy_wall = walls["plain"], walls["synergy"]
        shutil.copy(work / "audit.jsonl", out / "audit.jsonl")
    finally:
        devcluster.down(spec)
        shutil.rmtree(work, ignore_errors=True)
    return {"slurm": version, "jobs": len(jobs), "seed": args.seed,
            "plain_run_wall_s": round(plain_wall, 1),
            "synergy_run_wall_s": round(synergy_wall, 1)}


def whatif(history: Path, out: Path, meta: dict) -> dict:
    res = CliRunner().invoke(synergy, [
        "whatif", "--from", str(history), "--cluster", str(out / "cluster.toml"),
        "--profiles", str(SHARED / "model_profiles.json"),
        "--round-seconds", str(SCHED_S), "--controller-interval", str(CONTROLLER_INTERVAL_S),
        "--slurm-release", meta["slurm"], "--requeue-budget", "0",
        "--assume-mix", "20,70,10", "--format", "json", "--no-progress"])
    if res.exit_code != 0:
        raise SystemExit(f"whatif failed: {res.output}")
    return json.loads(res.output.strip().splitlines()[-1])


def report(meta: dict, out: Path) -> dict:
    plain = out / "plain.json"
    doc = whatif(plain, out, meta)
    history, _ = parse_history(plain.read_text())
    usage = parse_usage(plain.read_text()).jobs
    errors, right, hours = [], 0.0, 0.0
    classes = {k["key"]: k["class"] for k in doc["keys_to_profile"]}
    for j in history:
        k = kind(j.name)
        use = usage.get(j.job_id)
        got = use.core_use if use is not None else None
        errors.append(abs(got - k.use_cores) / k.use_cores if got is not None else 1.0)
        h = j.gpus * (j.end - j.start) / 3600
        hours += h
        right += h * (classes.get(key_of(j)) == k.cls)
    real = (e2e_whatif.real(plain)["jct_mean_h"]
            / e2e_whatif.real(out / "synergy.json")["jct_mean_h"])
    fc = doc["forecast"]
    return {**meta, "real": round(real, 3), "guaranteed": fc["guaranteed"],
            "expected": fc["expected"], "optimistic": fc["optimistic"],
            "guaranteed_at_or_below_real": fc["guaranteed"] <= real,
            "expected_error": round((fc["expected"] - real) / real, 4),
            "use_error_max": round(max(errors), 4),
            "class_accuracy": round(right / hours, 4) if hours else 0.0,
            "classes": classes, "fidelity": doc["fidelity"],
            "profiles": doc["forecast_detail"]["expected"]["profiles"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--slurm", default="system", choices=RELEASES)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("/tmp/synergy-e2e-forecast"))
    ap.add_argument("--replay-only", action="store_true",
                    help="compare again from the exports a previous run saved in --out")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    meta_path = args.out / "runs.json"
    if not args.replay_only:
        meta = runs(args, args.out)
        meta["truth"] = [asdict(k) for k in KINDS]
        meta_path.write_text(json.dumps(meta))
    res = report(json.loads(meta_path.read_text()), args.out)
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>30}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
