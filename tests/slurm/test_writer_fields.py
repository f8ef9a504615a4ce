"""The writer's read-back of one job (what it checks every change by) taken from squeue
between random tokens, so that a job's name or comment cannot rewrite a field (issue 43,
item 6); no Slurm needed."""

from __future__ import annotations

from synergy_slurm.slurm.squeue_text import WRITER_FIELDS, job_fields_args, parse_job_fields

TOKEN = "~0123456789abcdef~"


def line(*values: str) -> str:
    return "".join(v + TOKEN for v in values) + "E\n"


def test_every_field_is_asked_for_with_the_token_and_one_job_id():
    args = job_fields_args(42, TOKEN)
    assert args[:5] == ["-h", "-t", "all", "-j", "42"]
    assert args[6].count(TOKEN) == len(WRITER_FIELDS) and args[6].endswith(TOKEN + "E")


def test_records_map_to_scontrols_keys_and_unset_values_are_empty():
    raw = (line("7", "RUNNING", "None", "cpu=12,mem=96G,gres/gpu=1", "gres:gpu:12",
                "gres:gpu:98304", "12")
           + line("8", "PENDING", "Memory resize to 2000MB failed", "N/A", "N/A", "N/A",
                "1"))
    first, second = parse_job_fields(raw, TOKEN)
    assert first == {"JobId": "7", "JobState": "RUNNING", "Reason": "",
                     "AllocTRES": "cpu=12,mem=96G,gres/gpu=1",
                     "CpusPerTres": "gres:gpu:12", "MemPerTres": "gres:gpu:98304",
                     "NumCPUs": "12"}
    assert second["Reason"] == "Memory_resize_to_2000MB_failed"
    assert second["CpusPerTres"] == second["AllocTRES"] == ""


def test_a_state_under_a_flag_is_its_base_state_and_completing_stays():
    raw = line("9", "REQUEUE_HOLD", "", "", "", "", "1") + line("10", "COMPLETING", "", "",
                                                               "", "", "1")
    assert [r["JobState"] for r in parse_job_fields(raw, TOKEN)] == ["PENDING", "COMPLETING"]


def test_a_record_missing_fields_is_dropped():
    assert parse_job_fields("7" + TOKEN + "RUNNING" + TOKEN + "E\n", TOKEN) == []
