"""Prometheus metrics, on a registry of the controller's own (no global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


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

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        start_http_server(port, addr=addr, registry=self.registry)
