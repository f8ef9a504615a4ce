"""squeue's view of jobs in every state (slurm/queue.py): what the demo watches."""

from __future__ import annotations

import logging

from synergy_slurm.slurm.queue import QueueRow, parse_rows


def test_rows_give_each_jobs_state_and_cores_and_whether_it_ended():
    rows = parse_rows("11|RUNNING|12\n12|PENDING|3\n13|COMPLETED|6\n14|REQUEUED|3\n"
                      "15|OUT_OF_MEMORY|3\n16|STOPPED|3\n")
    assert rows[0] == QueueRow(11, "RUNNING", 12) and rows[0].running
    assert [r.job_id for r in rows if r.ended] == [13, 15]   # requeued, stopped: not ended


def test_lines_that_are_not_id_state_cores_are_skipped_with_a_reason(caplog):
    with caplog.at_level(logging.DEBUG, logger="synergy_slurm.slurm.queue"):
        rows = parse_rows("7+0|RUNNING|3\n8|RUNNING\n9|running|3\nx|PENDING|1\n\n"
                          "10|PENDING|N/A\n 11 | RUNNING | 4 \n")
    assert rows == [QueueRow(11, "RUNNING", 4)]
    assert sum("skipped" in r.getMessage() for r in caplog.records) == 5


def test_the_memory_a_job_holds_comes_from_its_tres():
    """What ``squeue -O JobID:0|,State:0|,NumCPUs:0|,tres-alloc:0|`` prints (Slurm 22.05):
    the demo's picture shows the memory each kind of job was given."""
    rows = parse_rows("16882011|COMPLETED|3|cpu=3,mem=62500M,node=1,billing=3|\n"
                      "16882016|RUNNING|12|cpu=12,mem=1.5T,node=2,billing=12|\n"
                      "16882017|PENDING|1||\n")
    assert [r.mem_mb for r in rows] == [62500.0, 1.5 * 1024 ** 2, 0.0]
    assert rows[1] == QueueRow(16882016, "RUNNING", 12, 1.5 * 1024 ** 2)
