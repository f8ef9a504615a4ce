#!/usr/bin/env python3
"""synergy whatif checked against real runs on the dev cluster with accounting.

1. A seeded job mix (emulated training jobs naming their profile, as synergy-sbatch
   submits them; Poisson arrivals; 1-8 GPUs; time limits of 60 or 5 minutes, a few jobs
   that run past a 1-minute limit and a few that fail) runs on plain Slurm.
2. ``synergy whatif`` reads that window's sacct export: its plain replay should match what
   really happened (makespan, mean JCT), and its synergy replay is the forecast.
3. The same mix runs again with the hook and the controller (enforce, TUNE, no requeues,
   a round every second); its export gives the real synergy run, which the forecast of
   step 2 should match. ``synergy whatif`` over that window also replays it (its
   "synergy" replay of a synergy window should match what happened there too).

Every real figure is Slurm's own record: a job's JCT runs from its submission to its end
(sacct's Submit and End), the makespan from the first submission to the last end.

    python benchmarks/e2e_whatif.py [--jobs 30] [--seed 7,11] [--slurm 26.05] \\
        [--cluster mixed] [--out DIR] [--json]
    python benchmarks/e2e_whatif.py --replay-only --out DIR     # from the saved exports
    python benchmarks/e2e_whatif.py --runs-only --out DIR       # only the runs and exports

Needs root. About 2 x 6 minutes a seed. The two windows' ``sacct --json`` exports are kept
in --out (default /tmp/synergy-e2e-whatif; --out/seedN with several seeds) as plain.json
and synergy.json, with runs.json
(the run's settings), the controller's audit.jsonl and each job's output (outputs/PHASE/),
so the comparison can be run again without the runs.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from arrivals import plain_then_synergy, submit_at_arrivals
from click.testing import CliRunner

from synergy_slurm import devcluster
from synergy_slurm.cli.main import main as synergy
from synergy_slurm.core import PerGpu
from synergy_slurm.devcluster import local_spec
from synergy_slurm.devcluster.releases import RELEASES
from synergy_slurm.profiles import load_profiles
from synergy_slurm.sim.jobsets import CLASSES
from synergy_slurm.site import DEFAULT_SITE, Site, load_site
from synergy_slurm.slurm.commands import SlurmCLI
from synergy_slurm.slurm.sacct import parse_history
from synergy_slurm.vocabulary import synergy_tags
from synergy_slurm.whatif import build_replay

SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference"
# The dev cluster's Slurm cadence: sched_interval = bf_interval = 5 s.
SCHED_S = 5.0
# The controller's round in the synergy run (whatif is told the same).
CONTROLLER_INTERVAL_S = 1.0


@dataclass(frozen=True)
class BenchJob:
    job_id: int
    model: str
    arrival: float          # seconds after the first submission
    seconds: float          # wall seconds of work at the partition's proportional share
    gpus: int
    partition: str = ""     # "": the cluster's default partition
    gpu_type: str = ""      # a typed request (--gpus=TYPE:N)
    time_min: int = 60
    outcome: str = "complete"   # complete | timeout (work far past a 1-minute limit) | fail


def mix(profiles, n: int, seed: int, site: Site) -> list[BenchJob]:
    """n jobs: half image models (CPU-hungry), 30% language, 20% speech; 1-8 GPUs; 60-180 s
    at the proportional share; arrivals 8 s apart on average. A second generator (so the
    first draws stay those of earlier versions of this mix) gives each job its limit (a
    quarter 5 minutes, else 60), partition and GPU type on a site with several, and makes
    jobs 4 and 19 of every 30 time out and 11 and 26 fail."""
    rng = random.Random(seed)
    extra = random.Random(seed + 1000)
    parts = [p.name for p in site.partitions]
    types = sorted({k.gpu_type for k in site.kinds if k.gpu_type})
    jobs, t = [], 0.0
    for i in range(n):
        cls = rng.choices(list(CLASSES), weights=(50, 30, 20))[0]
        model = rng.choice([m for m in CLASSES[cls] if m in profiles])
        gpus = rng.choices((1, 2, 4, 8), weights=(50, 20, 20, 10))[0]
        seconds = rng.uniform(60, 180)
        time_min = 5 if extra.random() < 0.25 else 60
        partition = extra.choice(parts) if len(parts) > 1 else ""
        gpu_type = ""
        if len(types) > 1 and partition == _widest(site) and extra.random() < 0.5:
            gpu_type = extra.choice(types)
        outcome = {4: "timeout", 11: "fail"}.get(i % 15, "complete")
        if outcome == "timeout":
            seconds, time_min = seconds * 8, 1
        jobs.append(BenchJob(i + 1, model, t, seconds, gpus, partition, gpu_type, time_min,
                             outcome))
        t += rng.expovariate(1 / 8)
    return jobs


def _widest(site: Site) -> str:
    """The partition over the most node kinds (where typed requests make sense)."""
    return max(site.partitions, key=lambda p: len(p.kinds)).name


def fair_share(site: Site, partition: str) -> PerGpu:
    part = next((p for p in site.partitions if p.name == partition), site.default_partition)
    return PerGpu(part.def_cpu_per_gpu, part.def_mem_gb_per_gpu)


def run_mix(cli: SlurmCLI, jobs: list[BenchJob], profiles, profiles_path: Path, site: Site,
            work: Path, tag: str) -> None:
    """Submit each job at its arrival, wait until all are gone."""
    state = work / tag
    state.mkdir()

    def sbatch_args(j: BenchJob) -> list[str]:
        prof = profiles[j.model]
        fair = fair_share(site, j.partition)
        iterations = prof.iterations_in(j.seconds, fair.cpus, fair.mem_gb)
        cmd = (f"{sys.executable} -m synergy_slurm.emulate --profiles {profiles_path} "
               f"--model {j.model} --iterations {iterations} --scale 1 "
               f"--state {state}/job{j.job_id}.state")
        cmd = "sleep 20; exit 3" if j.outcome == "fail" else f"exec {cmd}"
        gpus = f"{j.gpu_type}:{j.gpus}" if j.gpu_type else str(j.gpus)
        where = [f"--partition={j.partition}"] if j.partition else []
        return [f"--gpus={gpus}", f"--time={j.time_min}", *where,
                f"--comment=synergy:profile={j.model}", f"--job-name=w{j.job_id}", "-o",
                str(state / f"job{j.job_id}.out"), "--wrap", cmd]

    submit_at_arrivals(cli, jobs, sbatch_args)


def export(cli: SlurmCLI, names: set[str], path: Path, since: float) -> Path:
    """The run's jobs, as an admin would save them for synergy whatif --from: the records
    sacct has of jobs with our names submitted since ``since`` (epoch seconds), their
    steps nested (no -X: the batch step says how a job spread over nodes was laid out)."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 1))
    for _ in range(30):     # slurmdbd hears of the last end a moment later
        doc = json.loads(cli.run("sacct", ["-a", "-D", "--json", "-S", start]))
        parsed, _ = parse_history(json.dumps(doc))
        ids = {j.job_id for j in parsed if j.name in names and j.submit >= since - 1}
        mine = [r for r in doc["jobs"] if r.get("job_id") in ids]
        done = [j for j in parsed if j.job_id in ids and j.end]
        if len(ids) >= len(names) and len(done) == len(ids):
            break
        time.sleep(1)
    doc["jobs"] = mine
    path.write_text(json.dumps(doc))
    return path


