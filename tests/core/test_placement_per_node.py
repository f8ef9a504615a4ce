"""Placement as Slurm's cons_tres places: a --gpus=N job on the fullest node with room
(else spread, as Slurm spreads it), a per-node request (--gres=gpu:k) on whole nodes."""

import pytest

from synergy_slurm.core import ClusterState, JobSpec, Resources, get_allocator
from synergy_slurm.core.resources import Server


def _cluster(free_gpus: list[int]) -> ClusterState:
    servers = tuple(Server(f"n{i}", Resources(8, 24, 500.0)) for i in range(len(free_gpus)))
    used = tuple((f"n{i}", Resources(8 - g, 3 * (8 - g), 62.5 * (8 - g)))
                 for i, g in enumerate(free_gpus) if g < 8)
    return ClusterState(servers, used)


def test_a_per_node_request_never_splits_below_its_nodes():
    # No node has 4 GPUs free, 6 are free in all: --gpus=4 spreads (Slurm does, seen on
    # 22.05 and 26.05), --gres=gpu:4 waits.
    cluster = _cluster([2, 2, 2, 0])
    for name in ("proportional", "tune", "tune-plus", "greedy"):
        alloc = get_allocator(name)
        spread = alloc.allocate([JobSpec(1, 4)], cluster)
        assert spread.allocations and len(spread.allocations[0].placement) == 2
        whole = alloc.allocate([JobSpec(1, 4, gpus_per_node=4)], cluster)
        assert not whole.allocations and 1 in whole.skipped


def test_a_per_node_request_takes_whole_nodes_fullest_first():
    cluster = _cluster([4, 8, 5, 4])
    plan = get_allocator("tune").allocate([JobSpec(1, 8, gpus_per_node=4)], cluster)
    (a,) = plan.allocations
    assert sorted(a.placement) == [("n0", 4), ("n3", 4)]
    # --gpus=8 fits whole on n1 instead.
    plan = get_allocator("tune").allocate([JobSpec(1, 8)], cluster)
    assert plan.allocations[0].placement == (("n1", 8),)


def test_a_gpus_job_goes_whole_on_the_fullest_node_with_room():
    # Slurm put a 2-GPU job on the node with exactly 2 free, not the empty one.
    cluster = _cluster([6, 2, 8, 8])
    plan = get_allocator("proportional").allocate([JobSpec(1, 2)], cluster)
    assert plan.allocations[0].placement == (("n1", 2),)


def test_per_node_gpus_must_be_whole_nodes():
    with pytest.raises(ValueError, match="whole nodes"):
        JobSpec(1, 6, gpus_per_node=4)


@pytest.mark.parametrize("allocator", ["tune", "tune-plus"])
def test_tune_lowers_peers_on_whole_nodes_for_a_per_node_request(paper_profiles, allocator):
    # Two nodes, each with a 2-GPU res18 at its ideal (9 cores/GPU: 18 of 24 cores). A
    # --gres=gpu:4 -N2 job at the proportional share (12 cores a node) needs the peers
    # lowered on both nodes.
    two = ClusterState.uniform(2)
    first = [JobSpec(i, 2, submitted=float(i), profile=paper_profiles["res18"])
             for i in range(2)]
    late = JobSpec(9, 8, submitted=9.0, gpus_per_node=4)
    plan = get_allocator(allocator).allocate([*first, late], two)
    got = plan.by_job()
    assert sorted(got[9].placement) == [("s0", 4), ("s1", 4)]
    # Lowered below their ideal 9 cores/GPU to make room (then given back what is idle).
    assert all(got[i].share.cpus < 9 for i in range(2))
