"""Hypothesis strategies: random clusters, profiles and job mixes for the core's properties."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st

from synergy_slurm.core import ClusterState, JobSpec, PerGpu, Profile, Resources, Server

CPU_GRID = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)


def examples(n: int) -> int:
    """``n`` examples under hypothesis's default profile (100 examples), scaled with the
    profile loaded: the quick loop's ``--hypothesis-profile=quick`` (tests/conftest.py)
    runs about a third of them."""
    return max(10, n * settings.default.max_examples // 100)

MEM_GRID = (16.0, 32.0, 64.0, 128.0)


@st.composite
def profiles(draw, key: str = "p") -> Profile:
    """Random positive matrices, monotone or not: the allocators must keep the floor even for
    profiles where more resources can mean less throughput."""
    monotone = draw(st.booleans())
    vals = draw(st.lists(st.floats(0.05, 4.0), min_size=len(CPU_GRID) * len(MEM_GRID),
                         max_size=len(CPU_GRID) * len(MEM_GRID)))
    rows = [vals[i * len(MEM_GRID):(i + 1) * len(MEM_GRID)] for i in range(len(CPU_GRID))]
    if monotone:
        for i in range(len(rows)):
            for j in range(len(rows[i])):
                rows[i][j] = max([rows[i][j]]
                                 + ([rows[i - 1][j]] if i else [])
                                 + ([rows[i][j - 1]] if j else []))
    return Profile(key, CPU_GRID, MEM_GRID, tuple(tuple(r) for r in rows))


@st.composite
def clusters(draw, reserved: bool = False, uniform: bool = False) -> ClusterState:
    """1-5 servers of random shapes (``uniform``: all of one shape, the paper's setting)."""
    n = draw(st.integers(1, 5))
    servers = []
    for i in range(n):
        if not (uniform and servers):
            g = draw(st.sampled_from([1, 2, 4, 8]))
            c = draw(st.integers(g, 8 * g))
            m = draw(st.sampled_from([16.0, 32.0, 64.0, 100.0])) * g
        servers.append(Server(f"n{i}", Resources(g, c, m)))
    res: tuple[tuple[str, Resources], ...] = ()
    if reserved and draw(st.booleans()):
        s = draw(st.sampled_from(servers))
        res = ((s.name, Resources(draw(st.integers(0, s.capacity.gpus)),
                                  draw(st.integers(0, s.capacity.cpus)),
                                  draw(st.floats(0, s.capacity.mem_gb)))),)
    return ClusterState(tuple(servers), reserved=res)


@st.composite
def job_mixes(draw, max_jobs: int = 25) -> list[JobSpec]:
    pool = draw(st.lists(profiles(), min_size=1, max_size=4))
    n = draw(st.integers(1, max_jobs))
    jobs = []
    for i in range(n):
        g = draw(st.sampled_from([1, 1, 1, 2, 2, 3, 4, 8, 12]))
        prof = draw(st.one_of(st.none(), st.sampled_from(pool)))
        dur = draw(st.floats(60, 1e5))
        jobs.append(JobSpec(i, g, submitted=draw(st.floats(0, 1e4)), duration_s=dur,
                            remaining_s=dur * draw(st.floats(0.01, 1.0)),
                            attained_s=draw(st.floats(0, 1e4)), profile=prof))
    return jobs


def fair_point(cluster: ClusterState) -> PerGpu:
    return cluster.fair
