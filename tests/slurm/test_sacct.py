"""sacct's history, recorded from each release (scripts/record/record_history.py), parsed the
same from JSON and from -P text; bad records skipped with a reason, never a traceback."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.parse import ParseError
from synergy_slurm.slurm.sacct import TEXT_FIELDS, parse_history, read_history
from synergy_slurm.slurm.submit_line import request
from synergy_slurm.vocabulary import not_reshaped

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RELEASES = ("22.05.8", "26.05.5")


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """The text fixtures hold sacct's local times of a machine on UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def load(release: str, kind: str):
    return parse_history((FIXTURES / f"sacct_{release}.{kind}").read_text())


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("kind", ["json", "txt"])
def test_the_recorded_history(release, kind):
    jobs, skipped = load(release, kind)
    assert skipped == []
    assert [(j.job_id, j.state) for j in jobs] == [
        (1, "COMPLETED"), (2, "COMPLETED"), (3, "FAILED"), (5, "REQUEUED"), (5, "COMPLETED"),
        (6, "RUNNING")] or sorted((j.job_id, j.state) for j in jobs) == [
        (1, "COMPLETED"), (2, "COMPLETED"), (3, "FAILED"), (5, "COMPLETED"), (5, "REQUEUED"),
        (6, "RUNNING")]
    by = {(j.job_id, j.state): j for j in jobs}
    train = by[1, "COMPLETED"]
    assert (train.gpus, train.cpus, train.mem_mb) == (2, 6, 125_000)
    assert train.comment == "synergy:profile=res18" and train.name == "res18-train"
    assert (train.user, train.account, train.partition, train.qos) == ("root", "lab-a", "gpu",
                                                                        "normal")
    assert train.nodes == ("n1",) and train.elapsed_s == 2
    cpu_only = by[2, "COMPLETED"]
    assert (cpu_only.gpus, cpu_only.cpus, cpu_only.mem_mb) == (0, 4, 2048)
    first, last = by[5, "REQUEUED"], by[5, "COMPLETED"]
    assert first.submit < last.submit and last.eligible > last.submit   # held ~10 s
    running = by[6, "RUNNING"]
    assert running.start is not None and running.end is None


@pytest.mark.parametrize("release", RELEASES)
def test_json_and_text_agree(release):
    a, _ = load(release, "json")
    b, _ = load(release, "txt")
    key = lambda j: (j.job_id, j.submit)   # noqa: E731
    # The recorded text has none of the optional columns (TEXT_FIELDS); the JSON always
    # has the priority, the time limit and the admin comment.
    assert all(j.priority > 0 for j in a) and all(j.priority == 0 for j in b)
    assert all(j.time_limit_s is None and not j.admin_comment for j in b)
    # The JSON also keeps the submit line (23.02 and later): how each job asked.
    bare = (replace(j, priority=0, time_limit_s=None, admin_comment="", request=None,
                    submit_line="")
            for j in a)
    assert sorted(bare, key=key) == sorted(b, key=key)


def test_the_priority_column_is_read_where_the_header_names_it():
    lines = (FIXTURES / "sacct_26.05.5.txt").read_text().splitlines()
    assert lines[0] == "|".join(TEXT_FIELDS)
    with_priority = ["|".join((*TEXT_FIELDS, "Priority"))] + [
        f"{line}|{1000 + i}" for i, line in enumerate(lines[1:]) if line]
    jobs, skipped = parse_history("\n".join(with_priority))
    assert skipped == [] and sorted(j.priority for j in jobs) == \
        list(range(1000, 1000 + len(jobs)))
    bad = [*with_priority[:2], with_priority[2].rsplit("|", 1)[0] + "|high"]
    jobs, skipped = parse_history("\n".join(bad))
    assert len(jobs) == 1 and "priority 'high' is not a number" in skipped[0].reason


def test_bad_json_records_are_skipped_with_reasons():
    good = json.loads((FIXTURES / "sacct_26.05.5.json").read_text())["jobs"][0]
    recs = [
        good,
        "not a record",
        {**good, "job_id": None},
        {**good, "time": {**good["time"], "submission": 0}},
        {**good, "time": {**good["time"], "start": good["time"]["end"] + 10}},
        {**good, "tres": {"allocated": "cpu=3"}},
        {**good, "tres": {"allocated": [{"type": "cpu", "count": -1}]}},
        {**good, "state": {"current": ["SOMETHING_NEW"]}, "brand_new_field": {"x": 1}},
        {**good, "time": {**good["time"], "end": {"set": False, "number": 0}}},
    ]
    jobs, skipped = parse_history(json.dumps({"jobs": recs}))
    reasons = [s.reason for s in skipped]
    assert len(jobs) == 3 and len(skipped) == 6, reasons
    assert "not an object" in reasons and "no job_id" in reasons
    assert "no submission time" in reasons and "ends before it started" in reasons
    assert "TRES is not a list" in reasons and "negative TRES count for cpu" in reasons
    assert jobs[1].state == "SOMETHING_NEW" and jobs[2].end is None


