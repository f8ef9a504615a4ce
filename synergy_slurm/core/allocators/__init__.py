"""Allocators: turn policy-ordered jobs into per-server shares."""

from .base import Allocator
from .opt import OptAllocator
from .simple import GreedyAllocator, ProportionalAllocator
from .tune import TuneAllocator

ALLOCATOR_NAMES = ("proportional", "greedy", "tune-ref", "tune", "opt")


def get_allocator(name: str, **opts: float) -> Allocator:
    """An allocator by name: proportional, greedy, tune-ref, tune or opt.

    ``tune`` is TUNE with interpolation (the default: it measures better, see
    benchmarks/core_round.py --opt-gap); ``tune-ref`` is the reference's TUNE, which only
    ever gives a job its ideal share or proportional (used to reproduce the paper).
    """
    key = name.lower()
    if key == "proportional":
        return ProportionalAllocator()
    if key == "greedy":
        return GreedyAllocator()
    if key == "tune-ref":
        return TuneAllocator(interpolate=False)
    if key == "tune":
        return TuneAllocator(interpolate=True)
    if key == "opt":
        return OptAllocator(**opts)
    raise ValueError(f"unknown allocator {name!r}; choose from {', '.join(ALLOCATOR_NAMES)}")


__all__ = ["ALLOCATOR_NAMES", "Allocator", "GreedyAllocator", "OptAllocator",
           "ProportionalAllocator", "TuneAllocator", "get_allocator"]