def check_ran(jobs: list[BenchJob], path: Path) -> None:
    """Stop when a window's jobs did not run as the mix says (a job meant to complete
    ended otherwise: e.g. exit 127 when the jobs cannot find this checkout's Python in a
    release's root): its figures would be about failed jobs, not scheduling."""
    ran, _ = parse_history(path.read_text())
    state = {j.name: j.state for j in ran}
    wrong = {f"w{j.job_id}": state.get(f"w{j.job_id}", "missing") for j in jobs
             if j.outcome == "complete" and state.get(f"w{j.job_id}") != "COMPLETED"}
    if wrong:
        raise SystemExit(f"{path}: {len(wrong)} jobs meant to complete did not "
                         f"({', '.join(f'{n} {s}' for n, s in sorted(wrong.items())[:6])}); "
                         f"their outputs are in the run's work directory")


def keep_outputs(work: Path, out: Path) -> None:
    """Each job's output, kept in ``out``/outputs/PHASE: its first line says the share
    the job read on its node, where a run slower than its shape gives is explained (the
    export holds only a spread job's totals: #42's w19)."""
    for phase in ("plain", "synergy"):
        dest = out / "outputs" / phase
        dest.mkdir(parents=True, exist_ok=True)
        for f in (work / phase).glob("job*.out"):
            shutil.copyfile(f, dest / f.name)


