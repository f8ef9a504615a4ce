"""The what-if report: as a dict (``--format json``), as text, and as one self-contained
HTML page with its plots (a JCT CDF and finished jobs per day) embedded."""

from __future__ import annotations

import base64
import html
import io
from collections import Counter
from datetime import UTC, datetime

from ..core import ClusterState
from ..core.pools import Pool
from ..slurm.sacct import HistoryJob
from ..slurm.sacct_usage import UsageRead
from .history import Replay
from .infer import candidates, infer_class
from .replay import (
    GROUPS,
    RUNS,
    Controller,
    Outcome,
    actual_utilisation,
    fidelity,
    grouped,
    stats,
    utilisation,
)

ROWS = (("jobs", "jobs"), ("unfinished", "unfinished"), ("mean wait (h)", "wait_mean_h"),
        ("mean JCT (h)", "jct_mean_h"), ("p50 JCT (h)", "jct_p50_h"),
        ("p99 JCT (h)", "jct_p99_h"), ("makespan (h)", "makespan_h"))


def build(replay: Replay, outcome: Outcome, cluster: ClusterState, pools: list[Pool],
          ctl: Controller, source: str, skipped: int, skipped_reasons: dict[str, int],
          assumptions: dict | None = None) -> dict:
    overall = {w: stats(list(outcome.times(w).values())).as_dict() for w in RUNS}
    plain, syn, actual = overall["plain"], overall["synergy"], overall["actual"]
    ran = "synergy" if replay.under_synergy else "plain"
    other = "plain" if ran == "synergy" else "synergy"
    # What happened against the replay of the other: the gain an admin would have had
    # (or had) from synergy, by Slurm's own records on one side.
    before, after = (actual, syn) if ran == "plain" else (plain, actual)
    return {
        "source": source,
        "window": [_iso(replay.t0), _iso(replay.end)],
        "cluster": {"servers": len(cluster.servers), "gpus": cluster.total.gpus,
                    "cpus": cluster.total.cpus, "mem_gb": round(cluster.total.mem_gb, 1),
                    "proportional_share": {"cpus_per_gpu": cluster.fair.cpus,
                                           "mem_gb_per_gpu": cluster.fair.mem_gb},
                    "partitions": [{"name": p.partition, "servers": len(p.cluster.servers),
                                    "gpus": p.cluster.total.gpus,
                                    "cpus_per_gpu": p.cluster.fair.cpus,
                                    "mem_gb_per_gpu": p.cluster.fair.mem_gb}
                                   for p in pools]},
        "model": {"controller_interval_s": ctl.interval_s,
                  "release_delay_s": ctl.release_delay_s,
                  "known_profiles_held": not ctl.lowers_pending,
                  "shrink_running_memory": ctl.shrink_memory,
                  "slurm_sched_s": ctl.sched_s, **(assumptions or {})},
        "replayed": len(replay.trace),
        "ran": ran,
        "order": outcome.plain.config.policy,
        "requeue_ok": sum(t.requeue_ok for t in replay.trace),
        "requeues": sum(j.restarts for j in outcome.synergy.jobs),
        "profiles": dict(sorted(Counter(replay.source.values()).items())),
        "left_out": dict(sorted(replay.left_out.items())),
        "notes": dict(sorted(replay.notes.items())),
        "skipped_records": skipped, "skipped_reasons": skipped_reasons,
        "headline": {"before": "actual" if ran == "plain" else "plain",
                     "after": "synergy" if ran == "plain" else "actual",
                     "makespan": _ratio(before["makespan_h"], after["makespan_h"]),
                     "jct_mean": _ratio(before["jct_mean_h"], after["jct_mean_h"]),
                     "jct_p99": _ratio(before["jct_p99_h"], after["jct_p99_h"]),
                     "wait_mean_h": _diff(after["wait_mean_h"], before["wait_mean_h"])},
        "fidelity": fidelity(outcome, ran),
        "other": other,
        "overall": overall,
        "gain": {"jct_mean": _ratio(plain["jct_mean_h"], syn["jct_mean_h"]),
                 "makespan": _ratio(plain["makespan_h"], syn["makespan_h"]),
                 "jct_p99": _ratio(plain["jct_p99_h"], syn["jct_p99_h"])},
        "utilisation": {"actual": actual_utilisation(replay, cluster),
                        "plain": utilisation(outcome.plain),
                        "synergy": utilisation(outcome.synergy)},
        **{f"by_{g}": {k: {w: s.as_dict() for w, s in v.items()}
                       for k, v in grouped(outcome, replay, g).items()}
           for g in (*GROUPS, "size")},
        "wall_s": round(outcome.plain.wall_s + outcome.synergy.wall_s, 2),
    }