@pytest.mark.parametrize("raw, message", [
    ('{"jobs": [{"job_id": 1, ', "not JSON"),
    ('{"meta": {}}', "no 'jobs' list"),
    ("JobID|User\n1|root\n", "lacks Account,Partition"),
])
def test_unreadable_documents_say_why(raw, message):
    with pytest.raises(ParseError, match=message):
        parse_history(raw)


def test_bad_text_lines_are_skipped_with_reasons():
    lines = (FIXTURES / "sacct_22.05.8.txt").read_text().splitlines()
    header, row = lines[0], lines[1]
    f = row.split("|")
    bad_time = "|".join([*f[:7], "yesterday", *f[8:]])
    bad_id = "|".join(["1_[0-3]", *f[1:]])
    pipes = "|".join([*f[:5], "a|b|c", *f[6:]])     # a comment with '|' in it
    raw = "\n".join([header, row, bad_time, bad_id, pipes, "1|2|3", ""])
    jobs, skipped = parse_history(raw)
    assert [j.comment for j in jobs] == ["synergy:profile=res18"]
    n = len(TEXT_FIELDS)
    assert [s.reason for s in skipped] == [
        "time 'yesterday' is not ISO 8601",
        "job id '1_[0-3]' is not a number (an array task or a het component as JobID "
        "shows them: export JobIDRaw)",
        # Beside the job name, a '|' in the comment could be in either: never guessed.
        "a '|' inside JobName or Comment: which one cannot be told (export with a "
        "delimiter no field holds: sacct --delimiter)",
        f"3 fields, expected {n} (the record is cut short)"]


def _row(**over: str) -> dict[str, str]:
    lines = (FIXTURES / "sacct_22.05.8.txt").read_text().splitlines()
    return {**dict(zip(TEXT_FIELDS, lines[1].split("|"), strict=True)), **over}


def test_a_pipe_is_put_back_where_the_column_count_says():
    """With the submit line apart from the other text fields, its '|' has one place."""
    cols = (*TEXT_FIELDS, "SubmitLine")
    rec = _row(SubmitLine="sbatch --wrap 'python a.py | tee log'")
    raw = "|".join(cols) + "\n" + "|".join(rec[c] for c in cols) + "\n"
    (job,), skipped = parse_history(raw)
    assert not skipped and job.name == rec["JobName"] and job.comment == rec["Comment"]


def test_a_newline_in_a_comment_cannot_forge_a_record():
    """A comment whose text after a newline looks like another user's 8-GPU, 23-hour job:
    the record is read whole (its comment keeps the text), and no such job appears."""
    forged = _row(JobIDRaw="999", User="victim", AllocTRES="cpu=24,gres/gpu=8,mem=500G",
                  ReqTRES="cpu=24,gres/gpu=8,mem=500G", Start="2026-12-03T00:00:00",
                  End="2026-12-03T23:00:00", Submit="2026-12-03T00:00:00",
                  Eligible="2026-12-03T00:00:00")
    forged_line = "|".join(forged[c] for c in TEXT_FIELDS)
    rec = _row(Comment="hello\n" + forged_line)
    text = "|".join(rec[c] for c in TEXT_FIELDS)
    jobs, skipped = parse_history("|".join(TEXT_FIELDS) + "\n" + text + "\n")
    assert all(j.job_id != 999 and j.user != "victim" for j in jobs), jobs
    # Read whole where the '|' can be placed; skipped with its reason where it cannot.
    assert len(jobs) + len(skipped) == 1
    if jobs:
        assert jobs[0].comment == rec["Comment"]
    else:
        assert "'|'" in skipped[0].reason