def runs(args, profiles_path: Path, plain: Path, synergy_run: Path) -> dict:
    """The two real runs; their sacct exports written to ``plain`` and ``synergy_run``."""
    profiles = load_profiles(profiles_path)
    site = load_site(args.cluster) if args.cluster else DEFAULT_SITE
    jobs = mix(profiles, args.jobs, args.seed, site)
    # --slot N: a cluster of its own (state directory, ports) so runs can go side by side.
    spec = local_spec(Path(f"/tmp/synergy-bench-whatif{args.slot or ''}"),
                      port=18417 + 1000 * args.slot, hook=True,
                      slurm=args.slurm, binds=(str(SHARED),), accounting=True,
                      site=site if args.cluster else None)
    work = Path(tempfile.mkdtemp(prefix="synergy-whatif-"))
    work.chmod(0o755)
    devcluster.down(devcluster.existing_spec(spec.state_dir))
    _, spec = devcluster.up(spec, timeout_s=90)
    version = devcluster.release_info(spec).get("version", "?")
    parts = [p.name for p in site.partitions]
    cfg_doc = {
        "slurm": {"conf": str(spec.conf_path), "bindir": str(spec.bindir)
                  if spec.bindir.is_dir() else ""},
        "hook": {"dir": str(spec.etc), "state_dir": str(spec.etc), "partitions": parts,
                 "default_partition": site.default_partition.name},
        "profiles": {"file": str(profiles_path), "store": str(work / "profiles.db")},
        "controller": {"mode": "enforce", "allocator": "tune",
                       "interval_s": CONTROLLER_INTERVAL_S, "state_db": str(work / "state.db"),
                       "audit_log": str(work / "audit.jsonl"), "requeue_budget": 0}}
    names = {f"w{j.job_id}" for j in jobs}
    try:
        cli = devcluster.slurm_cli(spec, timeout_s=60)
        files = {"plain": plain, "synergy": synergy_run}
        walls = plain_then_synergy(
            cfg_doc, lambda phase: run_mix(cli, jobs, profiles, profiles_path, site, work,
                                           phase),
            lambda phase, since: check_ran(jobs, export(cli, names, files[phase], since)))
        plain_wall, synergy_wall = walls["plain"], walls["synergy"]
        # The controller writes its audit log at its first action: on a release where the
        # hook shapes every known job at submission a round may have none to take.
        audit = work / "audit.jsonl"
        synergy_run.with_name("audit.jsonl").write_text(
            audit.read_text() if audit.exists() else "")
        keep_outputs(work, synergy_run.parent)
    finally:
        devcluster.down(spec)
        shutil.rmtree(work, ignore_errors=True)
    return {"slurm": version, "cluster": args.cluster or "paper", "jobs": len(jobs),
            "seed": args.seed, "plain_run_wall_s": round(plain_wall, 1),
            "synergy_run_wall_s": round(synergy_wall, 1)}


