"""What jobs used, from sacct: bad and missing fields, each counted with a reason and never
a traceback. (The recorded histories of real runs: test_sacct_usage_recorded below.)"""

from __future__ import annotations

import json

import pytest

from synergy_slurm.slurm.parse import ParseError
from synergy_slurm.slurm.sacct_usage import USAGE_FIELDS, parse_usage

HEAD = "|".join(USAGE_FIELDS)


def text(*rows: str) -> str:
    return "\n".join([HEAD, *rows]) + "\n"


def test_a_job_and_its_steps_make_one_use():
    read = parse_usage(text(
        "7|00:00:20|4|00:19.500|||",
        "7.batch|00:00:20|4|00:19.500|612340K|cpu=00:00:19,mem=612340K|cpu=00:00:19,mem=612340K",
        "7.extern|00:00:20|4|00:00:00|0|cpu=00:00:00,mem=0|cpu=00:00:00,mem=0"))
    job = read.jobs[7]
    assert job.core_use == pytest.approx(19.5 / 80)
    assert job.peak_mem_mb == pytest.approx(612340 / 1024)
    assert read.skipped == [] and not read.unknown


@pytest.mark.parametrize("row, reason", [
    ("8|00:00:20|x|00:19||", "AllocCPUS 'x'"),
    ("8|soon|4|00:19||", "Elapsed 'soon'"),
    ("8.batch|00:00:20|4|00:19|1K||", "steps without their job's line"),
])
def test_a_record_that_cannot_be_read_is_skipped_with_its_reason(row, reason):
    read = parse_usage(text(row + ("|" * (len(USAGE_FIELDS) - 1 - row.count("|")))))
    assert read.jobs == {} and [s.reason for s in read.skipped] == [reason]


def test_missing_or_malformed_measures_are_unknown_and_counted():
    read = parse_usage(text(
        "9|00:00:20|4||||",
        "9.batch|00:00:20|4||lots|mem=??|",
        "10|00:01:00|2|bad-time|||",
        "11|1-xx|2|00:01|||",
        "12|00:00:00|2|00:00|||"))      # never ran: nothing used, nothing to say
    assert read.jobs[9].cpu_s is None and read.jobs[9].peak_mem_mb is None
    assert read.jobs[10].cpu_s is None
    assert [s.what for s in read.skipped] == ["job 11"] and 12 not in read.jobs
    assert read.unknown["CPU time not recorded"] == 2
    assert sum(n for why, n in read.unknown.items() if why.startswith("peak memory")) == 2


def test_the_header_must_name_the_job_and_its_time():
    with pytest.raises(ParseError, match="no JobIDRaw, Elapsed"):
        parse_usage("JobName|State\nx|COMPLETED\n")
    read = parse_usage(text("13|00:00:20|4|00:10"))               # too few fields
    assert read.skipped[0].reason.startswith("4 fields")


def test_json_bad_records_and_fields():
    doc = {"jobs": [
        "not a job",
        {"job_id": 1},
        {"job_id": 2, "time": {"elapsed": 10, "total": {"seconds": 5, "microseconds": 0}},
         "tres": {"allocated": [{"type": "cpu", "count": 2}]},
         "steps": [{"time": {"total": {"seconds": "x"}}, "tres": {"requested": {
             "max": [{"type": "mem", "count": "lots"}], "total": "?"}}}]},
    ]}
    read = parse_usage(json.dumps(doc))
    assert [s.reason for s in read.skipped] == ["not an object", "no time record"]
    assert read.jobs[2].peak_mem_mb is None
    with pytest.raises(ParseError):
        parse_usage("{not json")
