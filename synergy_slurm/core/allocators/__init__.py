"""Allocators: turn policy-ordered jobs into per-server shares."""

from collections.abc import Callable

from ..ledger import PLACEMENTS
from .base import AdmittingAllocator, Allocator
from .opt import OptAllocator
from .simple import GreedyAllocator, ProportionalAllocator
from .tune import TuneAllocator
from .tune_plus import TunePlusAllocator
from .tune_ref import RefTuneAllocator

# Every allocator by name, in the order the commands list them: adding one is one line here
# (a constructor taking OPT's wall-time limit, which the others ignore).
ALLOCATORS: dict[str, Callable[[float], Allocator]] = {
    "proportional": lambda _limit: ProportionalAllocator(),
    "greedy": lambda _limit: GreedyAllocator(),
    "tune-ref": lambda _limit: RefTuneAllocator(),
    "tune": lambda _limit: TuneAllocator(),
    "tune-plus": lambda _limit: TunePlusAllocator(),
    "opt": lambda limit: OptAllocator(time_limit_s=limit),
}
ALLOCATOR_NAMES = tuple(ALLOCATORS)


def get_allocator(name: str, placement: str | None = None,
                  opt_time_limit_s: float = 1.5, keeps_room: bool = False) -> Allocator:
    """A new allocator by name (``ALLOCATORS``: proportional, greedy, tune-ref, tune,
    tune-plus, opt).

    ``tune`` is TUNE with interpolation (the default: it measures better, see
    benchmarks/core_round.py --opt-gap); ``tune-plus`` keeps TUNE's admission and shares
    cores and memory across the queue (tune_plus.py; docs/results/opt_gap.md); ``tune-ref``
    is the reference's TUNE rule for rule (tune_ref.py: used to reproduce the paper).
    ``placement`` (ledger.PLACEMENTS) overrides how GPUs are chosen: each allocator's
    default is the one it measured best with (tune-ref: the reference's "first-free").
    ``opt_time_limit_s``: OPT's wall-time safety net. ``keeps_room``: a share above the
    proportional one leaves its servers' other free GPUs their proportional room
    (``Allocator.keeps_room``: where running jobs cannot be lowered, i.e. on Slurm).
    """
    try:
        make = ALLOCATORS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown allocator {name!r}; choose from "
                         f"{', '.join(ALLOCATOR_NAMES)}") from None
    alloc = make(opt_time_limit_s)
    if placement is not None:
        if placement not in PLACEMENTS:
            raise ValueError(f"unknown placement {placement!r}; choose from "
                             f"{', '.join(PLACEMENTS)}")
        alloc.placement = placement
    alloc.keeps_room = keeps_room
    return alloc


__all__ = ["ALLOCATORS", "ALLOCATOR_NAMES", "PLACEMENTS", "AdmittingAllocator", "Allocator",
           "GreedyAllocator", "OptAllocator", "ProportionalAllocator", "RefTuneAllocator",
           "TuneAllocator", "TunePlusAllocator", "get_allocator"]
