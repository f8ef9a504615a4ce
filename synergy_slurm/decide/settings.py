"""How the site's controller and Slurm run, as a replay or a prediction models them: one
record, built once from ``synergy.toml``'s ``[controller]`` and ``[hook]`` and what the
Slurm release offers (:meth:`ControllerSettings.from_config`), which whatif's replay, the
demo's prediction and the controller model all read (``sim.config.slurm_config`` turns it
into the model's config). The controller's round is ``interval_s`` everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..config import Config


@dataclass(frozen=True)
class ControllerSettings:
    """The controller's round (``interval_s``), the delay from its release to Slurm's
    start, whether the release honours lowering a pending job (and so the hook shapes
    known jobs at submission) and lowers running jobs' memory (and the site lets it), the
    requeue rule, Slurm's scheduling cadence (``sched_s``: bf_interval), the plan's
    policy, and the hook's holds."""

    interval_s: float = 30.0
    release_delay_s: float = 2.0
    lowers_pending: bool = False
    shrink_memory: bool = False
    requeue_budget: int = 0
    requeue_interval_s: float = 0.0
    restart_cost_s: float = 0.0
    sched_s: float = 30.0
    policy: str = "slurm"
    hold_known: bool = True
    hold_unknown: bool = True

    @classmethod
    def from_config(cls, cfg: Config, lowers_pending: bool = False,
                    lowers_running_memory: bool = False, **overrides: Any
                    ) -> ControllerSettings:
        """The settings ``cfg`` gives on a release that does (or does not) lower pending
        jobs and running jobs' memory; ``overrides``: fields a command's options set (a
        None value keeps the configuration's)."""
        c = cfg.controller
        base = cls(interval_s=c.interval_s, lowers_pending=lowers_pending,
                   shrink_memory=lowers_running_memory and c.shrink_running_memory,
                   requeue_budget=c.requeue_budget,
                   requeue_interval_s=c.requeue_min_interval_s,
                   restart_cost_s=c.restart_cost_s, policy=c.policy,
                   hold_known=cfg.hook.hold_known, hold_unknown=cfg.hook.hold_unknown)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})
