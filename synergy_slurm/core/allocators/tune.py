"""Synergy-TUNE: ideal share if it fits, else lower itself to proportional, else lower peers.

Step 3 only lowers jobs that hold more than the proportional share; once every job on a
server is within it, a proportional GPU fits on each free GPU, so an admitted job is always
placed (where lowering the peers of a few servers does not free the room, every job above
its share is lowered at once: place_after_lowering_all). Beyond the reference (whose rule
for rule twin is tune_ref.py), it tries the best grid point between the ideal and the
proportional share that fits before dropping to proportional, and after the round hands
cores and memory left idle on a server to the jobs there that were lowered.
"""

from __future__ import annotations

from ..demand import Demand, fair_capped, ideal_demand, intermediate_points
from ..job import JobSpec
from ..ledger import Ledger
from ..plan import How
from .base import AdmittingAllocator


class TuneAllocator(AdmittingAllocator):
    name = "tune"

    def admit(self, job: JobSpec, ledger: Ledger) -> str | None:
        return place_tuned(job, ideal_demand(job, ledger.fair, ledger.cluster.servers), ledger)

    def finish(self, ledger: Ledger) -> None:
        upgrade_lowered(ledger)


def upgrade_lowered(ledger: Ledger) -> None:
    """Give idle cores and memory to jobs running below their ideal share, in admission
    order, each to the best point between its share and its ideal that fits on all of its
    servers."""
    for h in list(ledger.held.values()):
        wanted = ideal_demand(h.job, ledger.fair, ledger.cluster.servers)
        if wanted.speedup <= h.speedup or h.share == wanted.share:
            continue
        here = Demand(h.share, h.speedup, h.how)
        for d in [wanted, *intermediate_points(h.job, wanted.share, here, ledger.fair)]:
            if d.speedup > h.speedup and ledger.can_reshape(h.job.id, d.share):
                ledger.reshape(h.job.id, d)
                break


def place_tuned(job: JobSpec, wanted: Demand, ledger: Ledger) -> str | None:
    """TUNE's three steps for one job wanting ``wanted`` (shared with OPT's rounding)."""
    fair = ledger.fair
    placement = ledger.find_placement(job, wanted.share)
    if placement is not None:
        ledger.place(job, wanted, placement)
        return None
    lowered = fair_capped(job, wanted.share, fair) if not wanted.share.within(fair) else wanted
    for d in intermediate_points(job, wanted.share, lowered, fair):
        placement = ledger.find_placement(job, d.share)
        if placement is not None:
            ledger.place(job, d, placement)
            return None
    if lowered is not wanted:
        placement = ledger.find_placement(job, lowered.share)
        if placement is not None:
            ledger.place(job, lowered, placement)
            return None
    if place_with_peer_downgrade(job, lowered, ledger):
        return None
    if place_after_lowering_all(job, lowered, ledger):
        return None
    return "no room even after lowering peers to their proportional share"


def place_with_peer_downgrade(job: JobSpec, demand: Demand, ledger: Ledger) -> bool:
    """Lower peers on the fullest servers that can hold the job, whole if possible,
    else GPU by GPU; all or nothing."""
    mark = ledger.checkpoint()
    g = job.gpus
    if job.gpus_per_node:
        return _per_node_with_peer_downgrade(job, demand, ledger, mark)
    if g <= ledger.max_gpus:
        for i in ledger.servers_by_free_gpus(at_least=g):
            if ledger.free_up(i, g, demand.share):
                ledger.place(job, demand, {i: g})
                return True
    placement: dict[int, int] = {}
    left = g
    for i in ledger.servers_by_free_gpus(at_least=1):
        for k in range(min(left, ledger.free_on(i)[0]), 0, -1):
            if ledger.free_up(i, k, demand.share):
                placement[i] = k
                left -= k
                # Hold the GPUs now so later servers' checks see them taken.
                ledger.hold_room(i, k, demand.share)
                break
        if left == 0:
            break
    for i, k in placement.items():
        ledger.release_room(i, k, demand.share)
    if left == 0:
        ledger.place(job, demand, placement)
        return True
    ledger.rollback(mark)
    return False


def place_after_lowering_all(job: JobSpec, demand: Demand, ledger: Ledger) -> bool:
    """The last resort, for a job the free GPUs admit: every placed job above the
    proportional share lowered to it at once, then the job placed where it fits. Lowering
    the peers of the job's servers one server at a time misses room that needs a chain (a
    peer that spans servers needs cores on another server that a third job holds above
    its share). All or nothing; the interpolating TUNE hands idle room back after the
    round (upgrade_lowered)."""
    if ledger.free_gpus < job.gpus:
        return False
    changes = []
    for h in ledger.held.values():
        if not h.share.within(ledger.fair):
            t = fair_capped(h.job, h.share, ledger.fair)
            changes.append((h.job.id, Demand(t.share, t.speedup, How.PEER_DOWNGRADED)))
    if not changes or not ledger.can_reshape_together(changes):
        return False
    mark = ledger.checkpoint()
    ledger.reshape_together(changes)
    placement = ledger.find_placement(job, demand.share)
    if placement is None:
        ledger.rollback(mark)
        return False
    ledger.place(job, demand, placement)
    return True


def _per_node_with_peer_downgrade(job: JobSpec, demand: Demand, ledger: Ledger,
                                  mark: int) -> bool:
    """The peer downgrade for a request per node: whole nodes of ``gpus_per_node`` GPUs
    on the fullest servers that can free that much; all or nothing."""
    k = job.gpus_per_node
    placement: dict[int, int] = {}
    for i in ledger.servers_by_free_gpus(at_least=k):
        if ledger.free_up(i, k, demand.share):
            placement[i] = k
            ledger.hold_room(i, k, demand.share)
            if len(placement) * k == job.gpus:
                break
    for i in placement:
        ledger.release_room(i, k, demand.share)
    if len(placement) * k == job.gpus:
        ledger.place(job, demand, placement)
        return True
    ledger.rollback(mark)
    return False
