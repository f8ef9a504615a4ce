"""A mixed cluster where the reference's TUNE and our peer downgrade both left an admitted
1-GPU job out (hypothesis found it: a 3-GPU job at 1 core and 64 GB per GPU took the memory
of an 8-GPU server's free GPU). tune-ref's fallback now ends with TUNE's last resort, so it
places every job the GPUs admit, as OPT does."""

from __future__ import annotations

from pathlib import Path

from synergy_slurm.core import (  # noqa: F401 (the names the recorded case uses)
    ClusterState,
    JobSpec,
    PerGpu,
    Profile,
    Resources,
    Server,
    get_allocator,
    get_policy,
    make_plan,
)

CASE = Path(__file__).parent / "data" / "tune_ref_mixed_servers_case.txt"


def test_the_references_tune_places_every_job_opt_places_on_mixed_servers():
    kw = eval("dict(" + CASE.read_text() + ")")        # the case as hypothesis printed it
    plans = {name: make_plan(kw["jobs"], kw["cluster"], get_policy("fifo"),
                             get_allocator(name), now=0) for name in ("tune-ref", "opt")}
    placed = {name: {a.job_id for a in p.allocations} for name, p in plans.items()}
    assert placed["tune-ref"] == placed["opt"] == {j.id for j in kw["jobs"]}, \
        plans["tune-ref"].skipped
