"""Run a trace through the simulator its config names: the paper's rounds for a
:class:`.config.RoundsConfig` (or a plain :class:`.config.SimConfig`), the controller model
for a :class:`.config.SlurmConfig`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..core import Profile
from .config import SimConfig, SlurmConfig
from .controller_model import simulate_slurm
from .engine import simulate_rounds
from .results import SimResult
from .trace import TraceJob


def simulate(trace: Iterable[TraceJob], profiles: Mapping[str, Profile], config: SimConfig,
             on_round: Callable[[float, int], None] | None = None,
             max_rounds: int = 10_000_000) -> SimResult:
    if isinstance(config, SlurmConfig):
        return simulate_slurm(trace, profiles, config, on_round, max_rounds)
    return simulate_rounds(trace, profiles, config, on_round, max_rounds)
