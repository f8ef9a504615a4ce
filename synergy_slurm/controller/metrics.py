"""Prometheus metrics, on a registry of the controller's own (no global state).

What an admin alerts on (docs/prometheus/synergy.rules.yml): the hook table's age as the
hook sees it (read from the file at each scrape, so a controller that stops beating shows
it), jobs the hook held and how long the oldest has waited, rounds failing in a row, the
mode, and GPU jobs that arrive without the hook's tag (the hook reads no table).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ..hook.table import TableError, parse_table

MODES = ("observe", "enforce")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rounds = Counter("synergy_rounds", "Controller rounds", ["result"], registry=r)
        self.actions = Counter("synergy_actions", "Actions by kind and result",
                               ["action", "result"], registry=r)
        self.errors = Counter("synergy_errors", "Errors (Slurm failures, ignored changes)",
                              ["kind"], registry=r)
        self.round_seconds = Histogram("synergy_round_seconds", "Round duration", registry=r,
                                       buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60))
        self.managed_jobs = Gauge("synergy_managed_jobs", "Managed GPU jobs", ["state"],
                                  registry=r)
        self.planned = Gauge("synergy_planned_throughput",
                             "Sum of planned jobs' speedups (normalised throughput)",
                             registry=r)
        self.suspects = Counter("synergy_suspect_keys",
                                "Keys marked suspect for a user by the closed loop (their "
                                "jobs used far less than they were given)", registry=r)
        self.watched = Gauge("synergy_watched_jobs",
                             "Running jobs whose use the closed loop read last time",
                             registry=r)
        self.proportional = Gauge("synergy_proportional_throughput",
                                  "The same jobs at their proportional share", registry=r)
        self.mode = Gauge("synergy_mode", "1 for the mode the controller runs in",
                          ["mode"], registry=r)
        self.interval = Gauge("synergy_interval_seconds", "Seconds between rounds "
                              "([controller] interval_s)", registry=r)
        self.failing = Gauge("synergy_failed_rounds_in_a_row",
                             "Rounds that failed since the last one that succeeded",
                             registry=r)
        self.last_ok = Gauge("synergy_last_round_ok_timestamp_seconds",
                             "When a round last succeeded", registry=r)
        self.held = Gauge("synergy_held_jobs", "Pending jobs the hook held (priority 0) for "
                          "the controller to shape and release", registry=r)
        self.held_oldest = Gauge("synergy_held_oldest_seconds",
                                 "How long the oldest job the hook held has waited since "
                                 "submission (0: none held)", registry=r)
        self.held_released = Gauge("synergy_held_after_release_seconds",
                                   "The longest a job has stayed held since a round "
                                   "decided to start it (release sent): over two rounds, "
                                   "the releases do not take", registry=r)
        self.table_time = Gauge("synergy_hook_table_generated_timestamp_seconds",
                                "The hook table's generated_at, read from the file the hook "
                                "reads (0: missing, unreadable or expired on purpose)",
                                registry=r)
        self.table_age = Gauge("synergy_hook_table_age_seconds",
                               "Seconds since the hook table was written (the hook ignores "
                               "it past synergy_hook_table_max_age_seconds)", registry=r)
        self.table_max_age = Gauge("synergy_hook_table_max_age_seconds",
                                   "The age past which the hook ignores the table "
                                   "([hook] max_age_s)", registry=r)
        self.untagged = Gauge("synergy_untagged_jobs",
                              "New GPU jobs in managed partitions, submitted while the "
                              "controller kept the table fresh, that arrived without the "
                              "hook's tag in the last rounds (the hook reads no table)",
                              registry=r)
        self._configuration(r)

    def _configuration(self, r: CollectorRegistry) -> None:
        """The configuration in force: when it was read, and the reloads (SIGHUP)."""
        self.config_time = Gauge("synergy_config_loaded_timestamp_seconds",
                                 "When the controller read synergy.toml (start or reload)",
                                 registry=r)
        self.config_age = Gauge("synergy_config_age_seconds",
                                "Seconds since the controller read synergy.toml (start "
                                "or the last reload that took)", registry=r)
        self.reloads = Counter("synergy_config_reloads", "Reloads (SIGHUP) by result: "
                               "failed keeps the running configuration", ["result"],
                               registry=r)

    def loaded(self, when: float) -> None:
        """The configuration in force was read at ``when`` (wall-clock)."""
        self.config_time.set(when)
        self.config_age.set_function(lambda: max(0.0, time.time() - when))

    def config(self, mode: str, interval_s: float, max_age_s: int) -> None:
        """The mode (1 for it, 0 for the others) and the settings alerts compare with."""
        for m in MODES:
            self.mode.labels(m).set(1 if m == mode else 0)
        self.interval.set(interval_s)
        self.table_max_age.set(max_age_s)

    def watch_table(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        """Read the table's generated_at from ``path`` at each scrape: what the hook sees,
        not what the controller meant to write."""
        def generated() -> float:
            try:
                return float(parse_table(path.read_text()).generated_at)
            except (OSError, UnicodeDecodeError, TableError, ValueError):
                return 0.0
        self.table_time.set_function(generated)
        self.table_age.set_function(lambda: max(0.0, clock() - generated()))

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        start_http_server(port, addr=addr, registry=self.registry)
