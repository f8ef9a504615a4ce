"""The report's first screen: the answer to the admin's question, how far to trust it, the
warnings this history earns, and what to do next.

The answer is never a figure that carries the replay's own error. Where synergy did not
run, it is the forecast: the plain replay against the synergy replay, both through the
same model, so the model's error on what happened cancels. Where synergy did run, it is
what happened (Slurm's records) against the plain replay, and labelled so. How far to
trust either is the replay of what ran against what happened, split into the waiting and
the running it misses.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..slurm.sacct import HistoryJob

# A replay that misses more than this share of the history's mean JCT, or of its mean wait
# (where waiting is at least WAIT_MATTERS of the JCT), earns a warning.
JCT_MISS = 0.10
WAIT_MISS = 0.25
WAIT_MATTERS = 0.05
MIN_WAIT_S = 30.0
# The history's jobs ran on fewer than this share of the nodes (or, at their busiest,
# GPUs) described: the export lacks load, or the cluster described is not theirs.
USED_SHARE = 0.5
# A forecast within this of 1.0 is "no change".
SAME = 0.005
# GPU jobs spread over several nodes whose layout the export does not record (-X) hold
# at least this share of the GPU-hours: their work may be overstated.
SPREAD_UNRECORDED = 0.05


@dataclass(frozen=True)
class Warning:
    """Something in this history that limits the replay, and what to check."""

    what: str
    check: str

    def as_dict(self) -> dict[str, str]:
        return {"what": self.what, "check": self.check}


def ratio_words(r: float | None, what: str = "") -> str:
    """``1.23x shorter``, ``1.23x longer`` (for a ratio below 1: its inverse), ``no
    change (1.00x)``; n/a where there is no figure."""
    if r is None or r != r:
        return "n/a"
    if abs(r - 1.0) < SAME:
        return f"no change{(' in ' + what) if what else ''} (1.00x)"
    if r > 1.0:
        return f"{r:.2f}x shorter{(' ' + what) if what else ''}"
    return f"{1.0 / r:.2f}x longer{(' ' + what) if what else ''}"


def headline(ran: str, forecast: Mapping[str, float | None], measured: Mapping[str, float | None],
             jobs: int) -> dict[str, Any]:
    """The answer in one record: ``kind`` forecast (synergy did not run: the plain replay's
    mean JCT over the synergy replay's; ``forecast`` agrees) or measured (synergy ran:
    what happened against the plain replay)."""
    if ran == "plain":
        return {"kind": "forecast", "jobs": jobs, "jct_mean": forecast.get("expected"),
                "guaranteed": forecast.get("guaranteed"),
                "optimistic": forecast.get("optimistic"),
                "makespan": measured.get("forecast_makespan"),
                "basis": "plain replay / synergy replay (the replay's own error cancels)"}
    return {"kind": "measured", "jobs": jobs, "jct_mean": measured.get("jct_mean"),
            "makespan": measured.get("makespan"), "guaranteed": None, "optimistic": None,
            "basis": "the plain replay / what happened under synergy (Slurm's records)"}


def headline_text(h: Mapping[str, Any]) -> list[str]:
    """The first lines a reader sees."""
    x = h["jct_mean"]
    if h["kind"] == "measured":
        return [f"Synergy ran in this window: against the replay without it, {_jct_words(x)}"
                f", for these {h['jobs']} GPU jobs (measured: what happened, from "
                "Slurm's records, against the plain replay)."]
    extra = [f"guaranteed {_short(h['guaranteed'])}"] if h["guaranteed"] else []
    if h["optimistic"]:
        extra.append(f"optimistic {_short(h['optimistic'])}")
    lines = [f"Expected with synergy: {_jct_words(x)}"
             + (f" ({', '.join(extra)})" if extra else "")
             + f", for these {h['jobs']} GPU jobs (forecast: replay against replay)."]
    if x is not None and x < 1.0 - SAME:
        lines.append("  That is a loss: in the synergy replay jobs wait longer than their "
                     "reshaping saves (held until the controller's round, or moved by "
                     "requeues); see the waits below, and --controller-interval.")
    elif x is not None and abs(x - 1.0) < SAME:
        lines.append("  No change: synergy reshapes none (or almost none) of these jobs; "
                     "profile the keys below to let it.")
    return lines


def _jct_words(r: float | None) -> str:
    if r is not None and abs(r - 1.0) < SAME:
        return "no change in mean JCT (1.00x)"
    return f"mean JCT {ratio_words(r)}"


def _short(r: float | None) -> str:
    """A ratio as a gain or a loss in one word: 1.23x, 1.00x, or 1.23x longer."""
    if r is None or r != r:
        return "n/a"
    return f"{r:.2f}x" if r >= 1.0 - SAME else f"{1.0 / r:.2f}x longer"


def trust(fid: Mapping[str, float | str], actual: Mapping[str, float],
          replayed: Mapping[str, float]) -> dict[str, Any]:
    """How far the replay of what ran follows what happened: its error per metric, and
    what its mean-JCT error is made of (waiting missed, running missed), in hours and as
    a share of the history's."""
    wait_a, wait_r = actual["wait_mean_h"], replayed["wait_mean_h"]
    run_a = actual["jct_mean_h"] - wait_a
    run_r = replayed["jct_mean_h"] - wait_r
    return {"of": fid["of"], "jct_mean": fid["jct_mean"], "makespan": fid["makespan"],
            "jct_p99": fid["jct_p99"],
            "wait_h": {"history": round(wait_a, 4), "replay": round(wait_r, 4),
                       "missed_share": round((wait_a - wait_r) / wait_a, 4) if wait_a > 0
                       else 0.0},
            "run_h": {"history": round(run_a, 4), "replay": round(run_r, 4)}}


