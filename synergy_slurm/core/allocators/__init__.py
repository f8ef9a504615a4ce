"""Allocators: turn policy-ordered jobs into per-server shares."""

from ..ledger import PLACEMENTS
from .base import AdmittingAllocator, Allocator
from .opt import OptAllocator
from .simple import GreedyAllocator, ProportionalAllocator
from .tune import TuneAllocator
from .tune_plus import TunePlusAllocator
from .tune_ref import RefTuneAllocator

ALLOCATOR_NAMES = ("proportional", "greedy", "tune-ref", "tune", "tune-plus", "opt")


def get_allocator(name: str, placement: str | None = None,
                  opt_time_limit_s: float = 1.5) -> Allocator:
    """An allocator by name: proportional, greedy, tune-ref, tune, tune-plus or opt.

    ``tune`` is TUNE with interpolation (the default: it measures better, see
    benchmarks/core_round.py --opt-gap); ``tune-plus`` keeps TUNE's admission and shares
    cores and memory across the queue (tune_plus.py; docs/results/opt_gap.md); ``tune-ref``
    is the reference's TUNE rule for rule (tune_ref.py: used to reproduce the paper).
    ``placement`` (ledger.PLACEMENTS) overrides how GPUs are chosen: each allocator's
    default is the one it measured best with (tune-ref: the reference's "first-free").
    ``opt_time_limit_s``: OPT's wall-time safety net.
    """
    key = name.lower()
    alloc: Allocator
    if key == "proportional":
        alloc = ProportionalAllocator()
    elif key == "greedy":
        alloc = GreedyAllocator()
    elif key == "tune-ref":
        alloc = RefTuneAllocator()
    elif key == "tune":
        alloc = TuneAllocator()
    elif key == "tune-plus":
        alloc = TunePlusAllocator()
    elif key == "opt":
        alloc = OptAllocator(time_limit_s=opt_time_limit_s)
    else:
        raise ValueError(f"unknown allocator {name!r}; choose from {', '.join(ALLOCATOR_NAMES)}")
    if placement is not None:
        if placement not in PLACEMENTS:
            raise ValueError(f"unknown placement {placement!r}; choose from "
                             f"{', '.join(PLACEMENTS)}")
        alloc.placement = placement
    return alloc


__all__ = ["ALLOCATOR_NAMES", "PLACEMENTS", "AdmittingAllocator", "Allocator", "GreedyAllocator",
           "OptAllocator", "ProportionalAllocator", "RefTuneAllocator", "TuneAllocator",
           "TunePlusAllocator",
           "get_allocator"]
