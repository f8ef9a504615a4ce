"""The what-if report: as a dict (``--format json``), as text, and as one self-contained
HTML page with its plots (a JCT CDF and finished jobs per day) embedded."""

from __future__ import annotations

import base64
import html
import io
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..core import ClusterState, PerGpu, Profile
from ..core.pools import Pool
from ..decide import ControllerSettings
from ..slurm.sacct import HistoryJob
from ..slurm.sacct_usage import UsageRead
from . import forecast, summary
from .history import ReplayInput
from .infer import infer_class
from .replay import (
    GROUPS,
    RUNS,
    Replays,
    actual_utilisation,
    fidelity,
    grouped,
    stats,
    utilisation,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# One colour and one line style per run in every plot.
_COLOURS = {"actual": "#222222", "plain": "#1f77b4", "synergy": "#d62728"}
_LINES = {"actual": "-", "plain": "--", "synergy": ":"}
_CHANGE_WORDS = {"reshape": "reshaped by a profile", "release": "released as they are "
                 "(profile unknown)", "leave": "left as submitted"}
# Jobs listed one by one in the report's usage (the plot shows them all).
MAX_JOBS = 200
ROWS = (("jobs", "jobs"), ("unfinished", "unfinished"), ("mean wait (h)", "wait_mean_h"),
        ("mean JCT (h)", "jct_mean_h"), ("p50 JCT (h)", "jct_p50_h"),
        ("p99 JCT (h)", "jct_p99_h"), ("makespan (h)", "makespan_h"))


def build(replay: ReplayInput, outcome: Replays, cluster: ClusterState, pools: list[Pool],
          ctl: ControllerSettings, source: str, skipped: int, skipped_reasons: dict[str, int],
          assumptions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    overall = {w: stats(list(outcome.times(w).values())).as_dict() for w in RUNS}
    plain, syn, actual = overall["plain"], overall["synergy"], overall["actual"]
    ran = "synergy" if replay.under_synergy else "plain"
    other = "plain" if ran == "synergy" else "synergy"
    # Where synergy ran: what happened against the replay without it (summary.headline).
    before, after = (plain, actual) if ran == "synergy" else (plain, syn)
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
        "measured": {"makespan": _ratio(before["makespan_h"], after["makespan_h"]),
                     "jct_mean": _ratio(before["jct_mean_h"], after["jct_mean_h"]),
                     "jct_p99": _ratio(before["jct_p99_h"], after["jct_p99_h"]),
                     "forecast_makespan": _ratio(plain["makespan_h"], syn["makespan_h"])},
        "changes": dict(sorted(Counter(str(d.change) for d in replay.changes.values())
                               .items())),
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


def first_screen(doc: Mapping[str, Any], replay: ReplayInput, cluster: ClusterState,
                 release_read: bool) -> dict[str, Any]:
    """The answer, how far to trust it, the warnings and what to do next (summary.py);
    call once the forecasts are in ``doc``."""
    ran = doc["ran"]
    head = summary.headline(ran, doc.get("forecast") or {}, doc["measured"], doc["replayed"])
    actual = doc["overall"]["actual"]
    t = summary.trust(doc["fidelity"], actual, doc["overall"][ran])
    used, peak = summary.nodes_and_peak(list(replay.jobs.values()),
                                        {s.name for s in cluster.servers})
    paced = {tj.job_id for tj in replay.trace if tj.model and not tj.fixed_s}
    warned = summary.warnings(t, actual["jct_mean_h"], used, len(cluster.servers), peak,
                              cluster.total.gpus, release_read, doc["skipped_reasons"],
                              summary.spread_unrecorded(list(replay.jobs.values()), paced))
    return {"headline": head, "trust": t, "warnings": [w.as_dict() for w in warned],
            "next": summary.next_steps(doc.get("keys_to_profile") or [], bool(warned))}


def first_lines(doc: Mapping[str, Any]) -> list[str]:
    """The first screen as text."""
    lines = [*summary.headline_text(doc["headline"]), *summary.trust_text(doc["trust"])]
    for w in doc["warnings"]:
        lines += [f"WARNING: {w['what']}", f"  check: {w['check']}"]
    lines += ["Next:", *(f"  {i}. {s}" for i, s in enumerate(doc["next"], start=1))]
    return lines


def usage_section(history: list[HistoryJob], replay: ReplayInput, usage: UsageRead,
                  profiles: Mapping[str, Profile], fair: PerGpu, top: int = 10
                  ) -> dict[str, Any]:
    """What the jobs used (where the history records it), the class each job's use suggests
    (whatif/infer.py), the ``top`` keys without a profile whose profiling would most narrow
    the forecasts' gap (whatif/forecast.py), and the GPU-hours synergy would not reshape."""
    measured = [u for u in usage.jobs.values() if u.core_use is not None]
    classes = Counter(infer_class(u)[0] or "unclassified" for u in measured)
    unprofiled = [j for j in history if replay.source.get(j.job_id) in ("unknown", "inferred")]
    hours: dict[str, float] = {}    # GPU-hours by why synergy would not reshape ("": it would)
    for j in history:
        if j.gpus > 0 and j.start is not None:
            why = j.unshaped or ""
            hours[why] = hours.get(why, 0.0) + j.gpus * ((j.end or replay.end) - j.start) / 3600
    total = sum(hours.values())
    return {
        "usage": {"jobs_measured": len(measured),
                  "core_use_mean": round(sum(u.core_use or 0.0 for u in measured)
                                         / len(measured), 3) if measured else None,
                  "classes": dict(sorted(classes.items())),
                  "unknown": dict(sorted(usage.unknown.items())),
                  "skipped": len(usage.skipped),
                  "jobs": [{"job_id": u.job_id, "cpus": u.alloc_cpus,
                            "core_use": None if u.core_use is None
                            else round(u.core_use, 3),
                            "peak_mem_mb": None if u.peak_mem_mb is None
                            else round(u.peak_mem_mb, 1)}
                           for u in sorted(measured, key=lambda u: u.job_id)[:MAX_JOBS]]},
        "keys_to_profile": forecast.to_profile(unprofiled, usage.jobs, profiles, fair, top),
        "not_reshaped": {"share": round((total - hours.get("", 0.0)) / total, 4)
                         if total else 0.0,
                         "gpu_hours": {why: round(h, 2) for why, h in sorted(hours.items())
                                       if why}},
    }


def forecast_section(outcome: Replays, replay: ReplayInput, forecasts: Mapping[str, ReplayInput],
                     mix: Sequence[float] | None) -> dict[str, Any]:
    """The three forecasts (whatif/forecast.py): each the plain replay's mean JCT over its
    own, what it assumes, and where its jobs' profiles came from; the optimistic one only
    with a stated ``mix`` (None otherwise, and said so)."""
    plain = stats(list(outcome.times("plain").values())).jct_mean_h
    runs = {"guaranteed": ("guaranteed", forecasts.get("guaranteed")),
            "expected": ("synergy", replay), "optimistic": ("optimistic",
                                                           forecasts.get("optimistic"))}
    gains: dict[str, float | None] = {}
    detail: dict[str, dict[str, Any]] = {}
    label = "/".join(f"{x:g}" for x in mix) if mix is not None else ""
    for name, (run, rp) in runs.items():
        if rp is None:
            gains[name] = None
            detail[name] = {"gain": None, "assumes": "not computed: give --assume-mix "
                            "IMAGE,LANGUAGE,SPEECH (the paper's: 20,70,10)", "profiles": {}}
            continue
        s = stats(list(outcome.times(run).values()))
        gains[name] = forecast.gain(plain, s.jct_mean_h)
        detail[name] = {"gain": gains[name], "jct_mean_h": round(s.jct_mean_h, 4),
                        "assumes": forecast.ASSUMES[name].format(mix=label),
                        "profiles": dict(sorted(Counter(rp.source.values()).items()))}
    return {"forecast": {**gains, "basis": "plain replay's mean JCT / the forecast's (the "
                         "replay's own error on what happened cancels)"},
            "forecast_detail": detail}


def _usage_lines(doc: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    fc, detail = doc.get("forecast"), doc.get("forecast_detail", {})
    if fc:
        lines += ["", "Forecasts (mean JCT, " + fc["basis"] + "):"]
        lines += [f"  {name}: {_x(d['gain'])} ({d['assumes']}"
                  + ("; profiles: " + ", ".join(f"{n} {k}" for k, n in d["profiles"].items())
                     if d["profiles"] else "") + ")"
                  for name, d in detail.items()]
    u = doc.get("usage")
    if not u:
        return lines
    lines += ["", f"What jobs used: {u['jobs_measured']} jobs measured"
              + (f", cores kept busy {u['core_use_mean']:.0%} on average"
                 if u["core_use_mean"] is not None else "")
              + (", classes by use: " + ", ".join(f"{n} {k}" for k, n in u["classes"].items())
                 if u["classes"] else "")]
    lines += [f"  not measured: {n} {why}" for why, n in u["unknown"].items()]
    nr = doc.get("not_reshaped")
    if nr and nr["gpu_hours"]:
        lines.append(f"Not reshaped by synergy: {nr['share']:.1%} of GPU-hours: " + "; ".join(
            f"{why} ({h:g} GPU-h)" for why, h in nr["gpu_hours"].items()))
    if doc.get("keys_to_profile"):
        lines.append("Keys to profile next (no profile yet; GPU-hours x what profiling "
                     "could show; class from use):")
        for k in doc["keys_to_profile"]:
            lines += [f"  {k['key']}: {k['gpu_hours']:g} GPU-h in {k['jobs']} jobs of "
                      f"{_users(k['users'])}, "
                      + (f"looks {k['class']} ({k['agree']:.0%} of its GPU-hours)"
                         if k["class"] else "class unknown"),
                      f"    {k['profile_run']}", f"    (command: {k['command_from']})",
                      f"    then: {k['sbatch']}"]
    return lines


def as_text(doc: Mapping[str, Any]) -> str:
    c = doc["cluster"]
    lines = [f"synergy whatif: {doc['replayed']} GPU jobs replayed from {doc['source']}, "
             f"{doc['window'][0]} .. {doc['window'][1]}", "", *first_lines(doc), "",
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
    if doc.get("changes"):
        lines.append("what synergy changes: " + ", ".join(
            f"{n} {_CHANGE_WORDS.get(k, k)}" for k, n in doc["changes"].items())
            + " (jobs left or released keep the cores and memory they had, in both "
            "replays)")
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


def _table(overall: Mapping[str, Mapping[str, float]],
           util: Mapping[str, Mapping[str, float]]) -> list[str]:
    out = [f"{'':<16}" + "".join(f"{w:>14}" for w in RUNS)]
    for label, key in ROWS:
        out.append(f"{label:<16}" + "".join(f"{_h(overall[w][key]):>14}" for w in RUNS))
    for res in ("gpu", "cpu", "mem"):
        out.append(f"{res.upper() + ' util':<16}" + "".join(
            f"{util[w][res] * 100:>13.1f}%" for w in RUNS))
    return out


def write_html(doc: Mapping[str, Any], outcome: Replays, path: Path, usage: UsageRead | None = None
               ) -> list[str]:
    """report.html: the report's sections as tables, with its plots embedded (PNG as data
    URIs: a JCT CDF, finished jobs per day and, where the history records use, each job's
    core use against the cores it was given); the text form at the end. Also writes the
    PNGs beside it. Returns the files written."""
    images = _plots(outcome, path.parent, usage)
    e = html.escape
    parts = [f"<h1>synergy whatif</h1><p>{doc['replayed']} GPU jobs replayed from "
             f"{e(doc['source'])}, {e(doc['window'][0])} .. {e(doc['window'][1])}</p>",
             *_html_first_screen(doc)]
    parts += _html_results(doc) + _html_site(doc)
    parts += [f'<p><img alt="{n}" src="data:image/png;base64,{b}"></p>'
              for n, b in images.items()]
    parts.append(f"<details><summary>As text</summary><pre>{e(as_text(doc))}</pre>"
                 "</details>")
    style = ("body{font-family:sans-serif;max-width:70em}table{border-collapse:collapse;"
             "margin:.5em 0 1.5em}td,th{border:1px solid #bbb;padding:2px 8px;"
             "text-align:left}.answer{font-size:1.4em;font-weight:bold}"
             "#answer p,#trust p{margin:.3em 0}#warnings,#next{font-size:.95em}"
             "#warnings h2,#next h2{font-size:1.1em;margin:.4em 0}#warnings li{margin:.1em 0}"
             "#warnings{background:#fff3cd;border:1px solid #e0b000;padding:0 1em;"
             "margin:.5em 0}")
    path.write_text("<!doctype html><html><head><meta charset='utf-8'><title>synergy "
                    f"whatif</title><style>{style}</style></head><body>{''.join(parts)}"
                    "</body></html>\n")
    return [*(str(path.parent / n) for n in images), str(path)]


def _html_first_screen(doc: Mapping[str, Any]) -> list[str]:
    """The answer, how far to trust it, the warnings and the next steps, above the rest."""
    e = html.escape
    head = summary.headline_text(doc["headline"])
    parts = [f'<div id="answer"><p class="answer">{e(head[0])}</p>'
             + "".join(f"<p>{e(x.strip())}</p>" for x in head[1:]) + "</div>",
             '<div id="trust">' + "".join(f"<p>{e(x.strip())}</p>"
                                          for x in summary.trust_text(doc["trust"]))
             + "</div>"]
    if doc["warnings"]:
        parts.append('<div id="warnings"><h2>Warnings</h2><ul>' + "".join(
            f"<li><b>{e(w['what'])}</b>: {e(w['check'])}</li>" for w in doc["warnings"])
            + "</ul></div>")
    parts.append('<div id="next"><h2>Next</h2><ol>'
                 + "".join(f"<li>{e(x)}</li>" for x in doc["next"]) + "</ol></div>")
    return parts


def _html_results(doc: Mapping[str, Any]) -> list[str]:
    """The replay's figures: forecasts, fidelity, overall and by group."""
    parts: list[str] = []
    if doc.get("forecast_detail"):
        parts.append(_html_table(
            "Forecasts: gain in mean JCT (" + doc["forecast"]["basis"] + ")",
            ["forecast", "gain", "assumes", "profiles"],
            [[n, _x(d["gain"]), d["assumes"],
              ", ".join(f"{c} {k}" for k, c in d["profiles"].items())]
             for n, d in doc["forecast_detail"].items()]))
    f = doc["fidelity"]
    parts.append(_html_table(
        f"Fidelity: the {f['of']} replay against what really happened",
        ["makespan", "mean JCT", "p99 JCT", "mean wait"],
        [[_pct(f["makespan"]), _pct(f["jct_mean"]), _pct(f["jct_p99"]),
          f"{f['wait_mean_h']:+.3f} h"]]))
    rows = [[label, *(_h(doc["overall"][w][key]) for w in RUNS)] for label, key in ROWS]
    rows += [[f"{r.upper()} util", *(f"{doc['utilisation'][w][r] * 100:.1f}%" for w in RUNS)]
             for r in ("gpu", "cpu", "mem")]
    parts.append(_html_table("Overall", ["", *RUNS], rows))
    for group, title in (("size", "By job size"), ("partition", "By partition"),
                         ("account", "By account")):
        parts.append(_html_table(title, ["", *(f"{w} {c}" for w in RUNS
                                               for c in ("jobs", "JCT (h)", "wait (h)"))],
                                 [[k, *(v for w in RUNS for v in (
                                     runs[w]["jobs"], _h(runs[w]["jct_mean_h"]),
                                     _h(runs[w]["wait_mean_h"])))]
                                  for k, runs in doc[f"by_{group}"].items()]))
    return parts


def _html_site(doc: Mapping[str, Any]) -> list[str]:
    """What the replay learnt of the site: use, keys to profile, what was not reshaped,
    and what was left out."""
    parts: list[str] = []
    u = doc.get("usage")
    if u:
        parts.append(_html_table(
            "What jobs used", ["jobs measured", "cores busy (mean)", "classes by use",
                               "not measured"],
            [[u["jobs_measured"], "-" if u["core_use_mean"] is None
              else f"{u['core_use_mean']:.0%}",
              ", ".join(f"{n} {k}" for k, n in u["classes"].items()),
              "; ".join(f"{n} {why}" for why, n in u["unknown"].items())]]))
    if doc.get("keys_to_profile"):
        parts.append(_html_table(
            "Keys to profile next", ["key", "GPU-hours", "jobs", "users", "class (agree)",
                                     "profile it", "command", "then submit with"],
            [[k["key"], f"{k['gpu_hours']:g}", k["jobs"], _users(k["users"]),
              f"{k['class']} ({k['agree']:.0%})" if k["class"] else "unknown",
              k["profile_run"], k["command_from"], k["sbatch"]]
             for k in doc["keys_to_profile"]]))
    nr = doc.get("not_reshaped")
    if nr and nr["gpu_hours"]:
        parts.append(_html_table(f"Not reshaped by synergy: {nr['share']:.1%} of GPU-hours",
                                 ["why", "GPU-hours"],
                                 [[why, f"{h:g}"] for why, h in nr["gpu_hours"].items()]))
    notes = [[t, r, n] for t, d in (("left out", doc["left_out"]), ("note", doc["notes"]),
                                    ("skipped record", doc["skipped_reasons"]))
             for r, n in d.items()]
    if notes:
        parts.append(_html_table("Left out, notes and skipped records",
                                 ["", "reason", "count"], notes))
    return parts


def _html_table(title: str, head: Sequence[object], rows: Sequence[Sequence[object]]) -> str:
    e = html.escape
    return (f"<h2>{e(title)}</h2><table><tr>" + "".join(f"<th>{e(str(h))}</th>" for h in head)
            + "</tr>" + "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r)
                                + "</tr>" for r in rows) + "</table>")


def _plots(outcome: Replays, where: Path, usage: UsageRead | None) -> dict[str, str]:
    """The report's plots, written to ``where`` and returned base64 by file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images: dict[str, str] = {}
    fig, ax = plt.subplots(figsize=(6, 4))
    for w in RUNS:
        jct = sorted((t.end - t.arrival) / 3600 for t in outcome.times(w).values()
                     if t.end is not None)
        if jct:
            ax.step(jct, [(i + 1) / len(jct) for i in range(len(jct))], where="post",
                    label=w, color=_COLOURS[w], linestyle=_LINES[w], linewidth=1.6)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (hours, from submission)")
    ax.set_ylabel("fraction of jobs")
    ax.legend()
    ax.set_title("JCT CDF")
    images["jct_cdf.png"] = _save(fig, where / "jct_cdf.png", plt)
    # Finished jobs per day: the three runs' bars side by side (lines on top of each
    # other were one line).
    fig, ax = plt.subplots(figsize=(6, 4))
    per_run = {w: Counter(int(t.end // 86400) for t in outcome.times(w).values()
                          if t.end is not None) for w in RUNS}
    width = 0.8 / len(RUNS)
    for i, w in enumerate(RUNS):
        days = per_run[w]
        xs = sorted(days)
        ax.bar([x + (i - (len(RUNS) - 1) / 2) * width for x in xs], [days[x] for x in xs],
               width=width, label=w, color=_COLOURS[w])
    ax.set_xlabel("day of the window")
    ax.set_ylabel("jobs finished")
    ax.legend()
    ax.set_title("Finished jobs per day")
    images["per_day.png"] = _save(fig, where / "per_day.png", plt)
    used = [(u.alloc_cpus, u.core_use) for u in (usage.jobs.values() if usage else ())
            if u.core_use is not None]   # (cores given, share of them kept busy)
    if used:
        fig, ax = plt.subplots(figsize=(6, 4))
        given = [c for c, _ in used]
        ax.scatter(given, [use * c for c, use in used], s=8, alpha=0.5,
                   label="jobs")
        top = max(given)
        ax.plot([0, top], [0, top], color="grey", linestyle="--", label="all cores busy")
        ax.set_xlabel("cores given")
        ax.set_ylabel("cores used (mean)")
        ax.legend()
        ax.set_title("Core use per job")
        images["core_use.png"] = _save(fig, where / "core_use.png", plt)
    return images


def _save(fig: Figure, path: Path, plt: ModuleType) -> str:
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


def _users(users: Sequence[str]) -> str:
    return ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")


def _x(r: float | None) -> str:
    return summary.ratio_words(r)


def _signed_h(d: float | None) -> str:
    return "n/a" if d is None else f"{d:+.3f} h"


def _pct(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{x * 100:+.1f}%"


def _h(x: object) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")