def trust_text(t: Mapping[str, Any]) -> list[str]:
    w, r = t["wait_h"], t["run_h"]
    return [f"How far to trust it: the {t['of']} replay against what happened: mean JCT "
            f"{_pct(t['jct_mean'])}, makespan {_pct(t['makespan'])}, p99 JCT "
            f"{_pct(t['jct_p99'])}.",
            f"  Made of: waiting {_dur(w['replay'])} replayed against {_dur(w['history'])} "
            f"in the history ({_pct(-w['missed_share'])}), running {_dur(r['replay'])} "
            f"against {_dur(r['history'])}."]


def warnings(t: Mapping[str, Any], actual_jct_h: float, nodes_used: int, nodes_described: int,
             peak_gpus: int, gpus_described: int, release_read: bool,
             skipped: Mapping[str, int], spread_unrecorded: float = 0.0) -> list[Warning]:
    """What this history earns (module constants): a replay that misses the waiting or
    the JCT, jobs that used far less of the cluster than described, a release assumed
    rather than read, records skipped, spread jobs whose layout the export lacks
    (``spread_unrecorded``: their share of the GPU-hours, :func:`spread_unrecorded`)."""
    out: list[Warning] = []
    w = t["wait_h"]
    if w["history"] >= max(WAIT_MATTERS * actual_jct_h, MIN_WAIT_S / 3600) \
            and abs(w["missed_share"]) > WAIT_MISS:
        how = "misses" if w["missed_share"] > 0 else "adds"
        out.append(Warning(
            f"the replay {how} {abs(w['missed_share']):.0%} of the history's waiting "
            f"({_dur(w['replay'])} replayed, {_dur(w['history'])} in the history)",
            "the export may lack the jobs that kept the cluster busy: export every "
            "partition and account (sacct -a, no -r/-A filter) over the whole window "
            "(-S/-E), and describe the nodes the jobs really ran on (--cluster)"))
    jct = t["jct_mean"]
    if isinstance(jct, float) and jct == jct and abs(jct) > JCT_MISS:
        out.append(Warning(f"the replay's mean JCT is {_pct(jct)} off what happened",
                           "read the forecast as replay against replay only; check the "
                           "cluster description and --startup-seconds"))
    if nodes_described and 0 < nodes_used < USED_SHARE * nodes_described:
        out.append(Warning(
            f"the history's GPU jobs ran on {nodes_used} of the {nodes_described} nodes "
            "described", "give --cluster the nodes and partitions these jobs ran on, or "
            "export the partitions missing from the history"))
    if gpus_described and 0 < peak_gpus < USED_SHARE * gpus_described:
        out.append(Warning(
            f"at their busiest the history's jobs held {peak_gpus} of the "
            f"{gpus_described} GPUs described ({peak_gpus / gpus_described:.0%})",
            "the export lacks load (another partition, cluster or account) or the "
            "cluster described is bigger than theirs"))
    if not release_read:
        out.append(Warning("the Slurm release was not read (no scontrol answered): the "
                           "synergy replay assumes 22.05's rules (known profiles held, but "
                           "those within the proportional share while none waits held)",
                           "give --slurm-release X.Y (26.05 and later shape at submission)"))
    if spread_unrecorded >= SPREAD_UNRECORDED:
        out.append(Warning(
            f"jobs spread over several nodes hold {spread_unrecorded:.0%} of the GPU-hours "
            "and the export does not say how their cores were laid out: each is taken as "
            "even, which overstates the work of one Slurm gave few cores on a node",
            "export without -X (sacct -a -D --json): each job's batch step records its "
            "node's share"))
    n = sum(skipped.values())
    if n:
        top = max(skipped, key=lambda k: skipped[k])
        out.append(Warning(f"{n} records could not be read and were skipped (most: {top})",
                           "see 'skipped records' below; export with the fields the "
                           "--from help names"))
    return out