def whatif(history: Path, profiles_path: Path, meta: dict) -> dict:
    shape = (["--cluster", meta["cluster"]] if meta.get("cluster", "paper") != "paper" else
             ["--servers", "4", "--gpus-per-server", "8", "--cpus-per-server", "24",
              "--mem-per-server", "500"])
    res = CliRunner().invoke(synergy, [
        "whatif", "--from", str(history), *shape, "--profiles", str(profiles_path),
        "--round-seconds", str(SCHED_S), "--controller-interval", str(CONTROLLER_INTERVAL_S),
        "--slurm-release", meta["slurm"], "--requeue-budget", "0",
        "--format", "json", "--no-progress"])
    if res.exit_code != 0:
        raise SystemExit(f"whatif failed: {res.output}")
    return json.loads(res.output.strip().splitlines()[-1])


def real(history: Path) -> dict:
    """Makespan and mean JCT (hours) from Slurm's own records: submission to end."""
    jobs, skipped = parse_history(history.read_text())
    if skipped or not jobs or any(j.end is None for j in jobs):
        raise SystemExit(f"{history}: unusable export ({len(skipped)} records skipped)")
    jct = [j.end - j.submit for j in jobs]
    span = max(j.end for j in jobs) - min(j.submit for j in jobs)
    return {"makespan_h": span / 3600, "jct_mean_h": sum(jct) / len(jct) / 3600,
            "states": sorted({j.state for j in jobs})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--seed", default="7,11",
                    help="comma-separated seeds, one mix and two runs each")
    ap.add_argument("--slurm", default="system", choices=RELEASES)
    ap.add_argument("--cluster", default="", help="a cluster description (e.g. mixed)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--slot", type=int, default=0, choices=range(4),
                    help="run beside another run of this benchmark on a cluster of its own")
    ap.add_argument("--out", type=Path, default=Path("/tmp/synergy-e2e-whatif"))
    ap.add_argument("--replay-only", action="store_true",
                    help="compare again from the exports a previous run saved in --out")
    ap.add_argument("--runs-only", action="store_true",
                    help="only run the two windows and save their exports in --out")
    args = ap.parse_args()
    seeds = [int(x) for x in str(args.seed).split(",")]
    profiles_path = SHARED / "model_profiles.json"
    results = []
    for seed in seeds:
        out = args.out if len(seeds) == 1 else args.out / f"seed{seed}"
        out.mkdir(parents=True, exist_ok=True)
        plain, synergy_run, meta = out / "plain.json", out / "synergy.json", out / "runs.json"
        if not args.replay_only:
            one = argparse.Namespace(**{**vars(args), "seed": seed})
            meta.write_text(json.dumps(runs(one, profiles_path, plain, synergy_run)))
        if not args.runs_only:
            results.append(report(json.loads(meta.read_text()), plain, synergy_run,
                                  profiles_path))
    for res in results:
        if args.json:
            print(json.dumps(res))
        else:
            for k, v in res.items():
                print(f"{k:>36}: {v}")
            print()
    if len(results) > 1:
        worst = {k: max((r[k] for r in results), key=abs) for k in (
            "fidelity_makespan", "fidelity_jct_mean", "prediction_error_makespan",
            "prediction_error_jct_mean", "gain_error")}
        print(json.dumps({"seeds": seeds, "worst": worst}) if args.json
              else f"worst over seeds {seeds}: {worst}")
    return 0