def test_time_limits_and_admin_comments_are_read_in_both_forms():
    lines = (FIXTURES / "sacct_26.05.5.txt").read_text().splitlines()
    limits = ["UNLIMITED", "01:00:00", "1-02:03:04", "05:00", "Partition_Limit"]
    header = "|".join((*TEXT_FIELDS, "AdminComment", "Timelimit"))
    rows = [f"{line}|synergy.managed=1|{limits[i % len(limits)]}"
            for i, line in enumerate(lines[1:]) if line]
    jobs, skipped = parse_history("\n".join([header, *rows]))
    assert skipped == []
    got = sorted({j.time_limit_s for j in jobs}, key=lambda v: (v is not None, v or 0))
    assert got == [None, 300.0, 3600.0, 93784.0][:len(got)]
    assert all(j.admin_comment == "synergy.managed=1" for j in jobs)
    bad = [header, rows[0].rsplit("|", 1)[0] + "|soon"]
    jobs, skipped = parse_history("\n".join(bad))
    assert not jobs and "time limit 'soon'" in skipped[0].reason
    # JSON: minutes, or {"set", "infinite", "number"}; the admin comment where Slurm puts it.
    doc = json.loads((FIXTURES / "sacct_26.05.5.json").read_text())
    rec = doc["jobs"][0]
    rec["time"]["limit"] = {"set": True, "infinite": False, "number": 90}
    rec["comment"]["administrator"] = "synergy.managed=1,synergy.held=1"
    (job, *_), _ = parse_history(json.dumps({"jobs": [rec]}))
    assert job.time_limit_s == 5400.0 and "synergy.held=1" in job.admin_comment
    rec["time"]["limit"] = {"set": False, "infinite": True, "number": 0}
    (job, *_), _ = parse_history(json.dumps({"jobs": [rec]}))
    assert job.time_limit_s is None


def test_a_header_in_any_order_with_jobid_and_extra_columns_is_read():
    """What an admin's own sacct -o gives: the fields in another order, JobID instead of
    JobIDRaw, a column synergy does not use; the same jobs come out."""
    lines = (FIXTURES / "sacct_22.05.8.txt").read_text().splitlines()
    want, _ = parse_history("\n".join(lines))
    names = lines[0].split("|")
    order = list(reversed(range(len(names))))
    rows = [["|".join(r.split("|")[i] for i in order) + "|00:00:42"] for r in lines[1:] if r]
    header = "|".join(["JobID" if names[i] == "JobIDRaw" else names[i] for i in order])
    got, skipped = parse_history("\n".join([header + "|Elapsed", *(r[0] for r in rows)]))
    assert skipped == [] and got == want


def test_the_gpu_type_is_the_one_asked_for_not_the_one_run_on():
    """With typed GPUs in AccountingStorageTRES, AllocTRES names the type a job ran on
    whatever it asked; only ReqTRES says it asked for one (--gpus=h100:1)."""
    lines = (FIXTURES / "sacct_22.05.8.txt").read_text().splitlines()
    f = lines[1].split("|")
    idx = {n: i for i, n in enumerate(lines[0].split("|"))}

    def row(alloc: str, req: str) -> str:
        g = list(f)
        g[idx["AllocTRES"]], g[idx["ReqTRES"]] = alloc, req
        return "|".join(g)

    untyped = row("cpu=8,gres/gpu=1,gres/gpu:a100=1,mem=64000M,node=1",
                  "cpu=1,gres/gpu=1,mem=64000M,node=1")
    typed = row("cpu=8,gres/gpu=1,gres/gpu:h100=1,mem=64000M,node=1",
                "cpu=1,gres/gpu=1,gres/gpu:h100=1,mem=64000M,node=1")
    jobs, skipped = parse_history("\n".join([lines[0], untyped]))
    assert skipped == [] and jobs[0].gpu_type is None and jobs[0].gpus == 1
    jobs, _ = parse_history("\n".join([lines[0], typed]))
    assert jobs[0].gpu_type == "h100" and jobs[0].gpus == 1


