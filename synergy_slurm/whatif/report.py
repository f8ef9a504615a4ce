"""The what-if report: as a dict (``--format json``), as text, and as one self-contained
HTML page with its plots (a JCT CDF and finished jobs per day) embedded."""

from __future__ import annotations

import base64
import html
import io
from collections import Counter
from datetime import UTC, datetime

from ..core import ClusterState
from .history import Replay
from .replay import GROUPS, Outcome, actual_utilisation, fidelity, grouped, stats, utilisation

RUNS = ("actual", "proportional", "synergy")
ROWS = (("jobs", "jobs"), ("unfinished", "unfinished"), ("mean wait (h)", "wait_mean_h"),
        ("mean JCT (h)", "jct_mean_h"), ("p50 JCT (h)", "jct_p50_h"),
        ("p99 JCT (h)", "jct_p99_h"), ("makespan (h)", "makespan_h"))


def build(replay: Replay, outcome: Outcome, cluster: ClusterState, source: str,
          skipped: int, skipped_reasons: dict[str, int]) -> dict:
    overall = {w: stats(list(outcome.times(w).values())).as_dict() for w in RUNS}
    prop, syn = overall["proportional"], overall["synergy"]
    return {
        "source": source,
        "window": [_iso(replay.t0), _iso(replay.end)],
        "cluster": {"servers": len(cluster.servers), "gpus": cluster.total.gpus,
                    "cpus": cluster.total.cpus, "mem_gb": round(cluster.total.mem_gb, 1),
                    "proportional_share": {"cpus_per_gpu": cluster.fair.cpus,
                                           "mem_gb_per_gpu": cluster.fair.mem_gb}},
        "replayed": len(replay.trace),
        "order": outcome.proportional.config.policy,
        "requeue_ok": sum(t.requeue_ok for t in replay.trace),
        "requeues": sum(j.restarts for j in outcome.synergy.jobs),
        "profiles": dict(sorted(Counter(replay.source.values()).items())),
        "left_out": dict(sorted(replay.left_out.items())),
        "notes": dict(sorted(replay.notes.items())),
        "skipped_records": skipped, "skipped_reasons": skipped_reasons,
        "fidelity": fidelity(outcome),
        "overall": overall,
        "gain": {"jct_mean": _ratio(prop["jct_mean_h"], syn["jct_mean_h"]),
                 "makespan": _ratio(prop["makespan_h"], syn["makespan_h"])},
        "utilisation": {"actual": actual_utilisation(replay, cluster),
                        "proportional": utilisation(outcome.proportional),
                        "synergy": utilisation(outcome.synergy)},
        **{f"by_{g}": {k: {w: s.as_dict() for w, s in v.items()}
                       for k, v in grouped(outcome, replay, g).items()} for g in GROUPS},
        "wall_s": round(outcome.proportional.wall_s + outcome.synergy.wall_s, 2),
    }


def as_text(doc: dict) -> str:
    c = doc["cluster"]
    lines = [f"synergy whatif: {doc['replayed']} GPU jobs replayed from {doc['source']}, "
             f"{doc['window'][0]} .. {doc['window'][1]}",
             f"cluster: {c['servers']} servers, {c['gpus']} GPUs, {c['cpus']} cores, "
             f"{c['mem_gb']:g} GB; proportional share "
             f"{c['proportional_share']['cpus_per_gpu']} cores + "
             f"{c['proportional_share']['mem_gb_per_gpu']:g} GB per GPU",
             "profiles: " + ", ".join(f"{n} {k}" for k, n in doc["profiles"].items()),
             "order: " + ("Slurm's, by the priority sacct recorded for each job"
                          if doc["order"] == "slurm" else "arrival (the history has no "
                          "priority for every job)"),
             f"requeues: {doc['requeues']} in the synergy replay, of the "
             f"{doc['requeue_ok']} jobs that opted in (synergy:requeue-ok)"]
    if doc["profiles"].get("unknown"):
        lines.append("  (unknown jobs run proportional in both replays: synergy changes "
                     "nothing for them)")
    for title, d in (("left out", doc["left_out"]), ("notes", doc["notes"]),
                     ("skipped records", doc["skipped_reasons"])):
        for reason, n in d.items():
            lines.append(f"{title}: {n} {reason}")
    f = doc["fidelity"]
    lines += ["", "Fidelity (the proportional replay against what really happened): "
              f"makespan {_pct(f['makespan'])}, mean JCT {_pct(f['jct_mean'])}, "
              f"mean wait {f['wait_mean_h']:+.3f} h", ""]
    lines += _table(doc["overall"], doc["utilisation"])
    g = doc["gain"]
    lines += ["", f"synergy vs proportional: mean JCT {g['jct_mean']}x shorter, makespan "
              f"{g['makespan']}x shorter"]
    for group in GROUPS:
        lines += ["", f"By {group}:"]
        for key, runs in doc[f"by_{group}"].items():
            lines.append(f"  {key}: " + "; ".join(
                f"{w} {runs[w]['jobs']} jobs, JCT {_h(runs[w]['jct_mean_h'])} h, "
                f"wait {_h(runs[w]['wait_mean_h'])} h" for w in RUNS))
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


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{x * 100:+.1f}%"


def _h(x) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")
