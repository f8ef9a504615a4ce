"""sstat's TRES usage lines (recorded on the dev cluster, 22.05.8) as per-job use."""

from __future__ import annotations

import pytest

from synergy_slurm.slurm.sstat import parse_sstat, sstat_name

RECORDED = """\
1.batch|cpu=00:00:00,energy=0,fs/disk=11087,mem=3012K,pages=0,vmem=5512K
2.batch|cpu=00:01:30,energy=0,fs/disk=11087,mem=1.50G,pages=0,vmem=5512K
2.extern|cpu=00:00:00,energy=0,fs/disk=2012,mem=0,pages=0,vmem=0
2.0|cpu=1-00:00:10,energy=0,fs/disk=0,mem=512M,pages=0,vmem=0
7_3.batch|cpu=00:00:02,energy=0,mem=100M
"""


def test_steps_are_summed_per_job():
    used, skipped = parse_sstat(RECORDED)
    assert skipped == []
    assert used["1"].cpu_s == 0 and used["1"].peak_mem_mb == pytest.approx(3012 / 1024)
    assert used["2"].cpu_s == 90 + 86400 + 10
    assert used["2"].peak_mem_mb == pytest.approx(1.5 * 1024 + 512)
    assert used["7_3"].cpu_s == 2    # an array task is named by its array and index
    assert sstat_name(10, 7, 3) == "7_3" and sstat_name(12, None, None) == "12"


def test_bad_lines_are_skipped_with_a_reason():
    used, skipped = parse_sstat("garbage\n5.batch|cpu=soon,mem=1K\n6.batch|cpu=00:00:01,"
                                "mem=lots\n8.batch|cpu=00:00:04,mem=2M\n")
    assert list(used) == ["8"]
    assert [s.reason for s in skipped] == ["expected JobID|TRESUsageInTot",
                                           "'soon' is not a duration",
                                           "'lots' is not a memory size"]
