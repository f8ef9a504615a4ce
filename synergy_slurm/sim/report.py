"""Results on disk: per-job CSV, a summary, and the paper-style plots (PNG)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .metrics import in_window, summary_row
from .results import SimResult


def write_results(out: Path, runs: Sequence[tuple[SimResult, float | None]]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    jobs_csv = out / "jobs.csv"
    with jobs_csv.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "allocator", "load", "job_id", "model", "gpus", "arrival_s",
                    "start_s", "finish_s", "jct_h", "restarts", "in_window"])
        for res, load in runs:
            win = {j.job_id for j in in_window(res.jobs, res.config.window)}
            for j in res.jobs:
                w.writerow([res.config.policy, res.config.allocator, _fmt(load), j.job_id,
                            j.model, j.gpus, j.arrival, _fmt(j.start), _fmt(j.finish),
                            _fmt(None if j.jct_s is None else round(j.jct_s / 3600, 4)),
                            j.restarts, int(j.job_id in win)])
    written.append(jobs_csv)
    rows = [summary_row(r, load) for r, load in runs]
    summary = out / "summary.json"
    summary.write_text(json.dumps(rows, indent=1) + "\n")
    written.append(summary)
    written += plot(out, runs)
    return written


def plot(out: Path, runs: Sequence[tuple[SimResult, float | None]]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    loads = sorted({load for _, load in runs}, key=lambda x: -1 if x is None else x)
    for load in loads:
        fig, ax = plt.subplots(figsize=(6, 4))
        for res, lo in runs:
            if lo != load:
                continue
            jct = np.sort([j.jct_s / 3600 for j in in_window(res.jobs, res.config.window)
                           if j.jct_s is not None])
            if len(jct):
                ax.plot(jct, np.arange(1, len(jct) + 1) / len(jct),
                        label=f"{res.config.policy.upper()}+{res.config.allocator}")
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h)")
        ax.set_ylabel("fraction of jobs")
        ax.set_title("JCT CDF" + ("" if load is None else f" at {load:g} jobs/hour"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        name = out / ("jct_cdf.png" if load is None else f"jct_cdf_load{load:g}.png")
        fig.tight_layout()
        fig.savefig(name, dpi=120)
        plt.close(fig)
        written.append(name)
    numeric = [x for x in loads if x is not None]
    if len(numeric) > 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        schedulers = sorted({(r.config.policy, r.config.allocator) for r, _ in runs})
        for pol, alloc in schedulers:
            pts = sorted((lo, summary_row(r, lo)["mean_jct_h"]) for r, lo in runs
                         if (r.config.policy, r.config.allocator) == (pol, alloc)
                         and lo is not None)
            style = "-" if alloc != "proportional" else "--"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o",
                    label=f"{pol.upper()}+{alloc}")
        ax.set_xlabel("load (jobs/hour)")
        ax.set_ylabel("average JCT (h)")
        ax.set_title("Average JCT vs load")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        name = out / "avg_jct_vs_load.png"
        fig.savefig(name, dpi=120)
        plt.close(fig)
        written.append(name)
    return written


def _fmt(x: object) -> str:
    return "" if x is None else str(x)
