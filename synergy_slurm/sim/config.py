"""What a simulation is asked to run: the two simulators' own config records.

* :class:`RoundsConfig`: the paper's rounds (:func:`.engine.simulate_rounds`): every
  ``round_s`` the whole cluster is planned afresh and jobs move freely.
* :class:`SlurmConfig`: the controller model (:func:`.controller_model.simulate_slurm`):
  Slurm's queue, main and backfill passes, with synergy's hook and controller unless the
  allocator is proportional; ``round_s`` is Slurm's scheduling interval.

Both share :class:`SimConfig`'s fields; each has only the fields it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core import ClusterState, PerGpu, Resources
from ..core.backfill import BF_MAX_JOB_TEST
from ..core.pools import Pool
from ..core.usage import UsageRule
from ..decide import ControllerSettings


@dataclass(frozen=True)
class Occupancy:
    """``resources`` held on ``server`` from ``start`` to ``end`` (simulated seconds)."""

    start: float
    end: float
    server: str
    resources: Resources


@dataclass(frozen=True)
class SimConfig:
    """What both simulators read."""

    cluster: ClusterState
    policy: str = "fifo"
    allocator: str = "tune"
    round_s: float = 300.0
    restart_cost_s: float = 0.0
    window: tuple[int, int] | None = None
    opt_time_limit_s: float = 1.5
    # How GPUs are chosen (core.ledger.PLACEMENTS); None: the allocator's own default.
    placement: str | None = None
    # Resources held at given times whatever the scheduler does (a history's jobs without
    # GPUs, which synergy never moves): each reserved on its server while it runs.
    background: tuple[Occupancy, ...] = ()
    # The closed loop (core.usage): each round, running jobs' use is sampled and a user's
    # key whose jobs use far less than they are given is capped for that user's later
    # jobs. None: profiles are trusted.
    usage: UsageRule | None = None
    # Marks the closed loop made before the run (whatif: from the history's measured use):
    # (profile key, user) -> the cap on those jobs; the controller keeps a mark until an
    # admin clears it.
    caps: Mapping[tuple[str, str], PerGpu] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.round_s <= 0:
            raise ValueError("round length must be positive")
        if self.restart_cost_s < 0:
            raise ValueError("restart cost must not be negative")


@dataclass(frozen=True)
class RoundsConfig(SimConfig):
    """The paper's rounds; ``reference_speedups``: the reference simulator's own speedup
    rule (tune-ref's), for paper mode."""

    reference_speedups: bool = False


@dataclass(frozen=True)
class SlurmConfig(SimConfig):
    """The controller model on a site's Slurm."""

    # Requeue running jobs into idle resources when it pays (as the controller does), at
    # most this many per round, each job at most every interval.
    requeue_budget: int = 0
    requeue_interval_s: float = 0.0
    # Requeue only trace jobs that opted in (TraceJob.requeue_ok), as the controller does
    # with a site's jobs; False: any running job (the simulator's generated traces).
    requeue_opt_in: bool = False
    # Running jobs report their progress ([usage] progress_dir, with a total): the
    # controller knows the work they have left, not only their time limits.
    progress_reports: bool = False
    # Lower running jobs' memory to what their profiles need, in place (as the controller
    # does where Slurm can: 26.05).
    shrink_memory: bool = False
    # The site's partitions (core.pools.Pool; empty: one pool over ``cluster``), the
    # controller's round (0: ``round_s``), how long after a release Slurm sees the job,
    # whether the release honours lowering a pending job (26.05: known profiles start
    # unheld, shaped by the hook) and the backfill's depth (bf_max_job_test).
    pools: tuple[Pool, ...] = ()
    controller_interval_s: float = 0.0
    release_delay_s: float = 0.0
    lowers_pending: bool = False
    bf_max_job_test: int = BF_MAX_JOB_TEST
    # cons_tres puts a job that fits whole on an idle node there before any other node
    # (24.11 and later: Release.prefers_idle_node; core.backfill).
    idle_first: bool = False
    # The hook's [hook] hold_known / hold_unknown (known profiles are never held where the
    # release honours lowering, as the controller tells the hook).
    hold_known: bool = True
    hold_unknown: bool = True
    # The order of Slurm's queue ("": ``policy``, which is also the order of the
    # controller's plan), and the time limit of trace jobs without one (0: unlimited).
    slurm_order: str = ""
    default_time_limit_s: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.controller_interval_s < 0 or self.release_delay_s < 0:
            raise ValueError("the controller's interval and release delay must not be "
                             "negative")


def slurm_config(settings: ControllerSettings, cluster: ClusterState, allocator: str,
                 pools: tuple[Pool, ...] = (), **extra: Any) -> SlurmConfig:
    """The controller model's config for the site's ``settings`` (the one mapping whatif's
    replay and the demo's prediction use); ``extra``: what only the caller knows (the
    queue's order, the background, the closed loop's caps, ...). Jobs are requeued only
    where they opted in, as the controller requeues them."""
    fields: dict[str, Any] = {
        "policy": settings.policy, "round_s": settings.sched_s,
        "restart_cost_s": settings.restart_cost_s, "pools": tuple(pools),
        "requeue_budget": settings.requeue_budget if allocator != "proportional" else 0,
        "requeue_interval_s": settings.requeue_interval_s, "requeue_opt_in": True,
        "shrink_memory": settings.shrink_memory, "controller_interval_s": settings.interval_s,
        "release_delay_s": settings.release_delay_s,
        "lowers_pending": settings.lowers_pending, "hold_known": settings.hold_known,
        "hold_unknown": settings.hold_unknown}
    return SlurmConfig(cluster, allocator=allocator, **{**fields, **extra})
