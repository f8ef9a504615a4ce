"""What jobs used, read from real histories (scripts/record/record_usage.py on 22.05 and 26.05,
JSON and text): each job's measured core use and peak memory against the truth its name
states, within 10%. 22.05's JSON leaves a job's own CPU time at 0: its steps' sum counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from synergy_slurm.slurm.sacct_usage import parse_usage

FIX = Path(__file__).parent / "fixtures"
RECORDED = sorted(p.name for p in FIX.glob("sacct_usage_*.*"))
# job id: (name, share of its cores kept busy, MB it held at its peak at least)
TRUTH = {1: ("cpu-1of4", 0.25, 0.0), 2: ("mem-600of2000", None, 600.0),
         3: ("idle", 0.0, 0.0), 4: ("steps-1of4", 0.25 * 20 / 23, 0.0)}


def test_both_releases_and_forms_are_recorded():
    assert {n.split("_")[2].rsplit(".", 1)[0][:5] for n in RECORDED} >= {"22.05", "26.05"}
    assert {n.rsplit(".", 1)[1] for n in RECORDED} == {"json", "txt"}


@pytest.mark.parametrize("name", RECORDED)
def test_each_jobs_use_is_within_ten_percent_of_the_truth(name):
    read = parse_usage((FIX / name).read_text())
    assert read.skipped == [] and set(read.jobs) == set(TRUTH)
    for job_id, (_, core_use, mem_mb) in TRUTH.items():
        u = read.jobs[job_id]
        if core_use is not None:
            assert u.core_use == pytest.approx(core_use, abs=0.1 * max(core_use, 0.1)), job_id
        assert u.peak_mem_mb is not None and u.peak_mem_mb >= mem_mb
        if mem_mb:
            assert u.peak_mem_mb <= 1.1 * mem_mb + 20            # the interpreter's own
    assert read.jobs[2].peak_mem_mb / 2000 == pytest.approx(0.3, abs=0.03)
