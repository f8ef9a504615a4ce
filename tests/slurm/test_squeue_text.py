"""The text reader's parser on output recorded from Slurm 22.05 and 26.05: the same jobs as
the JSON parser reads from ``squeue --json`` taken at the same moment, field by field.

Recorded on the mixed dev cluster (A100 and H100 nodes) with the jobs of
tests/controller/test_text_reader_on_slurm.py and one whose comment tries to forge a
record (a newline, then a line shaped like one), with the token ``TOKEN``:
``SLURM_TIME_FORMAT=%s squeue -h -t PENDING,RUNNING -O "$(format_arg TOKEN)"`` and
``squeue --json``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from synergy_slurm.slurm.parse import parse_jobs
from synergy_slurm.slurm.release import Release
from synergy_slurm.slurm.squeue_text import (
    FIELDS,
    format_arg,
    new_token,
    parse_text_jobs,
    squeue_args,
)

FIX = Path(__file__).parent / "fixtures"
TOKEN = "~0123456789abcdef~"
RELEASES = ["22.05.8", "26.05.5"]


def recorded(version: str) -> tuple[str, str]:
    return ((FIX / f"textread_{version}.txt").read_text(),
            (FIX / f"textread_{version}.json").read_text())


@pytest.mark.parametrize("version", RELEASES)
def test_text_gives_the_jobs_json_gives_but_the_layout_over_several_nodes(version):
    text, doc = recorded(version)
    got = parse_text_jobs(text, TOKEN, Release.parse(version))
    by_json = {j.job_id: j for j in parse_jobs(doc)[0] if j.pending or j.running}
    assert got.skipped == ()
    assert sorted(j.job_id for j in got.jobs) == sorted(by_json)
    kinds = {j.name for j in got.jobs}
    assert {"multinode", "uneven", "pertask", "typed", "memnode", "array", "gpus2", "held",
            "nogpu", "typedh", "limit", "memcpu", "het", "bigarr"} <= kinds
    several = {j.job_id for j in got.jobs if j.running and len(j.nodes) > 1}
    assert several and {i for i, _ in got.needs_detail} == several
    for job in got.jobs:
        want = by_json[job.job_id]
        if job.job_id in several:
            # Text shows no layout per node: the reader asks the JSON for these jobs.
            assert job.alloc == () and want.alloc
            want = dataclasses.replace(want, alloc=())
        assert job == want, job.name


@pytest.mark.parametrize("version", RELEASES)
def test_a_comment_cannot_forge_a_record_or_shift_a_field(version):
    text, _ = recorded(version)
    got = parse_text_jobs(text, TOKEN, Release.parse(version))
    evil = [j for j in got.jobs if j.name == "evil~name"]
    assert len(evil) == 1
    assert evil[0].comment == "synergy:profile=res18\n18817999~deadbeef~RUNNING"
    assert evil[0].state == "PENDING" and evil[0].gpus == 1
    assert not [j for j in got.jobs if j.job_id == 18817999]


def test_a_record_with_the_wrong_number_of_fields_is_skipped_with_its_reason():
    text, _ = recorded("26.05.5")
    records = text.split(TOKEN + "E")
    records[0] = records[0].replace(TOKEN, "", 1)      # one field fewer
    got = parse_text_jobs((TOKEN + "E").join(records), TOKEN, Release.parse("26.05.5"))
    whole = parse_text_jobs(text, TOKEN, Release.parse("26.05.5"))
    assert len(got.jobs) == len(whole.jobs) - 1
    assert len(got.skipped) == 1
    assert f"{len(FIELDS) - 1} fields" in got.skipped[0].reason


def _with_state(text: str, job_name: str, state: str) -> str:
    out = []
    for rec in text.split(TOKEN + "E"):
        values = rec.split(TOKEN)
        if len(values) == len(FIELDS) and values[-2] == job_name:
            values[4] = state
        out.append(TOKEN.join(values))
    return (TOKEN + "E").join(out)


def test_text_states_under_a_flag_are_read_as_their_base_state():
    """Text shows the flag instead of the state (``RESIZING`` for a running job whose
    memory is being lowered); the JSON of 23.02+ lists both."""
    text, _ = recorded("26.05.5")
    rel = Release.parse("26.05.5")
    resizing = parse_text_jobs(_with_state(text, "gpus2", "RESIZING"), TOKEN, rel)
    job = next(j for j in resizing.jobs if j.name == "gpus2")
    assert job.running and job.resizing and job.alloc
    requeued = parse_text_jobs(_with_state(text, "limit", "REQUEUED"), TOKEN, rel)
    assert next(j for j in requeued.jobs if j.name == "limit").pending
    done = parse_text_jobs(_with_state(text, "limit", "COMPLETED"), TOKEN, rel)
    assert "limit" not in {j.name for j in done.jobs}


def test_each_read_has_its_own_token_and_the_fields_users_write_come_last():
    tokens = {new_token() for _ in range(50)}
    assert len(tokens) == 50
    names = [name for name, _ in FIELDS]
    assert names[-2:] == ["Name", "Comment"]
    token = new_token()
    arg = squeue_args(token, ["PENDING", "RUNNING"])
    assert arg[:3] == ["-h", "-t", "PENDING,RUNNING"]
    assert arg[-1] == format_arg(token)
    assert arg[-1].count(token) == len(FIELDS) and arg[-1].endswith(token + "E")