def usage_section(history: list[HistoryJob], replay: Replay, usage: UsageRead,
                  top: int = 10) -> dict:
    """What the jobs used (where the history records it), the class each job's use suggests
    (whatif/infer.py), and the ``top`` keys without a profile by GPU-hours: what to profile
    next."""
    measured = [u for u in usage.jobs.values() if u.core_use is not None]
    classes = Counter(infer_class(u)[0] or "unclassified" for u in measured)
    unprofiled = [j for j in history if replay.source.get(j.job_id) == "unknown"]
    found = candidates(unprofiled, usage.jobs)
    return {
        "usage": {"jobs_measured": len(measured),
                  "core_use_mean": round(sum(u.core_use or 0.0 for u in measured)
                                         / len(measured), 3) if measured else None,
                  "classes": dict(sorted(classes.items())),
                  "unknown": dict(sorted(usage.unknown.items())),
                  "skipped": len(usage.skipped)},
        "keys_to_profile": [{"key": c.key, "gpu_hours": round(c.gpu_hours, 2),
                             "jobs": len(c.jobs), "class": c.cls, "agree": round(c.agree, 2)}
                            for c in found[:top]],
    }


def _usage_lines(doc: dict) -> list[str]:
    u = doc.get("usage")
    if not u:
        return []
    lines = ["", f"What jobs used: {u['jobs_measured']} jobs measured"
             + (f", cores kept busy {u['core_use_mean']:.0%} on average"
                if u["core_use_mean"] is not None else "")
             + (", classes by use: " + ", ".join(f"{n} {k}" for k, n in u["classes"].items())
                if u["classes"] else "")]
    lines += [f"  not measured: {n} {why}" for why, n in u["unknown"].items()]
    if doc.get("keys_to_profile"):
        lines.append("Keys to profile next (no profile yet; by GPU-hours; class from use):")
        lines += [f"  {k['key']}: {k['gpu_hours']:g} GPU-h in {k['jobs']} jobs, "
                  + (f"looks {k['class']} ({k['agree']:.0%} of its GPU-hours)" if k["class"]
                     else "class unknown")
                  + f"; synergy-sbatch --profile-key {k['key']} ..."
                  for k in doc["keys_to_profile"]]
    return lines


def as_text(doc: dict) -> str:
    c = doc["cluster"]
    h, f = doc["headline"], doc["fidelity"]
    if doc["ran"] == "plain":
        lead = ("What happened (plain Slurm, from its records) against synergy's replay: "
                f"makespan {_x(h['makespan'])}, mean JCT {_x(h['jct_mean'])}, p99 JCT "
                f"{_x(h['jct_p99'])} shorter; mean wait {_signed_h(h['wait_mean_h'])}")
    else:
        lead = ("What happened (synergy ran, from Slurm's records) against the replay "
                f"without it: makespan {_x(h['makespan'])}, mean JCT {_x(h['jct_mean'])}, "
                f"p99 JCT {_x(h['jct_p99'])} shorter; mean wait {_signed_h(h['wait_mean_h'])}")
    lines = [f"synergy whatif: {doc['replayed']} GPU jobs replayed from {doc['source']}, "
             f"{doc['window'][0]} .. {doc['window'][1]}", "", lead,
             f"Fidelity (the {f['of']} replay against what really happened): makespan "
             f"{_pct(f['makespan'])}, mean JCT {_pct(f['jct_mean'])}, p99 JCT "
             f"{_pct(f['jct_p99'])}, mean wait {f['wait_mean_h']:+.3f} h",
             f"Replay against replay: synergy {doc['gain']['jct_mean']}x shorter mean JCT, "
             f"{doc['gain']['makespan']}x shorter makespan", "",
             f"cluster: {c['servers']} servers, {c['gpus']} GPUs, {c['cpus']} cores, "
             f"{c['mem_gb']:g} GB; partitions " + ", ".join(
                 f"{p['name'] or '-'} ({p['gpus']} GPUs, {p['cpus_per_gpu']} cores + "
                 f"{p['mem_gb_per_gpu']:g} GB per GPU)" for p in c["partitions"]),
             "profiles: " + ", ".join(f"{n} {k}" for k, n in doc["profiles"].items()),
             "order: " + ("Slurm's, by the priority sacct recorded for each job"
                          if doc["order"] == "slurm" else "submission (the history has no "
                          "priority for every job)"),
             "model: " + ", ".join(f"{k} {v}" for k, v in doc["model"].items()),
             f"requeues: {doc['requeues']} in the synergy replay, of the "
             f"{doc['requeue_ok']} jobs that opted in (synergy:requeue-ok)"]
    if doc["profiles"].get("unknown"):
        lines.append("  (unknown jobs run proportional in both replays: synergy changes "
                     "nothing for them)")
    for title, d in (("left out", doc["left_out"]), ("notes", doc["notes"]),
                     ("skipped records", doc["skipped_reasons"])):
        for reason, n in d.items():
            lines.append(f"{title}: {n} {reason}")
    lines += ["", *_table(doc["overall"], doc["utilisation"])]
    for group, title in (("size", "By job size (the fairness cost: JCT by GPUs)"),
                         ("partition", "By partition"), ("account", "By account")):
        lines += ["", f"{title}:"]
        for key, runs in doc[f"by_{group}"].items():
            lines.append(f"  {key}: " + "; ".join(
                f"{w} {runs[w]['jobs']} jobs, JCT {_h(runs[w]['jct_mean_h'])} h, "
                f"wait {_h(runs[w]['wait_mean_h'])} h" for w in RUNS))
    lines += _usage_lines(doc)
    return "\n".join(lines)


