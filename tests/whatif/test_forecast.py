"""The three forecasts (whatif/forecast.py): what measured use proves, what its class
suggests, and an assumed mix; and which keys to profile next."""

from __future__ import annotations

from dataclasses import replace

import pytest

from synergy_slurm.core import PerGpu
from synergy_slurm.core.usage import UNLIMITED, UsageRule
from synergy_slurm.slurm.sacct_usage import JobUsage
from synergy_slurm.vocabulary import MB_PER_GB
from synergy_slurm.whatif import build_replay
from synergy_slurm.whatif.forecast import (
    InferredGuess,
    UsedGuess,
    gain,
    job_need,
    key_classes,
    key_needs,
    representative,
    suspect_caps,
    to_profile,
    used_profile,
)
from synergy_slurm.whatif.replay import Controller, run, stats

from .test_whatif import hjob, pools


def test_a_jobs_need_is_its_measured_use_times_headroom_never_more_than_it_had():
    job = hjob(1, cpus=12, mem=62_500.0)
    assert job_need(job, JobUsage(1, 3600, 12, cpu_s=0.1 * 3600 * 12, peak_mem_mb=4000),
                    1.25) == PerGpu(2, round(4000 / MB_PER_GB * 1.25, 3))
    busy = JobUsage(1, 3600, 12, cpu_s=3600 * 12, peak_mem_mb=90_000)
    assert job_need(job, busy, 1.25) == PerGpu(12, 62.5)            # capped at what it had
    # A measure missing: what it had; both missing, a short run or no record: nothing.
    assert job_need(job, JobUsage(1, 3600, 12, cpu_s=3600.0), 1.0) == PerGpu(1, 62.5)
    assert job_need(job, JobUsage(1, 3600, 12, peak_mem_mb=MB_PER_GB), 1.0) == PerGpu(12, 1.0)
    assert job_need(job, JobUsage(1, 3600, 12), 1.25) is None
    assert job_need(job, JobUsage(1, 30, 12, cpu_s=10.0), 1.25) is None
    assert job_need(job, None, 1.25) is None


def test_a_measured_use_profile_is_flat_above_the_need_and_slower_below():
    prof = used_profile("used:x", PerGpu(2, 4.0))
    assert prof.ideal == PerGpu(2, 4.0)
    assert prof.speedup(PerGpu(12, 62.5), PerGpu(3, 62.5)) == 1.0   # nothing sped up
    assert prof.at(1, 62.5) == pytest.approx(0.5)
    assert prof.at(4, 1.0) < prof.at(4, 4.0)


def hogs_and_waiters(busy: float) -> tuple[list, dict]:
    """Two 1-GPU jobs holding 12 cores each (all of the node's 24) and keeping ``busy`` of
    them busy, while four 3-core jobs wait an hour with 6 GPUs free."""
    history = [hjob(1, cpus=12, name="lm"), hjob(2, cpus=12, name="lm")]
    history += [hjob(j, submit=10.0, start=3600.0, end=7200.0, name="cv") for j in (3, 4, 5, 6)]
    usage = {1: JobUsage(1, 3600, 12, cpu_s=busy * 3600 * 12, peak_mem_mb=2000),
             2: JobUsage(2, 3600, 12, cpu_s=busy * 3600 * 12, peak_mem_mb=2000)}
    usage |= {j: JobUsage(j, 3600, 3, cpu_s=0.5 * 3600 * 3, peak_mem_mb=2000)
              for j in (3, 4, 5, 6)}
    return history, usage


def forecasts(history, usage, profiles):
    found = pools("n1")
    classes = key_classes(history, usage)
    rp = build_replay(history, profiles, found, guess=InferredGuess(classes))
    used = build_replay(history, profiles, found, guess=UsedGuess(key_needs(history, usage,
                                                                           1.25)))
    out = run(rp, profiles, found[0].cluster, found, "tune", Controller(interval_s=30.0),
              forecasts={"guaranteed": used})
    plain = stats(list(out.times("plain").values())).jct_mean_h
    return ({name: gain(plain, stats(list(out.times(name).values())).jct_mean_h)
             for name in ("guaranteed", "synergy")}, rp, used)