@pytest.mark.parametrize("line, nodes, het, resv, why", [
    ("sbatch --gpus=2 train.sh", 1, False, False, None),
    ("sbatch --gres=gpu:a100:4 -N 2 train.sh --gpus-per-task=9", 2, False, False, None),
    # What it asked for decides, as at the hook: one node at least (Slurm spread it).
    ("sbatch -G 8 train.sh", 2, False, False, None),
    ("sbatch -G 8 -N 2 train.sh", 2, False, False, "--gpus over several nodes is not reshaped"),
    ("sbatch --gpus-per-task 1 -n 4 train.sh", 1, False, False,
     "--gpus-per-task jobs are not reshaped"),
    ("/usr/bin/sbatch -o /dev/null --parsable -n4 --gpus-per-task=1 x.sh", 1, False, False,
     "--gpus-per-task jobs are not reshaped"),
    ("sbatch --wrap 'srun --gpus-per-task=1 x'", 1, False, False, None),
    ("sbatch train.sh", 1, True, False, "heterogeneous job"),
    ("sbatch --gpus=1 train.sh", 1, False, True, "jobs in a reservation are not reshaped"),
    ("sbatch -c 8 --gpus=1 x.sh", 1, False, False,
     "-c/--cpus-per-task sets the job's cores or memory itself: left as submitted"),
    ("sbatch --exclusive --gpus=1 x.sh", 1, False, False,
     "--exclusive sets the job's cores or memory itself: left as submitted"),
    ("sbatch 'unclosed", 1, False, False, None),           # not splittable: the common form
    ("", 1, False, False, None),                           # not recorded (22.05)
])
def test_what_the_submission_says_of_the_request(line, nodes, het, resv, why):
    """Whether synergy would reshape a job, from what accounting kept of its submission
    (the hook's own rule, vocabulary.not_reshaped); the script's arguments are not its
    options."""
    assert not_reshaped(request(line, 4, nodes, het, resv)) == why


def test_the_history_says_which_jobs_synergy_would_not_reshape():
    doc = json.loads((FIXTURES / "sacct_26.05.5.json").read_text())
    rec = next(r for r in doc["jobs"] if r["tres"]["allocated"])
    het = {**rec, "het": {"job_id": rec["job_id"], "job_offset": {"set": True, "number": 0}}}
    resv = {**rec, "job_id": 99, "reservation": {"id": 3, "name": "maint"}}
    task = {**rec, "job_id": 98, "submit_line": "sbatch --gpus-per-task=1 -n2 run.sh"}
    jobs, skipped = parse_history(json.dumps({"jobs": [rec, het, resv, task]}))
    assert not skipped
    assert all(j.gpus for j in jobs) and len(jobs) == 4
    assert [j.unshaped for j in jobs] == [
        "", "heterogeneous job", "jobs in a reservation are not reshaped",
        "--gpus-per-task jobs are not reshaped"]


class _Sacct:
    """sacct whose --json call fails with ``stderr``; the text call answers."""

    def __init__(self, stderr: str) -> None:
        self.stderr, self.calls = stderr, []

    def run(self, command, args):
        self.calls.append(list(args))
        if "--json" in args:
            raise SlurmError(f"sacct {' '.join(args[:3])} failed (1): {self.stderr}",
                             ["sacct", *args], 1, self.stderr)
        return "JobIDRaw|User\n"


def test_the_history_falls_back_to_text_only_where_sacct_lacks_json():
    """Our own arguments name --json in every error's message: only sacct's own words may
    send the read to the text form, not a slurmctld that is down."""
    old = _Sacct("sacct: unrecognized option '--json'")
    assert read_history(old, "now-1day", "now") == "JobIDRaw|User\n"
    assert "-P" in old.calls[-1]
    down = _Sacct("sacct: error: slurm_persist_conn_open: failed to open connection")
    with pytest.raises(SlurmError, match="persist_conn"):
        read_history(down, "now-1day", "now")
    assert len(down.calls) == 1


def _spread(batch_tres: list[dict], step_id: str, nodes: str = "n[1-2]") -> dict:
    """The 26.05 fixture's first job as an 8-GPU, 24-core job on ``nodes``, with its
    batch step (``step_id``: 22.05 names it ``batch``, later releases ``ID.batch``)."""
    rec = json.loads((FIXTURES / "sacct_26.05.5.json").read_text())["jobs"][0]
    tres = [{"type": "cpu", "name": "", "count": 24}, {"type": "mem", "name": "",
                                                         "count": 500000},
            {"type": "gres", "name": "gpu", "count": 8}]
    return {**rec, "nodes": nodes, "tres": {"allocated": tres, "requested": tres},
            "steps": [{"step": {"id": "7.extern", "name": "extern"},
                       "tres": {"allocated": tres}},
                      {"step": {"id": step_id, "name": "batch"},
                       "tres": {"allocated": batch_tres}}]}


