"""Slurm's own scheduler as the replay models it: which waiting jobs start now, and where.

Slurm starts jobs in two passes (SchedMD's sched_config.html):

* the **main scheduler**, on events (a submission, a job's end, a release) and every
  ``sched_interval``: the queue in priority order; a job that fits now starts, and once a
  job of a partition is left pending no later job of that partition starts (so it does not
  take what the first one waits for);
* the **backfill scheduler**, every ``bf_interval``: the queue again, up to
  ``bf_max_job_test`` jobs, on a timeline of when the running jobs end *by their time
  limits* (Slurm cannot know sooner). A job starts if it fits now and, for its whole time
  limit, leaves room for every reservation made before it; a job that cannot start
  reserves its nodes from the earliest time it fits (within ``bf_window``): the whole
  nodes, not the cores and GPUs it would use there (backfill.c's node_space is a node
  bitmap per time slot; _add_reservation takes a job's nodes out of it, in 22.05 as in
  26.05). So a lower-priority job only goes ahead where it ends before the higher ones
  need its nodes, or does not touch them, even where they would leave it room (#42: on
  one node of 2 GPUs and 4 cores, a 1-core job waited behind a 3-core one for as long).

Both place a job as cons_tres does: a ``--gpus=N`` job by _eval_nodes' choice
(:func:`eval_nodes`: the nodes with the most GPUs it can use, in runs of consecutive
nodes, the tightest run, in it the node with the fewest free cores that holds it whole,
else spread; from 24.11 an idle node that holds it first: ``idle_first``), a
``--gres=gpu:k`` job on whole nodes of its per-node GPUs.
Pure: times are the caller's, nothing is read.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from .resources import MEM_EPS, ClusterState, PerGpu, Resources

# slurm.conf's defaults: bf_max_job_test (jobs tested per backfill pass) and bf_window
# (how far ahead reservations are made; a job that cannot start within it does not block).
BF_MAX_JOB_TEST = 500
BF_WINDOW_S = 24 * 3600.0
# bf_resolution: the backfill scheduler keeps when jobs begin and end in slots of this many
# seconds (a job's end rounded up to a slot), and a job may not run into the slot a
# reservation begins in: one that would end just as a bigger job's reservation begins
# waits (Slurm's backfill.c, _set_slot_time and its "begin_time <= end_time" test).
BF_RESOLUTION_S = 60.0


@dataclass(frozen=True)
class Waiting:
    """A job in Slurm's queue: its GPUs with their per-GPU share, its time limit (what
    Slurm plans with), its partition and the nodes it may run on."""

    id: int
    gpus: int
    share: PerGpu
    limit_s: float
    partition: str
    servers: frozenset[str]
    gpus_per_node: int = 0


@dataclass(frozen=True)
class Busy:
    """Resources a running job holds on ``server`` until ``until`` (its start plus its time
    limit: when Slurm expects them back)."""

    server: str
    resources: Resources
    until: float


@dataclass(frozen=True)
class Start:
    job_id: int
    placement: tuple[tuple[str, int], ...]


def _slot(t: float) -> float:
    return math.floor(t / BF_RESOLUTION_S) * BF_RESOLUTION_S


def _slot_end(t: float, d: float) -> float:
    """The slot a job from ``t`` for ``d`` seconds ends in (Slurm's _set_slot_time)."""
    return _slot(t + d + BF_RESOLUTION_S - 1)


class _Timeline:
    """Free resources per server now, when running jobs give theirs back, and the
    reservations made so far."""

    def __init__(self, cluster: ClusterState, busy: Sequence[Busy], now: float,
                 idle_first: bool = False) -> None:
        self.now = now
        self.idle_first = idle_first
        self.names = [s.name for s in cluster.servers]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.cap_gpus = [s.capacity.gpus for s in cluster.servers]
        self.free = [[g, c, m] for g, c, m in zip(*cluster.free_columns(), strict=True)]
        self.releases: list[list[tuple[float, int, int, float]]] = [[] for _ in self.names]
        self.reserved: list[list[tuple[float, float]]] = [[] for _ in self.names]
        for b in busy:
            i = self.index.get(b.server)
            if i is not None and b.until > now:
                r = b.resources
                self.releases[i].append((b.until, r.gpus, r.cpus, r.mem_gb))

    def free_at(self, i: int, t: float) -> list[float]:
        g, c, m = self.free[i]
        for when, dg, dc, dm in self.releases[i]:
            if when <= t:
                g, c, m = g + dg, c + dc, m + dm
        return [g, c, m]

    def room(self, i: int, free: Sequence[float], share: PerGpu, t: float, d: float) -> int:
        """How many GPUs at ``share`` fit on server ``i`` (``free``: its free_at ``t``)
        from ``t`` for ``d`` seconds (to the end of the ``BF_RESOLUTION_S`` slot it ends
        in, as Slurm plans it)."""
        if self.reserved[i]:
            end = _slot_end(t, d)
            if any(t0 <= t < t1 or (t < t0 and _slot(t0) <= end)
                   for t0, t1 in self.reserved[i]):
                return 0            # a higher-priority job's node for part of that time
        g, c, m = free
        k = int(g)
        if share.cpus > 0:
            k = min(k, int(c // share.cpus))
        if share.mem_gb > 0:
            k = min(k, math.floor((m + MEM_EPS) / share.mem_gb))
        return max(0, k)

    def place(self, job: Waiting, t: float) -> dict[int, int] | None:
        """Where ``job`` fits from ``t`` for its time limit, as cons_tres places it."""
        # Each candidate's free resources at t, worked out once per placement (a replay
        # places a job on every event: #17).
        free = {i: f for i in (self.index[n] for n in job.servers if n in self.index)
                if (f := self.free_at(i, t))[0] > 0}
        gpus_at = {i: f[0] for i, f in free.items()}
        if sum(gpus_at.values()) < job.gpus:
            return None
        mine = list(gpus_at)
        rooms = {i: self.room(i, free[i], job.share, t, job.limit_s) for i in mine}
        if job.gpus_per_node:
            k = job.gpus_per_node
            fullest = sorted(mine, key=lambda i: (gpus_at[i], self.names[i]))
            nodes = [i for i in fullest if rooms[i] >= k][:job.gpus // k]
            return {i: k for i in nodes} if len(nodes) * k == job.gpus else None
        if self.idle_first:
            # 24.11 and later: an idle node that holds the job goes first.
            idle = sorted(i for i in mine if rooms[i] >= job.gpus
                          and gpus_at[i] == self.cap_gpus[i])
            if idle:
                return {idle[0]: job.gpus}
        cpus = {i: free[i][1] for i in mine}
        return eval_nodes(len(self.names), rooms, cpus, job.gpus, job.share.cpus * job.gpus)

    def start(self, job: Waiting, placement: dict[int, int]) -> None:
        for i, n in placement.items():
            r = job.share.times(n)
            self.free[i] = [self.free[i][0] - r.gpus, self.free[i][1] - r.cpus,
                            self.free[i][2] - r.mem_gb]
            self.releases[i].append((self.now + job.limit_s, r.gpus, r.cpus, r.mem_gb))

    def reserve(self, job: Waiting, placement: dict[int, int], t: float) -> None:
        for i in placement:
            self.reserved[i].append((t, t + job.limit_s))

    def times_after(self) -> list[float]:
        """When anything is given back: the candidate start times of a reservation."""
        out = {when for rel in self.releases for when, *_ in rel if when > self.now}
        out |= {t1 for res in self.reserved for _, t1 in res if t1 > self.now}
        return sorted(out)

    def named(self, placement: dict[int, int]) -> tuple[tuple[str, int], ...]:
        return tuple((self.names[i], n) for i, n in sorted(placement.items()))


@dataclass
class _NodeRun:
    """Consecutive nodes (in the cluster's order) that hold as many of a job's GPUs each:
    what cons_tres's _eval_nodes calls a set of consecutive nodes of one weight."""

    nodes: list[int]
    gpus: int          # each node's usable GPUs (capped at the job's)
    cpus: float        # the set's free cores together

    def holds(self, gpus: int, cpus: float, room: Mapping[int, int]) -> bool:
        return sum(room[i] for i in self.nodes) >= gpus and self.cpus >= cpus


def eval_nodes(n_nodes: int, room: Mapping[int, int], free_cpus: Mapping[int, float],
               gpus: int, cpus: float) -> dict[int, int] | None:
    """Where cons_tres puts a ``--gpus=N`` job (22.05 to 26.05, select/cons_tres
    job_test.c): a node's scheduling weight falls with the GPUs the job could use there
    ("Favor nodes with more co-located GPUs", the low byte of sched_weight is 0xff minus
    that count, capped at the job's GPUs), and _eval_nodes takes runs of consecutive nodes
    of one weight, the lightest first: the nodes that hold it whole, else those with the
    most usable GPUs, not the fullest. Among runs of one weight the first that holds what
    is left wins, then one that holds it with fewer free cores (the tightest), and, while
    none holds it, the one with the most cores. In the chosen run a single node that holds
    the rest takes it (the fewest free cores), else its nodes in order. So a job that fits
    whole goes to the tightest node of the tightest run, which need not be the node with
    the fewest free GPUs (#42: of the saved 22.05 e2e_whatif runs' single-node starts
    where several nodes held the job, 80 of 81, fewest free GPUs 69). ``room``: the
    GPUs at the job's share each candidate node holds (absent or 0: not a candidate);
    ``free_cpus``: its free cores; ``cpus``: the cores the job asks for in all."""
    cap = {i: min(room.get(i, 0), gpus) for i in range(n_nodes)}
    runs: list[_NodeRun] = []
    for i in range(n_nodes):
        if cap[i] <= 0:
            continue
        last = runs[-1] if runs else None
        if last is not None and last.nodes[-1] == i - 1 and last.gpus == cap[i]:
            last.nodes.append(i)
            last.cpus += free_cpus[i]
        else:
            runs.append(_NodeRun([i], cap[i], free_cpus[i]))
    out: dict[int, int] = {}
    left, cpus_left = gpus, cpus
    while left > 0 and runs:
        best = _best_run(runs, left, cpus_left, cap)
        runs.remove(best)
        single = [i for i in best.nodes if cap[i] >= left]
        take = [min(single, key=lambda i: free_cpus[i])] if single else best.nodes
        for i in take:
            k = min(cap[i], left)
            out[i] = k
            left -= k
            cpus_left -= free_cpus[i]
            if left == 0:
                break
    return out if left == 0 else None


def _best_run(runs: Sequence[_NodeRun], gpus: int, cpus: float,
              room: Mapping[int, int]) -> _NodeRun:
    """_eval_nodes' choice of the next set (eval_nodes' docstring)."""
    best, best_holds = runs[0], runs[0].holds(gpus, cpus, room)
    for run in runs[1:]:
        holds = run.holds(gpus, cpus, room)
        if run.gpus > best.gpus or (run.gpus == best.gpus and (
                (holds and not best_holds) or (holds and run.cpus < best.cpus)
                or (not holds and run.cpus > best.cpus))):
            best, best_holds = run, holds
    return best


def main_pass(queue: Iterable[Waiting], cluster: ClusterState, now: float,
              partitions: Mapping[str, Collection[str]] | Collection[str] = (),
              idle_first: bool = False) -> list[Start]:
    """The main scheduler: ``queue`` in priority order; what fits now starts, and a
    partition stops at its first job that does not (once every one of ``partitions`` has,
    the rest of the queue is not read). Where ``partitions`` maps each partition to its
    nodes, a partition that stops also takes its nodes from every later job, whatever its
    partition (Slurm: "do not schedule more jobs in this partition or on nodes in this
    partition"): on a site whose partitions share nodes, a job waiting in one holds back
    the others' jobs there until the backfill pass. ``idle_first``: a job that fits whole
    on an idle node goes there before any other (24.11 and later)."""
    line = _Timeline(cluster, (), now, idle_first)
    nodes_of = partitions if isinstance(partitions, Mapping) else {}
    blocked: set[str] = set()
    closed: set[str] = set()
    out: list[Start] = []
    for job in queue:
        if job.partition in blocked:
            continue
        if partitions and blocked >= set(partitions):
            break
        open_job = replace(job, servers=job.servers - closed) if closed else job
        where = line.place(open_job, now)
        if where is None:
            blocked.add(job.partition)
            closed |= set(nodes_of.get(job.partition, ()))
            continue
        line.start(job, where)
        out.append(Start(job.id, line.named(where)))
    return out


def backfill_pass(queue: Iterable[Waiting], cluster: ClusterState, busy: Sequence[Busy],
                  now: float, max_job_test: int = BF_MAX_JOB_TEST,
                  window_s: float = BF_WINDOW_S, idle_first: bool = False) -> list[Start]:
    """The backfill scheduler: the first ``max_job_test`` jobs of ``queue`` (priority
    order) on the timeline of ``busy`` (what ``cluster.reserved`` holds, with when Slurm
    expects it back; anything not in ``busy`` is held for good). Returns the jobs that start
    now; the others' reservations only shape this pass, as in Slurm, which plans afresh
    every pass (``idle_first``: as main_pass)."""
    line = _Timeline(cluster, busy, now, idle_first)
    out: list[Start] = []
    for job in itertools.islice(queue, max_job_test):
        where = line.place(job, now)
        if where is not None:
            line.start(job, where)
            out.append(Start(job.id, line.named(where)))
            continue
        for t in line.times_after():
            if t > now + window_s:
                break
            where = line.place(job, t)
            if where is not None:
                line.reserve(job, where, t)
                break
    return out