def next_steps(keys: Sequence[Mapping[str, Any]], warned: bool) -> list[str]:
    """What to do next, in order."""
    out: list[str] = []
    if warned:
        out.append("Check the warnings above before acting on the forecast.")
    if keys:
        k = keys[0]
        out.append(f"Profile the jobs synergy would gain most on: {k['key']} first "
                   f"({k['gpu_hours']:g} GPU-h): {k['profile_run']}")
    out.append(f"{'Then run' if out else 'Run'} synergy in dry-run for a week (synergy "
               "controller run --dry-run) and compare with this forecast.")
    return out


def nodes_and_peak(jobs: Sequence[HistoryJob], described: set[str]) -> tuple[int, int]:
    """Distinct described nodes the GPU jobs ran on (NodeList), and the most GPUs they held
    at once."""
    used = {n for j in jobs for n in j.nodes if n in described}
    events = sorted((t, d) for j in jobs if j.start is not None
                    for t, d in ((j.start, j.gpus), (j.end if j.end is not None
                                                     else float("inf"), -j.gpus)))
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return len(used), peak


def spread_unrecorded(jobs: Sequence[HistoryJob], paced: Container[int]) -> float:
    """The share of the GPU jobs' GPU-hours held by jobs of ``paced`` (those whose pace
    the replay reads: a profile, a run to its end) that ran on several nodes, in an export
    that records no job's batch step (``-X``); 0.0 where it records any (a job without
    one there is an allocation with no batch script, not a layout left out)."""
    if any(j.batch_node is not None for j in jobs):
        return 0.0
    hours = [(j.gpus * (j.elapsed_s or 0.0), len(j.nodes) > 1 and j.job_id in paced)
             for j in jobs if j.gpus > 0]
    total = sum(h for h, _ in hours)
    return sum(h for h, unknown in hours if unknown) / total if total else 0.0


def _dur(hours: float) -> str:
    """A mean duration in the unit that reads best: h, min or s."""
    if abs(hours) >= 1.0:
        return f"{hours:.2f} h"
    if abs(hours) * 60 >= 1.0:
        return f"{hours * 60:.1f} min"
    return f"{hours * 3600:.0f} s"


def _pct(x: float | str | None) -> str:
    if not isinstance(x, float | int) or x != x:
        return "n/a"
    return f"{x * 100:+.1f}%"