def decisions(meta: dict, plain: Path, synergy_run: Path, profiles_path: Path
              ) -> dict[str, object]:
    """Each job's decision in the replay of the plain window (what whatif says synergy
    would change: decide.what_synergy_changes through whatif.history) against what the
    hook and the controller did to the same job of the mix (by its name) in the synergy
    run: the hook's tags in the job's admin comment (managed=0: left as submitted;
    managed=1 with a profile: reshaped; without: released as it was) and, for a released
    one, the audit log's shape (never changed). Returns the counts and the jobs that
    differ."""
    site = load_site(meta["cluster"]) if meta.get("cluster", "paper") != "paper" \
        else DEFAULT_SITE
    profiles = load_profiles(profiles_path)
    hist, _ = parse_history(plain.read_text())
    rp = build_replay(hist, profiles, site.pools())
    replayed = {rp.jobs[i].name: str(d.change) for i, d in rp.changes.items()}
    ran, _ = parse_history(synergy_run.read_text())
    audit = [json.loads(x) for x in synergy_run.with_name("audit.jsonl").read_text()
             .splitlines() if x.strip()]
    reshaped_unknown = {a["job_id"] for a in audit if a.get("action") in
                        ("shape-release", "raise", "lower") and a.get("before")
                        and a.get("after") and a["before"] != a["after"]}
    real: dict[str, str] = {}
    for j in ran:
        tags = synergy_tags(j.admin_comment)
        if tags.get("managed") != "1":
            real[j.name] = "leave"
        elif tags.get("profile"):
            real[j.name] = "reshape"
        else:
            real[j.name] = "reshape" if j.job_id in reshaped_unknown else "release"
    differ = sorted(n for n in replayed if replayed[n] != real.get(n))
    return {"decisions": dict(Counter(replayed.values())), "decisions_differ": differ}


def report(meta: dict, plain: Path, synergy_run: Path, profiles_path: Path) -> dict:
    before = whatif(plain, profiles_path, meta)
    after = whatif(synergy_run, profiles_path, meta)
    real_plain, real_syn = real(plain), real(synergy_run)
    pred_prop, pred_syn = before["overall"]["plain"], before["overall"]["synergy"]
    replay_syn = after["overall"]["synergy"]

    def err(pred: float, truth: float) -> float:
        return round((pred - truth) / truth, 4)

    real_gain = real_plain["jct_mean_h"] / real_syn["jct_mean_h"]
    out = {
        **meta, "round_s": SCHED_S, "controller_interval_s": CONTROLLER_INTERVAL_S,
        "replayed": before["replayed"], "profiles": before["profiles"],
        "states": real_plain["states"],
        "real_plain_makespan_h": round(real_plain["makespan_h"], 4),
        "real_plain_jct_mean_h": round(real_plain["jct_mean_h"], 4),
        "replay_plain_makespan_h": pred_prop["makespan_h"],
        "replay_plain_jct_mean_h": pred_prop["jct_mean_h"],
        "fidelity_makespan": err(pred_prop["makespan_h"], real_plain["makespan_h"]),
        "fidelity_jct_mean": err(pred_prop["jct_mean_h"], real_plain["jct_mean_h"]),
        "predicted_synergy_makespan_h": pred_syn["makespan_h"],
        "predicted_synergy_jct_mean_h": pred_syn["jct_mean_h"],
        "real_synergy_makespan_h": round(real_syn["makespan_h"], 4),
        "real_synergy_jct_mean_h": round(real_syn["jct_mean_h"], 4),
        "prediction_error_makespan": err(pred_syn["makespan_h"], real_syn["makespan_h"]),
        "prediction_error_jct_mean": err(pred_syn["jct_mean_h"], real_syn["jct_mean_h"]),
        "replay_of_synergy_window_jct_mean_h": replay_syn["jct_mean_h"],
        "synergy_replay_fidelity_jct_mean": err(replay_syn["jct_mean_h"],
                                                real_syn["jct_mean_h"]),
        "real_gain_jct_mean": round(real_gain, 3),
        "predicted_gain_jct_mean": before["gain"]["jct_mean"],
        "gain_error": err(before["gain"]["jct_mean"], real_gain),
        "real_gain_makespan": round(real_plain["makespan_h"] / real_syn["makespan_h"], 3),
        "predicted_gain_makespan": before["gain"]["makespan"],
        **decisions(meta, plain, synergy_run, profiles_path),
    }
    return out


if __name__ == "__main__":
    sys.exit(main())
