"""synergy whatif on recorded histories: what is replayed and how, what is left out and
why, the report's parts, and bad exports that give counts and reasons, not tracebacks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.core import ClusterState, PerGpu
from synergy_slurm.slurm.sacct import HistoryJob, parse_history
from synergy_slurm.whatif import HistoryError, Rule, build_replay
from synergy_slurm.whatif.history import WORK_UNIT_S, replay_profiles
from synergy_slurm.whatif.replay import run

FIXTURES = Path(__file__).resolve().parents[1] / "slurm" / "fixtures"
FAIR = PerGpu(3, 62.5)
T = 1_800_000_000.0


def hjob(jid, start=0.0, end=3600.0, gpus=1, cpus=3, mem=62_500.0, name="train",
         comment="", account="lab-a", state="COMPLETED", nodes=("n1",),
         priority=0) -> HistoryJob:
    return HistoryJob(jid, "alice", account, "gpu", name, comment, state, T, T,
                      None if start is None else T + start, None if end is None else T + end,
                      gpus, cpus, mem, None, nodes, "normal", priority)


def test_the_recorded_history_becomes_a_replay(paper_profiles):
    history, _ = parse_history((FIXTURES / "sacct_26.05.5.json").read_text())
    rp = build_replay(history, paper_profiles, FAIR, ["n1", "n2"])
    assert sorted(rp.jobs) == [1, 3, 5, 6]
    assert rp.source == {1: "comment", 3: "unknown", 5: "unknown", 6: "unknown"}
    by_id = {t.job_id: t for t in rp.trace}
    assert by_id[1].model == "res18" and by_id[1].gpus == 2 and by_id[3].model == ""
    # The requeued job arrives with its first run's submission and is replayed once.
    assert rp.jobs[5].eligible == min(j.eligible for j in history if j.job_id == 5)
    assert [o.server for o in rp.background] == ["n1"]          # job 2, no GPUs
    assert rp.background[0].resources.cpus == 4
    assert sum(rp.notes.values()) == 3 and not rp.left_out


def test_work_is_measured_at_the_proportional_share(paper_profiles):
    """alexnet run an hour at 12 cores/GPU did 2.94 h of proportional work."""
    rp = build_replay([hjob(1, cpus=12, mem=125_000, comment="synergy:profile=alexnet")],
                      paper_profiles, FAIR, ["n1"])
    assert rp.trace[0].iterations * WORK_UNIT_S == pytest.approx(3600 * 2.94, rel=0.01)


def test_the_replay_loses_no_work_to_whole_iterations(paper_profiles):
    """An hour of work at the proportional share replays as an hour in one-second rounds
    (iterations of the profiles' own length, ~0.6 s, lost 40% to whole iterations)."""
    prof = replay_profiles(paper_profiles, FAIR)["res18"]
    assert prof.iter_time_s / prof.at(3, 62.5) == pytest.approx(WORK_UNIT_S)
    rp = build_replay([hjob(1, comment="synergy:profile=res18"), hjob(2)], paper_profiles,
                      FAIR, ["n1"])
    out = run(rp, paper_profiles, ClusterState.uniform(1), "tune", round_s=1.0)
    times = out.times("proportional")
    assert times[1].end - times[1].start == pytest.approx(3600, abs=2)
    assert times[2].end - times[2].start == pytest.approx(3600, abs=2)


def test_the_replay_starts_jobs_in_the_order_slurm_gave_them(paper_profiles):
    """Two 8-GPU jobs eligible at once on one 8-GPU server: Slurm ran job 2 first (its
    fair-share priority was higher); the replay does too, in both runs. Without a priority
    for every job the replay falls back to arrival order (job 1 first)."""
    history = [hjob(1, start=3600.0, end=7200.0, gpus=8, cpus=24, mem=500_000,
                    priority=100),
               hjob(2, start=0.0, end=3600.0, gpus=8, cpus=24, mem=500_000, priority=900)]
    cluster = ClusterState.uniform(1)
    out = run(build_replay(history, paper_profiles, FAIR, ["s0"]), paper_profiles, cluster,
              "tune", round_s=60.0)
    assert out.proportional.config.policy == "slurm"
    for which in ("proportional", "synergy"):
        t = out.times(which)
        assert t[2].start < t[1].start, which
    unordered = [replace(history[0], priority=0), history[1]]
    out = run(build_replay(unordered, paper_profiles, FAIR, ["s0"]), paper_profiles,
              cluster, "tune", round_s=60.0)
    t = out.times("proportional")
    assert out.proportional.config.policy == "fifo" and t[1].start < t[2].start


def test_only_jobs_that_opted_in_are_requeued_in_the_synergy_replay(paper_profiles):
    """An alexnet job starts with the 3 cores a 7-GPU job leaves it; when that job ends,
    the controller would requeue it into 12 if it opted in (synergy:requeue-ok), and the
    replay does too, charging the restart; without the opt-in it keeps its 3 cores."""
    def replay_of(comment):
        return build_replay([hjob(1, end=20_000.0, comment=comment),
                             hjob(2, end=3600.0, gpus=7, cpus=21, mem=7 * 62_500.0)],
                            paper_profiles, FAIR, ["s0"])
    cluster = ClusterState.uniform(1)
    opted = replay_of("synergy:profile=alexnet synergy:requeue-ok")
    assert [t.requeue_ok for t in opted.trace] == [True, False]
    out = run(opted, paper_profiles, cluster, "tune", round_s=60.0, restart_cost_s=120.0,
              requeue_budget=2)
    restarts = {j.job_id: j.restarts for j in out.synergy.jobs}
    assert restarts == {1: 1, 2: 0}
    assert out.times("synergy")[1].end < out.times("proportional")[1].end
    plain = run(replay_of("synergy:profile=alexnet"), paper_profiles, cluster, "tune",
                round_s=60.0, restart_cost_s=120.0, requeue_budget=2)
    assert {j.restarts for j in plain.synergy.jobs} == {0}
    assert out.times("synergy")[1].end < plain.times("synergy")[1].end


def test_rules_then_assumed_mix_then_unknown(paper_profiles):
    hist = [hjob(1, name="resnet-50"), hjob(2, name="bert", account="nlp"), hjob(3),
            hjob(4, name="resnet", comment="synergy:profile=gnmt"),
            hjob(5, start=None, end=None, state="CANCELLED"), hjob(6, gpus=0, cpus=8)]
    rules = [Rule.parse("name:^resnet=res50"), Rule.parse("account:^nlp$=transformer")]
    rp = build_replay(hist, paper_profiles, FAIR, ["n1"], rules)
    assert rp.source == {1: "rule", 2: "rule", 3: "unknown", 4: "comment"}
    assert {t.job_id: t.model for t in rp.trace} == {1: "res50", 2: "transformer", 3: "",
                                                     4: "gnmt"}
    assert rp.left_out == {"never started (cancelled)": 1}
    mixed = build_replay(hist, paper_profiles, FAIR, ["n1"], assume=(100, 0, 0), seed=3)
    assert mixed.source[1] == mixed.source[3] == "assumed"
    assert {t.model for t in mixed.trace if mixed.source[t.job_id] == "assumed"} <= {
        "alexnet", "res18", "res50", "mobilenet", "shufflenet"}


@pytest.mark.parametrize("text", ["name:^x", "owner:x=res50", "name:(=res50", "name:x=bad key"])
def test_bad_rules_say_why(text):
    with pytest.raises(HistoryError, match="rule"):
        Rule.parse(text)


def whatif(*args: str):
    return CliRunner().invoke(main, ["whatif", "--no-progress", *args])


@pytest.mark.parametrize("kind", ["json", "txt"])
def test_whatif_on_a_recorded_export(kind, tmp_path):
    res = whatif("--from", str(FIXTURES / f"sacct_22.05.8.{kind}"), "--servers", "4",
              "--round-seconds", "1", "--format", "json", "--report", str(tmp_path))
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output.strip().splitlines()[-1])
    assert doc["replayed"] == 4 and doc["profiles"] == {"comment": 1, "unknown": 3}
    for run_ in ("actual", "proportional", "synergy"):
        assert doc["overall"][run_]["jobs"] == 4
    assert set(doc["fidelity"]) == {"makespan", "jct_mean", "wait_mean_h"}
    assert set(doc["by_account"]) == {"lab-a"} and set(doc["by_partition"]) == {"gpu"}
    html = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64," in html and (tmp_path / "jct_cdf.png").stat().st_size
    text = whatif("--from", str(FIXTURES / f"sacct_22.05.8.{kind}"), "--servers", "4",
               "--round-seconds", "1")
    assert text.exit_code == 0 and text.output.index("Fidelity") < text.output.index("mean JCT")


