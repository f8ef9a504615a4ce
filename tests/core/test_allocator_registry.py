"""The allocators' one registry: every listed name builds its own allocator, a name not
listed is refused with the list, and OPT gets its time limit."""

import pytest

from synergy_slurm.core import ALLOCATOR_NAMES, get_allocator
from synergy_slurm.core.allocators import ALLOCATORS, OptAllocator


def test_names_are_the_registry() -> None:
    assert tuple(ALLOCATORS) == ALLOCATOR_NAMES
    built = [type(get_allocator(name)) for name in ALLOCATOR_NAMES]
    assert len(set(built)) == len(ALLOCATOR_NAMES)      # each name its own allocator


def test_each_call_builds_a_new_allocator() -> None:
    # A placement set on one must not leak into the next caller's.
    first = get_allocator("tune", placement="first-free")
    assert get_allocator("tune") is not first
    assert first.placement == "first-free"
    assert get_allocator("TUNE").placement == "fullest"


def test_unknown_name_lists_the_registry() -> None:
    with pytest.raises(ValueError, match="unknown allocator 'magic'; choose from " +
                       ", ".join(ALLOCATOR_NAMES)):
        get_allocator("magic")


def test_opt_gets_its_time_limit() -> None:
    opt = get_allocator("opt", opt_time_limit_s=7.0)
    assert isinstance(opt, OptAllocator)
    assert opt.time_limit_s == 7.0