@pytest.mark.parametrize("step_id", ["batch", "7.batch"])
def test_a_spread_jobs_batch_step_says_how_its_cores_were_laid_out(step_id):
    """22.05 gave an 8-GPU job 4 of its 24 cores on its batch node's 4 GPUs: its poorest
    node had 1 core per GPU, not 3. Read from the nested steps of an export without -X."""
    four = [{"type": "cpu", "name": "", "count": 4}, {"type": "gres", "name": "gpu",
                                                       "count": 4}]
    (job,), skipped = parse_history(json.dumps({"jobs": [_spread(four, step_id)]}))
    assert not skipped and job.batch_node == (4, 4) and job.poorest_cores_per_gpu == 1.0
    twenty = [{"type": "cpu", "name": "", "count": 20}, {"type": "gres", "name": "gpu",
                                                         "count": 4}]
    (job,), _ = parse_history(json.dumps({"jobs": [_spread(twenty, step_id)]}))
    assert job.poorest_cores_per_gpu == 1.0          # the other node had 4 for its 4 GPUs
    even = [{"type": "cpu", "name": "", "count": 12}, {"type": "gres", "name": "gpu",
                                                       "count": 4}]
    (job,), _ = parse_history(json.dumps({"jobs": [_spread(even, step_id)]}))
    assert job.batch_node == (12, 4) and job.poorest_cores_per_gpu is None
    (job,), _ = parse_history(json.dumps({"jobs": [_spread(four, step_id, nodes="n1")]}))
    assert job.poorest_cores_per_gpu is None         # one node: what it had is its share
    for broken in ([{"type": "cpu", "count": "x"}], "cpu=4", []):
        (job,), skipped = parse_history(json.dumps({"jobs": [_spread(broken, step_id)]}))
        assert not skipped and job.batch_node is None and job.gpus == 8


def test_the_text_forms_step_lines_give_the_batch_layout_and_are_not_jobs():
    """An export without -X in text: ``ID.batch`` gives the layout; ``ID.extern`` and
    ``ID.0`` are steps, neither jobs nor records to skip."""
    job = _row(JobIDRaw="7", AllocTRES="billing=24,cpu=24,gres/gpu=8,mem=500G,node=2",
               NodeList="n[1-2]")
    steps = [_row(JobIDRaw=f"7.{s}", AllocTRES=tres, NodeList=nodes, User="", Account="")
             for s, tres, nodes in (("batch", "cpu=4,gres/gpu=4,mem=250G,node=1", "n1"),
                                    ("extern", "cpu=24,gres/gpu=8,mem=500G,node=2",
                                     "n[1-2]"),
                                    ("0", "cpu=24,gres/gpu=8,node=2", "n[1-2]"))]
    raw = "\n".join(["|".join(TEXT_FIELDS),
                     *("|".join(r[c] for c in TEXT_FIELDS) for r in (job, *steps))])
    (got,), skipped = parse_history(raw)
    assert not skipped and got.job_id == 7 and got.batch_node == (4, 4)
    assert got.poorest_cores_per_gpu == 1.0
    # A step whose name holds a '|', a het job's step, an array task's steps (as JobID
    # shows them): steps all, passed over, none a record to skip.
    odd = [_row(JobIDRaw=i, JobName=name, AllocTRES="cpu=1,node=1")
           for i, name in (("7.1", "a|b"), ("7.0+1", "x"), ("5_1.batch", "batch"),
                           ("5_1.extern", "extern"))]
    more = "\n".join("|".join(r[c] for c in TEXT_FIELDS) for r in odd)
    (got,), skipped = parse_history(raw + "\n" + more)
    assert not skipped and got.batch_node == (4, 4)


def test_each_run_of_a_requeued_job_gets_its_own_batch_step():
    """-D lists every run of a requeued job, each followed by its own steps."""
    rows = []
    for start, nodes, batch in (("2026-12-05T07:07:15", "n[1-2]", "cpu=4,gres/gpu=4"),
                                ("2026-12-05T08:07:15", "n[3-4]", "cpu=12,gres/gpu=4")):
        rows += [_row(JobIDRaw="7", State="REQUEUED", Start=start, End=start,
                      AllocTRES="cpu=24,gres/gpu=8,mem=500G,node=2", NodeList=nodes),
                 _row(JobIDRaw="7.batch", Start=start, End=start, AllocTRES=batch)]
    raw = "\n".join(["|".join(TEXT_FIELDS), *("|".join(r[c] for c in TEXT_FIELDS)
                                              for r in rows)])
    first, second = parse_history(raw)[0]
    assert (first.batch_node, second.batch_node) == ((4, 4), (12, 4))