def test_the_progress_bar_path_replays_alike():
    """--progress drives click's bar through both replays (off a terminal click prints
    only its label) and changes nothing in the result."""
    res = CliRunner().invoke(main, [
        "whatif", "--progress", "--from", str(FIXTURES / "sacct_22.05.8.json"),
        "--servers", "4", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith("replaying")
    quiet = whatif("--from", str(FIXTURES / "sacct_22.05.8.json"), "--servers", "4",
                   "--format", "json")
    loud, still = (json.loads(r.stdout.strip().splitlines()[-1]) for r in (res, quiet))
    for doc in (loud, still):
        doc.pop("wall_s")             # how long the replays took: the one thing that differs
    assert loud == still


def test_a_bad_export_gives_counts_and_reasons(tmp_path):
    doc = json.loads((FIXTURES / "sacct_26.05.5.json").read_text())
    doc["jobs"] += ["junk", {"job_id": 99}, {**doc["jobs"][0], "job_id": 98,
                                             "time": {"submission": 5, "start": 9, "end": 7}}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    res = whatif("--from", str(path), "--servers", "1", "--round-seconds", "1")
    assert res.exit_code == 0, res.output
    assert "skipped records: 1 ends before it started" in res.output
    assert "skipped records: 1 no time record" in res.output
    assert "skipped records: 1 not an object" in res.output
    path.write_text(path.read_text()[:500])        # truncated
    res = whatif("--from", str(path), "--servers", "1")
    assert res.exit_code == 2 and "not JSON" in res.output and "Traceback" not in res.output


def test_a_history_with_nothing_to_replay_says_so(tmp_path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"jobs": []}))
    res = whatif("--from", str(path), "--servers", "1")
    assert res.exit_code == 2 and "no jobs" in res.output


def test_jobs_larger_than_the_replayed_cluster_are_refused(tmp_path):
    res = whatif("--from", str(FIXTURES / "sacct_22.05.8.json"), "--servers", "1",
              "--gpus-per-server", "1", "--cpus-per-server", "4")
    assert res.exit_code == 2 and "more GPUs than the replayed cluster" in res.output