def test_cores_held_idle_go_to_the_jobs_that_waited_for_them(paper_profiles):
    history, usage = hogs_and_waiters(busy=0.1)
    gains, rp, used = forecasts(history, usage, paper_profiles)
    assert set(used.source.values()) == {"measured use"}
    assert {rp.source[1], rp.source[3]} == {"inferred"}
    assert {t.model for t in rp.trace if t.job_id == 1} == {
        representative(paper_profiles, "language", frozenset({""})).slot}
    assert gains["guaranteed"] > 1.3
    assert gains["synergy"] >= gains["guaranteed"] * 0.95


def test_where_jobs_used_all_they_held_nothing_is_guaranteed(paper_profiles):
    history, usage = hogs_and_waiters(busy=1.0)
    gains, _, _ = forecasts(history, usage, paper_profiles)
    assert gains["guaranteed"] <= 1.0


def test_keys_to_profile_rank_what_profiling_could_show_not_only_gpu_hours(paper_profiles):
    history = [hjob(1, name="lm", end=7200.0), hjob(2, name="cv", end=3600.0)]
    usage = {1: JobUsage(1, 7200, 3, cpu_s=0.1 * 7200 * 3),
             2: JobUsage(2, 3600, 3, cpu_s=3600 * 3)}
    keys = to_profile(history, usage, paper_profiles, PerGpu(3, 62.5))
    # The language key has more GPU-hours but its class gains nothing from more cores.
    assert [k["key"] for k in keys] == ["cv", "lm"] and keys[0]["users"] == ["alice"]
    assert keys[0]["class"] == "image" and keys[0]["gpu_hours"] == 1.0
    assert keys[0]["profile_run"].startswith("synergy profile run --key cv --gpus 1")
    assert keys[0]["sbatch"].startswith("synergy-sbatch --profile-key cv")
    assert "not recorded: 'sacct -j" in keys[0]["command_from"]


def test_a_users_profile_whose_jobs_used_far_less_than_given_is_capped_as_the_loop_would(
        paper_profiles):
    """alice's res18 job held 12 cores and kept one busy: the closed loop marks (res18,
    alice), so her later res18 job gets no more than the proportional share in the replay,
    while bob's identical one gets what res18's profile asks for."""
    tag = "synergy:profile=res18"
    history = [hjob(1, cpus=12, comment=tag),
               hjob(2, submit=4000.0, start=4000.0, end=7600.0, comment=tag),
               replace(hjob(3, submit=4000.0, start=4000.0, end=7600.0, comment=tag),
                       user="bob"),
               hjob(4, cpus=12, name="unknown")]        # no stored profile: no evidence
    usage = {1: JobUsage(1, 3600, 12, cpu_s=0.1 * 3600 * 12, peak_mem_mb=2000),
             4: JobUsage(4, 3600, 12, cpu_s=0.1 * 3600 * 12, peak_mem_mb=2000)}
    found = pools("n1")
    rp = build_replay(history, paper_profiles, found)
    caps = suspect_caps(rp, usage, found, UsageRule())
    # Cores: at the proportional share (3), above what it used x headroom; its memory was
    # the proportional share, so nothing is said of memory.
    assert caps == {("res18", "alice"): PerGpu(3, UNLIMITED.mem_gb)}
    # Given no more than the proportional share, using little is no evidence.
    assert suspect_caps(rp, {2: JobUsage(2, 3600, 3, cpu_s=0.1 * 3600 * 3)}, found,
                        UsageRule()) == {}
    times = {}
    for name, c in (("trusted", None), ("capped", caps)):
        out = run(rp, paper_profiles, found[0].cluster, found, "tune",
                  Controller(interval_s=30.0), caps=c)
        times[name] = out.times("synergy")
    assert times["trusted"][2].end == pytest.approx(times["trusted"][3].end)
    assert times["capped"][2].end > times["capped"][3].end * 1.05
    assert times["capped"][3].end == pytest.approx(times["trusted"][3].end)