def _table(overall: dict, util: dict) -> list[str]:
    out = [f"{'':<16}" + "".join(f"{w:>14}" for w in RUNS)]
    for label, key in ROWS:
        out.append(f"{label:<16}" + "".join(f"{_h(overall[w][key]):>14}" for w in RUNS))
    for res in ("gpu", "cpu", "mem"):
        out.append(f"{res.upper() + ' util':<16}" + "".join(
            f"{util[w][res] * 100:>13.1f}%" for w in RUNS))
    return out


def write_html(doc: dict, outcome: Outcome, path) -> list[str]:
    """report.html with its two plots embedded (PNG as data URIs); also writes the PNGs
    beside it. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    images = {}
    fig, ax = plt.subplots(figsize=(6, 4))
    for w in RUNS:
        jct = sorted((t.end - t.arrival) / 3600 for t in outcome.times(w).values()
                     if t.end is not None)
        if jct:
            ax.plot(jct, [(i + 1) / len(jct) for i in range(len(jct))], label=w)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.legend()
    ax.set_title("JCT CDF")
    images["jct_cdf.png"] = _save(fig, path.parent / "jct_cdf.png", plt)
    fig, ax = plt.subplots(figsize=(6, 4))
    for w in RUNS:
        days: dict[int, int] = {}
        for t in outcome.times(w).values():
            if t.end is not None:
                days[int(t.end // 86400)] = days.get(int(t.end // 86400), 0) + 1
        if days:
            xs = sorted(days)
            ax.plot(xs, [days[x] for x in xs], marker="o", label=w)
    ax.set_xlabel("day of the window")
    ax.set_ylabel("jobs finished")
    ax.legend()
    ax.set_title("Finished jobs per day")
    images["per_day.png"] = _save(fig, path.parent / "per_day.png", plt)
    files += [str(path.parent / n) for n in images]
    body = html.escape(as_text(doc))
    imgs = "".join(f'<p><img alt="{n}" src="data:image/png;base64,{b}"></p>'
                   for n, b in images.items())
    path.write_text("<!doctype html><html><head><meta charset='utf-8'><title>synergy "
                    f"whatif</title></head><body><h1>synergy whatif</h1><pre>{body}</pre>"
                    f"{imgs}</body></html>\n")
    files.append(str(path))
    return files


def _save(fig, path, plt) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    data = buf.getvalue()
    path.write_bytes(data)
    return base64.b64encode(data).decode()


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a != a or b != b or not b:
        return None
    return round(a / b, 3)


def _diff(a: float, b: float) -> float | None:
    if a != a or b != b:
        return None
    return round(a - b, 4)


def _x(r: float | None) -> str:
    return "n/a" if r is None else f"{r}x"


def _signed_h(d: float | None) -> str:
    return "n/a" if d is None else f"{d:+.3f} h"


def _pct(x: float) -> str:
    return "n/a" if x is None or x != x else f"{x * 100:+.1f}%"


def _h(x) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")
