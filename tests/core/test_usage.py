"""The closed loop's judgement: a user's key whose jobs use far less than they were given
is capped at what was seen used (with headroom), never below proportional; honest use,
too few or too short samples, and use below the proportional share are no evidence."""

from __future__ import annotations

import pytest

from synergy_slurm.core import PerGpu
from synergy_slurm.core.usage import (
    UsageRule,
    UsageSample,
    busy_share,
    capped_limit,
    judge,
)

FAIR = PerGpu(3, 62.5)
RULE = UsageRule(threshold=0.3, min_jobs=1, min_observed_s=60, headroom=1.25)
BIG = PerGpu(12, 125.0)


def sample(job_id, used, peak=20.0, granted=BIG, key="alexnet", user="eve",
           observed=600.0, fair=FAIR):
    return UsageSample(job_id, key, user, granted, fair, used, peak, observed)


def test_a_key_used_far_below_its_grant_is_capped_for_that_user_only():
    verdicts = judge([sample(1, 0.5), sample(2, 11.0, 120.0, user="ann")], RULE)
    eve, ann = verdicts["alexnet", "eve"], verdicts["alexnet", "ann"]
    assert eve.suspect and not ann.suspect
    # 0.5 cores x 1.25 is under the proportional 3: capped there; memory likewise.
    assert eve.cap == PerGpu(3, 62.5)
    assert "used 4% of the cores" in eve.why()


def test_the_cap_is_the_most_seen_used_with_headroom():
    [v] = judge([sample(1, 2.0, 20.0), sample(2, 3.2, 30.0)], RULE).values()
    assert v.cap == PerGpu(4, 62.5)   # ceil(3.2 x 1.25); 30 x 1.25 is under proportional
    low = PerGpu(3, 20.0)
    [v] = judge([sample(1, 2.0, 20.0, fair=low),
                 sample(2, 3.2, 30.0, granted=PerGpu(12, 250.0), fair=low)], RULE).values()
    assert v.cap == PerGpu(4, pytest.approx(37.5))


def test_no_evidence_no_mark():
    # Too short, too few, or granted no more than proportional.
    short = judge([sample(1, 0.1, observed=30)], RULE)
    assert short == {}
    few = judge([sample(1, 0.1)], UsageRule(min_jobs=2, min_observed_s=60))
    assert not few["alexnet", "eve"].suspect
    small = judge([sample(1, 0.1, 5.0, granted=FAIR)], RULE)
    assert not small["alexnet", "eve"].suspect
    # The latest sample of a job is what counts: it used its cores once warmed up.
    warm = judge([sample(1, 0.2, observed=100), sample(1, 11.5, 120.0, observed=900)], RULE)
    assert not warm["alexnet", "eve"].suspect


def test_memory_alone_can_be_capped():
    [v] = judge([sample(1, 11.0, 10.0)], RULE).values()
    assert v.cap is not None and v.cap.cpus >= 1 << 20 and v.cap.mem_gb == 62.5


def test_the_cap_cuts_a_site_limit_and_never_loosens_it():
    assert capped_limit(None, None) is None
    assert capped_limit(PerGpu(6, 100.0), None) == PerGpu(6, 100.0)
    assert capped_limit(PerGpu(6, 50.0), PerGpu(4, 62.5)) == PerGpu(4, 50.0)


def test_bad_rules_are_refused():
    for kw in ({"threshold": 0}, {"threshold": 1.0}, {"min_jobs": 0}, {"headroom": 0.5}):
        with pytest.raises(ValueError):
            UsageRule(**kw)


def test_busy_share_is_what_the_true_profile_uses(paper_profiles):
    big = PerGpu(12, 125.0)
    assert busy_share(paper_profiles["gnmt"], big, FAIR) == PerGpu(1, 20.83)
    assert busy_share(paper_profiles["alexnet"], big, FAIR) == big


def test_a_busy_job_on_a_contended_node_is_judged_on_what_it_could_get():
    """Two jobs of 4 cores per GPU on a 2-core host with 7 runnable tasks: each could keep
    about 0.57 cores busy. The one that used 0.5 is honest; the one that slept is not.
    Judged on what they were given, both would read 'suspect'."""
    res50 = PerGpu(4, 62.5)
    busy = UsageSample(1, "res50", "bob", res50, FAIR, 0.5, 20.0, 600.0, could_cpus=0.57)
    asleep = UsageSample(2, "alexnet", "eve", BIG, FAIR, 0.01, 20.0, 600.0, could_cpus=0.57)
    verdicts = judge([busy, asleep], RULE)
    assert not verdicts["res50", "bob"].suspect
    assert verdicts["alexnet", "eve"].suspect
    assert judge([UsageSample(1, "res50", "bob", res50, FAIR, 0.5, 20.0, 600.0)],
                 RULE)["res50", "bob"].suspect          # without the contention: capped
