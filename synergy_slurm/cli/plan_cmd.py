"""``synergy plan``: one planning round for a generated queue, printed as a table."""

from __future__ import annotations

import json
import random
from pathlib import Path

import click

from ..core import (
    ALLOCATOR_NAMES,
    POLICIES,
    ClusterState,
    get_allocator,
    get_policy,
    make_plan,
)
from ..sim.jobsets import full_cluster_jobs
from .options import check_server, csv_list, profiles_option_value


@click.command("plan")
@click.option("--servers", default=4, show_default=True, type=click.IntRange(1, 4096),
              help="Number of servers.")
@click.option("--gpus-per-server", default=8, show_default=True, type=click.IntRange(1, 64))
@click.option("--cpus-per-server", default=24, show_default=True, type=click.IntRange(1, 4096))
@click.option("--mem-per-server", default=500.0, show_default=True,
              type=click.FloatRange(1, 1e7), help="Memory per server in GB.")
@click.option("--policy", default="fifo", show_default=True,
              help=f"Base policy: {', '.join(POLICIES)}.")
@click.option("--allocator", "allocators", default="proportional,tune", show_default=True,
              help=f"Comma-separated allocators to compare: {', '.join(ALLOCATOR_NAMES)}.")
@click.option("--gpu-sizes", default="1", show_default=True,
              help="Comma-separated GPU counts drawn for the generated jobs.")
@click.option("--split", default="20,70,10", show_default=True,
              help="Model mix: image,language,speech percentages, or 'uniform'.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--profiles", "profiles_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Profiles JSON (model_profiles.json shape). "
              "Default: $SYNERGY_PROFILES or the reference profiles.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def plan_cmd(servers, gpus_per_server, cpus_per_server, mem_per_server, policy, allocators,
             gpu_sizes, split, seed, profiles_path, fmt) -> None:
    """Plan one round for a generated queue that fills the cluster, per allocator.

    Shows what Synergy would give each job (cores/GPU, GB/GPU, expected speedup) against
    GPU-proportional allocation. Nothing touches Slurm.
    """
    names = csv_list(allocators, ALLOCATOR_NAMES, "allocator")
    try:
        pol = get_policy(policy)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from None
    check_server(gpus_per_server, cpus_per_server)
    try:
        sizes = [int(x) for x in csv_list(gpu_sizes, what="GPU count")]
        mix = None if split.strip().lower() == "uniform" else [float(x) for x in split.split(",")]
    except ValueError:
        raise click.BadParameter("expected comma-separated numbers") from None
    if min(sizes) < 1 or max(sizes) > servers * gpus_per_server:
        raise click.BadParameter(f"GPU counts must be 1..{servers * gpus_per_server} (the "
                                 "cluster's GPUs)", param_hint="--gpu-sizes")
    if mix is not None and (len(mix) != 3 or min(mix) < 0 or sum(mix) <= 0):
        raise click.BadParameter("give three non-negative percentages", param_hint="--split")
    profiles = profiles_option_value(profiles_path)
    cluster = ClusterState.uniform(servers, gpus_per_server, cpus_per_server, mem_per_server)
    jobs = full_cluster_jobs(random.Random(seed), profiles, servers * gpus_per_server,
                             sizes=sizes, split=mix)
    results = []
    for name in names:
        plan = make_plan(jobs, cluster, pol, get_allocator(name), now=0.0)
        results.append({
            "allocator": name, "admitted": len(plan.allocations),
            "total_speedup": round(plan.total_speedup, 4), "bound": plan.bound,
            "fallback": plan.fallback,
            "jobs": [{"job_id": a.job_id, "model": jobs[a.job_id].profile_key, "gpus": a.gpus,
                      "cpus_per_gpu": a.share.cpus, "mem_gb_per_gpu": round(a.share.mem_gb, 2),
                      "speedup": round(a.speedup, 3), "how": a.how,
                      "placement": [list(p) for p in a.placement]}
                     for a in plan.allocations],
        })
    if fmt == "json":
        click.echo(json.dumps(results, indent=1))
        return
    last = results[-1]
    click.echo(f"{'job':>4} {'model':<12} {'gpus':>4} {'cpu/gpu':>7} {'GB/gpu':>7} "
               f"{'speedup':>7}  {'how':<16} servers   ({last['allocator']})")
    for j in last["jobs"]:
        where = ",".join(f"{s}:{n}" for s, n in j["placement"])
        click.echo(f"{j['job_id']:>4} {j['model']:<12} {j['gpus']:>4} {j['cpus_per_gpu']:>7} "
                   f"{j['mem_gb_per_gpu']:>7} {j['speedup']:>7.2f}  {j['how']:<16} {where}")
    click.echo("")
    for r in results:
        extra = f"  OPT bound {r['bound']:.2f}" if r["bound"] is not None else ""
        click.echo(f"{r['allocator']:>13}: {r['admitted']} jobs admitted, total normalised "
                   f"throughput {r['total_speedup']:.2f}{extra}")
