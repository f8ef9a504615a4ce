"""Repair passes after a plan is packed: move cores and memory between jobs on one server.

Why: packing places each job at a target chosen as if the cluster were one machine; on the
real servers some targets do not fit (the job is lowered) and some room is left idle where
no target wanted it. Two local moves recover most of that (docs/results/opt_gap.md):
idle room to the job that gains most from it, and a trade between two jobs on one server,
one a step down, the other a bigger step up. Every share tried is one of the job's
candidate shares, each keeping its floor, so no job falls below its proportional
throughput; every move is checked on all the servers a job spans. Jobs and servers are
visited in a fixed order, so the result is deterministic.
"""

from __future__ import annotations

from ..demand import FLOOR_TOLERANCE, Demand
from ..ledger import Held, Ledger
from ..resources import MEM_EPS

GAIN_EPS = 1e-9
MAX_PASSES = 8


def repair(ledger: Ledger, cands: dict[int, list[Demand]]) -> None:
    """Idle room to the best gains, then trades on each server, until neither helps (at
    most MAX_PASSES rounds of both)."""
    for _ in range(MAX_PASSES):
        moved = fill_idle(ledger, cands)
        moved = trade_on_servers(ledger, cands) or moved
        if not moved:
            return


def fill_idle(ledger: Ledger, cands: dict[int, list[Demand]]) -> bool:
    """On each server with cores or memory idle, raise its jobs into that room, the
    biggest gain first (a job that spans servers: where all of them have the room)."""
    moved = False
    for i in range(ledger.n_servers):
        while True:
            _, fc, fm = ledger.free_on(i)
            if fc <= 0 and fm <= MEM_EPS:
                break
            best: tuple[float, int, Demand] | None = None
            for jid in sorted(ledger.on_server[i]):
                h = ledger.held[jid]
                for d in cands.get(jid, ()):
                    gain = d.speedup - h.speedup
                    if gain > GAIN_EPS and (best is None or gain > best[0] + GAIN_EPS) \
                            and ledger.can_reshape(jid, d.share):
                        best = (gain, jid, d)
            if best is None:
                break
            ledger.reshape(best[1], best[2])
            moved = True
    return moved


def trade_on_servers(ledger: Ledger, cands: dict[int, list[Demand]]) -> bool:
    """On each server, the best trade between two of its jobs: one down to a cheaper
    candidate, the other up, where the sum of speedups grows and every server the two
    span still has room."""
    moved = False
    for i in range(ledger.n_servers):
        while True:
            best = best_trade(ledger, cands, sorted(ledger.on_server[i]))
            if best is None:
                break
            _, changes = best
            ledger.reshape_together(changes)
            moved = True
    return moved


def best_trade(ledger: Ledger, cands: dict[int, list[Demand]], ids: list[int]
               ) -> tuple[float, list[tuple[int, Demand]]] | None:
    best: tuple[float, list[tuple[int, Demand]]] | None = None
    held = [ledger.held[j] for j in ids]
    for down in held:
        lower = [d for d in cands.get(down.job.id, ())
                 if d.speedup < down.speedup and d.speedup >= 1.0 - FLOOR_TOLERANCE
                 and _frees(down, d)]
        if not lower:
            continue
        for up in held:
            if up is down:
                continue
            for du in cands.get(up.job.id, ()):
                if du.speedup <= up.speedup + GAIN_EPS:
                    continue
                for dd in lower:
                    gain = du.speedup - up.speedup + dd.speedup - down.speedup
                    if gain <= GAIN_EPS or (best is not None and gain <= best[0] + GAIN_EPS):
                        continue
                    changes = [(down.job.id, dd), (up.job.id, du)]
                    if ledger.can_reshape_together(changes):
                        best = (gain, changes)
    return best


def _frees(h: Held, d: Demand) -> bool:
    """Whether ``d`` gives back cores or memory (a trade's lower side must free some)."""
    return d.share.cpus < h.share.cpus or d.share.mem_gb < h.share.mem_gb
