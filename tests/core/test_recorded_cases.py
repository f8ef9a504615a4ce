"""Cases hypothesis found, kept as regression tests (the data files are the cases as
hypothesis printed them).

- ``tune_no_room_case.txt`` (test_properties.py::test_tune_places_every_job_the_gpus_admit,
  a fresh clone on 2026-12-05): five servers of different sizes, seven jobs, and TUNE
  skipped a 1-GPU job "no room even after lowering peers to their proportional share"
  although GPUs were free: the 8-GPU job above its share in memory spans three servers, and
  lowering it needs cores on the server where a 3-GPU job holds 8 cores per GPU (a chain
  the per-server peer downgrade cannot see). Mended by tune.place_after_lowering_all.
- ``tune_ref_mixed_servers_case.txt`` (test_properties.py::test_opt_bound_above_every_plan,
  2026-12-07): a mixed cluster where the reference's TUNE and the peer downgrade both left
  out an admitted 1-GPU job (a 3-GPU job at 1 core and 64 GB per GPU took the memory of an
  8-GPU server's free GPU). tune-ref's fallback now ends with TUNE's last resort, so it
  places every job the GPUs admit, as OPT does."""

from __future__ import annotations

from pathlib import Path

from synergy_slurm.core import (  # noqa: F401 (names the recorded cases use)
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

DATA = Path(__file__).parent / "data"


def _case(name: str) -> dict:
    return eval("dict(" + (DATA / name).read_text() + ")")


def test_tune_places_every_job_of_the_no_room_case():
    kw = _case("tune_no_room_case.txt")
    plan = make_plan(kw["jobs"], kw["cluster"], get_policy("fifo"), get_allocator("tune"),
                     now=0)
    assert all(r.startswith("needs ") for r in plan.skipped.values()), plan.skipped
    assert len(plan.allocations) == len(kw["jobs"])           # 16 of the 18 GPUs


def test_the_references_tune_places_every_job_opt_places_on_mixed_servers():
    kw = _case("tune_ref_mixed_servers_case.txt")
    plans = {name: make_plan(kw["jobs"], kw["cluster"], get_policy("fifo"),
                             get_allocator(name), now=0) for name in ("tune-ref", "opt")}
    placed = {name: {a.job_id for a in p.allocations} for name, p in plans.items()}
    assert placed["tune-ref"] == placed["opt"] == {j.id for j in kw["jobs"]}, \
        plans["tune-ref"].skipped
