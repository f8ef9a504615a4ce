"""synergy whatif on recorded histories: what is replayed and how, what is left out and
why, the report's parts, and bad exports that give counts and reasons, not tracebacks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.core import ClusterState, PerGpu, Resources, Server
from synergy_slurm.core.pools import Pool
from synergy_slurm.core.usage import UsageRule
from synergy_slurm.decide import ControllerSettings
from synergy_slurm.errors import BadInputError
from synergy_slurm.site import load_site
from synergy_slurm.slurm.sacct import PRIORITY_FIELDS, HistoryJob, parse_history
from synergy_slurm.whatif import HistoryError, Rule, build_replay, pipeline, report
from synergy_slurm.whatif.history import MixGuess
from synergy_slurm.whatif.replay import run

FIXTURES = Path(__file__).resolve().parents[1] / "slurm" / "fixtures"
T = 1_800_000_000.0


def hjob(jid, start=0.0, end=3600.0, gpus=1, cpus=3, mem=62_500.0, name="train",
         comment="", account="lab-a", state="COMPLETED", nodes=("n1",),
         priority=0, submit=0.0, eligible=None, limit=None, admin="",
         partition="gpu") -> HistoryJob:
    return HistoryJob(jid, "alice", account, partition, name, comment, state, T + submit,
                      T + (submit if eligible is None else eligible),
                      None if start is None else T + start, None if end is None else T + end,
                      gpus, cpus, mem, None, nodes, "normal", priority, limit, admin)


def pools(*names: str) -> tuple[Pool, ...]:
    """One pool over ``names`` (8 GPUs, 24 cores, 500 GB each), standing for every
    partition."""
    return (Pool("", ClusterState(tuple(Server(n, Resources(8, 24, 500.0))
                                        for n in names))),)


def replay(rp, profiles, cluster=None, allocator="tune", **ctl):
    found = pools(*(s.name for s in (cluster or ClusterState.uniform(1)).servers))
    return run(rp, profiles, found[0].cluster, found, allocator, ControllerSettings(**ctl))


def test_the_recorded_history_becomes_a_replay(paper_profiles):
    history, _ = parse_history((FIXTURES / "sacct_26.05.5.json").read_text())
    rp = build_replay(history, paper_profiles, pools("n1", "n2"))
    assert sorted(rp.jobs) == [1, 3, 5, 6]
    assert rp.source == {1: "comment", 3: "unknown", 5: "unknown", 6: "unknown"}
    by_id = {t.job_id: t for t in rp.trace}
    assert by_id[1].model == "res18" and by_id[1].gpus == 2 and by_id[3].model == ""
    # The requeued job arrives with its first run's submission and is replayed once.
    assert rp.jobs[5].submit == min(j.submit for j in history if j.job_id == 5)
    assert [o.server for o in rp.background] == ["n1"]          # job 2, no GPUs
    assert rp.background[0].resources.cpus == 4
    assert sum(rp.notes.values()) == 4 and not rp.left_out
    assert rp.notes["failed: replayed for as long as it ran"] == 1


def test_work_is_measured_at_the_proportional_share(paper_profiles):
    """alexnet run an hour at 12 cores/GPU did 2.94 h of proportional work."""
    rp = build_replay([hjob(1, cpus=12, mem=125_000, comment="synergy:profile=alexnet")],
                      paper_profiles, pools("n1"))
    assert rp.trace[0].work_s == pytest.approx(3600 * 2.94, rel=0.01)


def test_an_hour_of_work_at_its_share_replays_as_an_hour(paper_profiles):
    rp = build_replay([hjob(1, comment="synergy:profile=res18"), hjob(2)], paper_profiles,
                      pools("s0"))
    times = replay(rp, paper_profiles, sched_s=1.0).times("plain")
    assert times[1].end - times[1].start == pytest.approx(3600)
    assert times[2].end - times[2].start == pytest.approx(3600)


def test_the_replay_starts_jobs_in_the_order_slurm_gave_them(paper_profiles):
    """Two 8-GPU jobs submitted at once on one 8-GPU server: Slurm ran job 2 first (its
    fair-share priority was higher); the plain replay does too, and so does the synergy
    replay where the hook does not hold them (a known profile on 26.05). Held jobs (res50,
    above the proportional share, is held on 22.05) show priority 0 to the controller
    until it releases them, so on 22.05 it plans them in submission order (job 1 first),
    as the real controller does. Without a priority for
    every job the replay falls back to submission order."""
    history = [hjob(1, start=3600.0, end=7200.0, gpus=8, cpus=24, mem=500_000,
                    priority=100, comment="synergy:profile=res50"),
               hjob(2, start=0.0, end=3600.0, gpus=8, cpus=24, mem=500_000, priority=900,
                    comment="synergy:profile=res50")]
    rp = build_replay(history, paper_profiles, pools("s0"))
    out = replay(rp, paper_profiles, sched_s=60.0, lowers_pending=True)
    assert out.plain.config.slurm_order == "slurm"
    for which in ("plain", "synergy"):
        t = out.times(which)
        assert t[2].start < t[1].start, which
    held = replay(rp, paper_profiles, sched_s=60.0).times("synergy")
    assert held[1].start < held[2].start
    unordered = [replace(history[0], priority=0), history[1]]
    out = replay(build_replay(unordered, paper_profiles, pools("s0")), paper_profiles,
                 sched_s=60.0)
    t = out.times("plain")
    assert out.plain.config.slurm_order == "fifo" and t[1].start < t[2].start


def test_only_jobs_that_opted_in_are_requeued_in_the_synergy_replay(paper_profiles):
    """An alexnet job starts with the 3 cores a 7-GPU job leaves it; when that job ends,
    the controller would requeue it into 12 if it opted in (synergy:requeue-ok), and the
    replay does too, charging the restart; without the opt-in it keeps its 3 cores."""
    def replay_of(comment):
        return build_replay([hjob(1, end=20_000.0, comment=comment),
                             hjob(2, end=3600.0, gpus=7, cpus=21, mem=7 * 62_500.0)],
                            paper_profiles, pools("s0"))
    ctl = {"sched_s": 60.0, "interval_s": 60.0, "restart_cost_s": 120.0,
           "requeue_budget": 2}
    opted = replay_of("synergy:profile=alexnet synergy:requeue-ok")
    assert [t.requeue_ok for t in opted.trace] == [True, False]
    out = replay(opted, paper_profiles, **ctl)
    restarts = {j.job_id: j.restarts for j in out.synergy.jobs}
    assert restarts == {1: 1, 2: 0}
    assert out.times("synergy")[1].end < out.times("plain")[1].end
    plain = replay(replay_of("synergy:profile=alexnet"), paper_profiles, **ctl)
    assert {j.restarts for j in plain.synergy.jobs} == {0}
    assert out.times("synergy")[1].end < plain.times("synergy")[1].end


def test_rules_then_assumed_mix_then_unknown(paper_profiles):
    hist = [hjob(1, name="resnet-50"), hjob(2, name="bert", account="nlp"), hjob(3),
            hjob(4, name="resnet", comment="synergy:profile=gnmt"),
            hjob(5, start=None, end=None, state="CANCELLED"), hjob(6, gpus=0, cpus=8)]
    rules = [Rule.parse("name:^resnet=res50"), Rule.parse("account:^nlp$=transformer")]
    rp = build_replay(hist, paper_profiles, pools("n1"), rules)
    assert rp.source == {1: "rule", 2: "rule", 3: "unknown", 4: "comment"}
    assert {t.job_id: t.model for t in rp.trace} == {1: "res50", 2: "transformer", 3: "",
                                                     4: "gnmt"}
    assert rp.left_out == {"never started (cancelled)": 1}
    mixed = build_replay(hist, paper_profiles, pools("n1"), guess=MixGuess((100, 0, 0), 3))
    assert mixed.source[1] == mixed.source[3] == "assumed"
    assert {t.model for t in mixed.trace if mixed.source[t.job_id] == "assumed"} <= {
        "alexnet", "res18", "res50", "mobilenet", "shufflenet"}


@pytest.mark.parametrize("text", ["name:^x", "owner:x=res50", "name:(=res50", "name:x=bad key"])
def test_bad_rules_say_why(text):
    with pytest.raises(HistoryError, match="rule"):
        Rule.parse(text)


def whatif(*args: str):
    """The command, for what the command line itself does (options, printing)."""
    return CliRunner().invoke(main, ["whatif", "--no-progress", *args])


def pipeline_run(export: Path, profiles, servers: int = 4, round_s: float = 30.0,
                 found: tuple[Pool, ...] | None = None, release=None,
                 **req) -> pipeline.Result:
    """whatif's pipeline on a saved history, on ``servers`` identical servers (or the
    pools ``found``), with the closed loop on as [usage] has it by default."""
    found = found or (Pool("", ClusterState.uniform(servers)),)
    inputs = pipeline.Inputs(profiles, found, ControllerSettings(sched_s=round_s), release,
                             profiles_from="the paper's")
    return pipeline.run_whatif(pipeline.Request(export=export, usage_rule=UsageRule(), **req),
                               inputs)


@pytest.mark.parametrize("kind", ["json", "txt"])
def test_whatif_on_a_recorded_export(kind, tmp_path, paper_profiles):
    result = pipeline_run(FIXTURES / f"sacct_22.05.8.{kind}", paper_profiles, round_s=1.0)
    doc = result.doc
    report.write_html(doc, result.outcome, tmp_path / "report.html", result.used)
    assert doc["replayed"] == 4 and doc["profiles"] == {"comment": 1, "unknown": 3}
    for run_ in ("actual", "plain", "synergy"):
        assert doc["overall"][run_]["jobs"] == 4
    assert set(doc["fidelity"]) == {"of", "makespan", "jct_mean", "jct_p99", "wait_mean_h"}
    assert doc["ran"] == "plain" and doc["fidelity"]["of"] == "plain"
    assert set(doc["by_account"]) == {"lab-a"} and set(doc["by_partition"]) == {"gpu"}
    html = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64," in html and (tmp_path / "jct_cdf.png").stat().st_size
    out = report.as_text(doc)
    assert out.index("Expected with synergy") < out.index("How far to trust it") \
        < out.index("Next:") < out.index("mean JCT (h)")


def test_the_command_prints_the_pipelines_report(tmp_path):
    """The command line: its options reach the pipeline, the text or JSON is printed, and
    --report writes the HTML page (into a directory it makes)."""
    deep = tmp_path / "a" / "b"
    res = whatif("--from", str(FIXTURES / "sacct_22.05.8.json"), "--servers", "4",
                 "--round-seconds", "1", "--format", "json", "--report", str(deep))
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    assert doc["replayed"] == 4 and doc["cluster"]["servers"] == 4
    assert doc["model"]["slurm_sched_s"] == 1.0 and (deep / "report.html").exists()
    text = whatif("--from", str(FIXTURES / "sacct_22.05.8.txt"), "--servers", "4")
    assert text.exit_code == 0 and "Expected with synergy" in text.output


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


def test_a_bad_export_gives_counts_and_reasons(tmp_path, paper_profiles):
    doc = json.loads((FIXTURES / "sacct_26.05.5.json").read_text())
    doc["jobs"] += ["junk", {"job_id": 99}, {**doc["jobs"][0], "job_id": 98,
                                             "time": {"submission": 5, "start": 9, "end": 7}}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    out = report.as_text(pipeline_run(path, paper_profiles, servers=1, round_s=1.0).doc)
    assert "skipped records: 1 ends before it started" in out
    assert "skipped records: 1 no time record" in out
    assert "skipped records: 1 not an object" in out
    path.write_text(path.read_text()[:500])        # truncated
    with pytest.raises(BadInputError, match="not JSON"):
        pipeline_run(path, paper_profiles, servers=1)
    res = whatif("--from", str(path), "--servers", "1")      # the command's one line
    assert res.exit_code == 2 and "not JSON" in res.output and "Traceback" not in res.output


def test_a_history_with_nothing_to_replay_says_so(tmp_path, paper_profiles):
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"jobs": []}))
    with pytest.raises(BadInputError, match="no jobs"):
        pipeline_run(path, paper_profiles, servers=1)


def test_jobs_larger_than_the_replayed_cluster_are_refused(paper_profiles):
    small = (Pool("", ClusterState.uniform(1, gpus=1, cpus=4)),)
    with pytest.raises(BadInputError, match="more GPUs than the replayed cluster"):
        pipeline_run(FIXTURES / "sacct_22.05.8.json", paper_profiles, found=small)


def test_arrival_is_the_submission_unless_the_job_asked_to_wait(paper_profiles):
    """A job synergy's hook held (tagged) became eligible at its release: its wait counts
    from its submission. A job the hook did not tag that became eligible later asked to
    wait (--begin, a dependency): it is not queued before then."""
    held = hjob(1, submit=0.0, eligible=300.0, start=300.0, end=900.0,
                admin="synergy.managed=1,synergy.held=1,synergy.profile=res18")
    begin = hjob(2, submit=0.0, eligible=500.0, start=500.0, end=900.0)
    rp = build_replay([held, begin], paper_profiles, pools("s0"))
    by_id = {t.job_id: t for t in rp.trace}
    assert by_id[1].arrival == 0.0 and by_id[1].eligible is None
    assert by_id[2].arrival == 0.0 and by_id[2].eligible == 500.0
    assert rp.source[1] == "tag" and by_id[1].model == "res18"
    out = replay(rp, paper_profiles, sched_s=5.0)
    assert out.times("actual")[1].arrival == 0.0          # JCT from the submission
    assert out.times("plain")[2].start == 500.0
    assert out.times("plain")[1].start == 0.0


def test_fixed_outcomes_run_as_long_as_they_did(paper_profiles):
    """alexnet jobs that hit their limit, failed or were cancelled after an hour run an
    hour in the synergy replay too, though alexnet runs 2.9x faster there; a completed
    one's start-up is not sped up either."""
    hist = [hjob(i, end=3600.0, state=state, comment="synergy:profile=alexnet",
                 nodes=(f"n{i}",), limit=3600.0)
            for i, state in enumerate(("TIMEOUT", "FAILED", "CANCELLED", "COMPLETED"), 1)]
    rp = build_replay(hist, paper_profiles, pools("n1", "n2", "n3", "n4"), startup_s=600.0)
    out = run(rp, paper_profiles, rp_cluster := pools("n1", "n2", "n3", "n4")[0].cluster,
              pools("n1", "n2", "n3", "n4"), "tune",
              ControllerSettings(sched_s=5.0, interval_s=5.0))
    assert rp_cluster.total.gpus == 32
    syn = out.times("synergy")
    for i in (1, 2, 3):
        assert syn[i].end - syn[i].start == pytest.approx(3600.0)
    speed = paper_profiles["alexnet"].speedup(paper_profiles["alexnet"].ideal, PerGpu(3, 62.5))
    assert syn[4].end - syn[4].start == pytest.approx(600.0 + 3000.0 / speed)


def test_partitions_and_gpu_types_are_replayed_apart(paper_profiles, tmp_path):
    """On the mixed site an A100 job that waited for its partition's two nodes waits in
    the replay too, though the H100 nodes stand idle; without partitions (--servers) it
    would not have."""
    hist = [hjob(1, gpus=8, cpus=128, mem=1_024_000.0, end=3600.0, partition="a100",
                 nodes=("a1", "a2")),
            hjob(2, gpus=4, cpus=64, mem=512_000.0, start=3600.0, end=7200.0,
                 partition="a100", nodes=("a1",))]
    doc = _whatif_history(tmp_path, hist, paper_profiles, found=load_site("mixed").pools())
    assert doc["overall"]["plain"]["makespan_h"] == pytest.approx(2.0, abs=0.01)
    assert [p["name"] for p in doc["cluster"]["partitions"]] == ["a100", "h100", "all"]
    flat = _whatif_history(tmp_path, hist, paper_profiles, found=(
        Pool("", ClusterState.uniform(4, cpus=128, mem_gb=2048.0)),))
    assert flat["overall"]["plain"]["makespan_h"] == pytest.approx(1.0, abs=0.01)


def test_the_report_leads_with_the_forecast_and_the_cost_by_size(paper_profiles, tmp_path):
    """Where synergy did not run, the headline is the forecast (replay against replay,
    never what happened against a replay, which carries the replay's error): it and
    ``forecast`` agree. Where synergy ran, what happened against the plain replay."""
    hist = [hjob(i, start=60.0 * i, end=60.0 * i + 3600, gpus=g, cpus=3 * g,
                 mem=62_500.0 * g, comment="synergy:profile=alexnet", nodes=("s0",))
            for i, g in enumerate((1, 2, 4, 8), 1)]
    doc = _whatif_history(tmp_path, hist, paper_profiles, servers=2)
    assert doc["ran"] == "plain" and doc["headline"]["kind"] == "forecast"
    assert doc["headline"]["jct_mean"] == doc["forecast"]["expected"] > 1
    assert doc["headline"]["guaranteed"] == doc["forecast"]["guaranteed"]
    assert list(doc["by_size"]) == ["1 GPU", "2 GPUs", "3-4 GPUs", "5-8 GPUs"]
    # A window where synergy ran is measured the other way round.
    tagged = [replace(j, admin_comment="synergy.managed=1") for j in hist]
    doc = _whatif_history(tmp_path, tagged, paper_profiles, servers=2)
    assert doc["ran"] == "synergy" and doc["fidelity"]["of"] == "synergy"
    assert doc["headline"]["kind"] == "measured"
    assert doc["headline"]["jct_mean"] == doc["measured"]["jct_mean"]


def test_the_release_decides_what_the_hook_holds(tmp_path):
    for release, held in (("22.05", True), ("26.05", False)):
        res = whatif("--from", str(FIXTURES / "sacct_22.05.8.json"), "--servers", "4",
                     "--slurm-release", release, "--format", "json")
        doc = json.loads(res.output.strip().splitlines()[-1])
        assert doc["model"]["known_profiles_held"] is held
        assert doc["model"]["slurm_release"].startswith(release)
    res = whatif("--from", str(FIXTURES / "sacct_22.05.8.json"), "--servers", "4",
                 "--slurm-release", "latest")
    assert res.exit_code == 2 and "--slurm-release" in res.output


def _whatif_history(tmp_path, hist, profiles, **run):
    """whatif's report over ``hist`` written as sacct -P text with the optional columns."""
    from synergy_slurm.slurm.sacct import PRIORITY_FIELDS

    def ts(t):
        return "" if t is None else __import__("datetime").datetime.fromtimestamp(
            t).isoformat(timespec="seconds")

    rows = ["|".join(PRIORITY_FIELDS)]
    for j in hist:
        tres = f"cpu={j.cpus},mem={int(j.mem_mb)}M,gres/gpu={j.gpus},node={len(j.nodes)}"
        rows.append("|".join(map(str, (
            j.job_id, j.user, j.account, j.partition, j.name, j.comment, j.state,
            ts(j.submit), ts(j.eligible), ts(j.start), ts(j.end), tres, tres,
            ",".join(j.nodes), j.qos, j.priority,
            "UNLIMITED" if j.time_limit_s is None else f"{int(j.time_limit_s // 60)}:00",
            j.admin_comment))))
    path = tmp_path / "h.txt"
    path.write_text("\n".join(rows) + "\n")
    return pipeline_run(path, profiles, round_s=5.0, **run).doc


def test_whatif_says_what_is_wrong_before_it_replays(tmp_path, paper_profiles):
    src = FIXTURES / "sacct_22.05.8.json"
    rule = Rule.parse("name:x=nosuchkey")
    with pytest.raises(pipeline.OptionError, match="no profile named nosuchkey") as err:
        pipeline_run(src, paper_profiles, rules=(rule,))
    assert err.value.option == "--rule / [whatif] rules"
    res = whatif("--from", str(src), "--servers", "4", "--rule", "name:x=nosuchkey")
    assert res.exit_code == 2 and "no profile named nosuchkey" in res.output
    assert "Invalid value for --rule / [whatif] rules" in res.output   # as click says it
    junk = tmp_path / "junk.txt"
    junk.write_text("|".join(("JobIDRaw", *PRIORITY_FIELDS[1:])) + "\n" +
                    "\n".join(f"{i}|a|b" for i in range(3)))
    # Lines too short to be a record are one record cut short (a newline in users' text
    # splits a record: the next line never stands alone).
    with pytest.raises(BadInputError, match=r"none of its 1 records could be read: 1 7 "
                       r"fields, expected 18 \(the record is cut short\)"):
        pipeline_run(junk, paper_profiles)
    with pytest.raises(pipeline.OptionError, match="not a time sacct takes") as err:
        pipeline.read(pipeline.Request(start="-1 day"), None)
    assert err.value.option == "--start"


def test_times_outside_any_plausible_window_are_noted(paper_profiles):
    early = replace(hjob(1), submit=10.0, eligible=10.0, start=20.0, end=3620.0)
    rp = build_replay([early, hjob(2)], paper_profiles, pools("n1"))
    assert any("submitted in 1970" in n for n in rp.notes)


def test_an_export_from_the_future_is_noted(tmp_path, paper_profiles):
    """A saved export has no window: a clock set years ahead shows only against today."""
    text = (FIXTURES / "sacct_22.05.8.txt").read_text().replace("2026-12-03", "2030-12-03")
    future = tmp_path / "future.txt"
    future.write_text(text)
    notes = pipeline_run(future, paper_profiles).doc["notes"]
    assert any("submitted after today (from 2030-12-03)" in n for n in notes), notes
    notes = pipeline_run(FIXTURES / "sacct_22.05.8.txt", paper_profiles).doc["notes"]
    assert not any("after today" in n for n in notes)


def test_each_jobs_profile_is_picked_as_the_controller_picks_it(paper_profiles):
    """A profile measured on A100s shapes a job that asked for A100s, not one on H100s (it
    stays proportional there); under [profiles] trust = "own" a profile bob measured
    shapes bob's jobs, not alice's. (Before: every profile applied to every job by key.)"""
    profiles = {"res18": replace(paper_profiles["res18"]),
                "bert@a100": replace(paper_profiles["gnmt"], key="bert", gpu_type="a100")}
    typed = Pool("", ClusterState((Server("a1", Resources(8, 24, 500.0)),
                                   Server("h1", Resources(8, 24, 500.0)))),
                 {"a1": "a100", "h1": "h100"})
    jobs = [replace(hjob(1, comment="synergy:profile=bert", nodes=("a1",)), gpu_type="a100"),
            replace(hjob(2, comment="synergy:profile=bert", nodes=("h1",)), gpu_type="h100"),
            replace(hjob(3, comment="synergy:profile=res18"), user="bob"),
            hjob(4, comment="synergy:profile=res18")]
    rp = build_replay(jobs, profiles, (typed,), owners={"res18": "bob"}, trust="own")
    assert rp.source == {1: "comment", 2: "unknown", 3: "comment", 4: "unknown"}
    assert [t.model for t in rp.trace] == ["bert@a100", "", "res18", ""]
    out = run(rp, profiles, typed.cluster, (typed,), "tune", ControllerSettings())
    assert len(out.times("synergy")) == 4              # replayed with the typed profile
    rp = build_replay(jobs, profiles, (typed,), owners={"res18": "bob"}, trust="all")
    assert rp.source[4] == "comment"


def test_what_jobs_used_and_the_keys_to_profile_next_are_reported(paper_profiles):
    """From a real history with its steps (sacct --json without -X): every job's use is
    read, and the keys without a profile are listed by GPU-hours for profiling; a text
    export, which carries no steps, says so."""
    doc = pipeline_run(FIXTURES / "sacct_usage_22.05.8.json", paper_profiles).doc
    assert doc["usage"]["jobs_measured"] == 4 and doc["usage"]["skipped"] == 0
    keys = doc["keys_to_profile"]
    assert {k["key"] for k in keys} == {"cpu-1of4", "mem-600of2000", "idle", "steps-1of4"}
    assert all(k["users"] == ["root"] for k in keys)
    assert all(k["gpu_hours"] > 0 for k in keys)
    assert [k["gpu_hours"] for k in keys] == sorted((k["gpu_hours"] for k in keys),
                                                    reverse=True)
    doc = pipeline_run(FIXTURES / "sacct_22.05.8.txt", paper_profiles).doc
    assert "usage not in this export" in report.as_text(doc)


def test_the_forecasts_and_their_report(tmp_path, paper_profiles):
    """The document has the three forecasts (gains in mean JCT) and keys_to_profile as
    objects; the HTML page has them as tables, and the core-use plot."""
    src = FIXTURES / "sacct_usage_26.05.5.json"
    result = pipeline_run(src, paper_profiles, servers=1, mix=(100.0, 0.0, 0.0))
    doc = result.doc
    report.write_html(doc, result.outcome, tmp_path / "report.html", result.used)
    fc = doc["forecast"]
    assert all(isinstance(fc[k], float) and fc[k] > 0
               for k in ("guaranteed", "expected", "optimistic"))
    detail = doc["forecast_detail"]
    assert "100/0/0" in detail["optimistic"]["assumes"]
    assert detail["optimistic"]["profiles"] == {"assumed": 4}
    assert detail["guaranteed"]["profiles"] == {"unknown": 4}     # all ran under a minute
    assert all({"key", "gpu_hours", "profile_run", "sbatch"} <= set(k)
               for k in doc["keys_to_profile"])
    assert doc["not_reshaped"] == {"share": 0.0, "gpu_hours": {}}
    html = (tmp_path / "report.html").read_text()
    assert "<table>" in html and "<h2>Forecasts" in html and "<h2>Keys to profile" in html
    assert (tmp_path / "core_use.png").stat().st_size and "alt=\"core_use.png\"" in html
    # No mix stated, no optimistic forecast: it is an assumption, and says so.
    doc = pipeline_run(src, paper_profiles, servers=1).doc
    assert doc["forecast"]["optimistic"] is None and doc["forecast"]["guaranteed"] > 0
    assert "give --assume-mix" in doc["forecast_detail"]["optimistic"]["assumes"]


def test_a_job_slurm_laid_out_unevenly_runs_at_its_poorest_nodes_pace(paper_profiles):
    """#42's w19: 22.05 gave an 8-GPU alexnet job spread over two nodes 4 of its 24 cores
    on one node's 4 GPUs, and it ran an hour at that node's 1 core per GPU. Its work is
    measured at that pace, and the plain replay, spreading it again with the shape it had,
    runs it the hour it ran; placed whole on one node (a bigger one), it runs at 3 cores
    per GPU; reshaped by synergy, at the share synergy gives it on every node."""
    spread = replace(hjob(1, start=10.0, end=3610.0, submit=10.0, gpus=8, cpus=24,
                          mem=500_000.0, comment="synergy:profile=alexnet",
                          nodes=("n1", "n2")), batch_node=(4, 4))
    # GPUs left free when it arrives: 2, 2 and 4 (best fit), so it spreads again.
    fill = [hjob(i, end=7200.0, gpus=g, cpus=g, mem=40_000.0, nodes=(f"n{i}",))
            for i, g in ((2, 6), (3, 6), (4, 4))]
    rp = build_replay([spread, *fill], paper_profiles, pools("n1", "n2"))
    tj = {t.job_id: t for t in rp.trace}[1]
    alexnet, fair = paper_profiles["alexnet"], PerGpu(3, 62.5)
    assert tj.spread_cpus == 1.0
    assert tj.work_s == pytest.approx(3600 * alexnet.speedup(PerGpu(1, 62.5), fair))
    assert rp.notes["spread over nodes with fewer cores per GPU on one (its batch step's): "
                    "its work measured at that node's pace, and replayed at it where it "
                    "keeps its shape and is spread again"] == 1
    out = replay(rp, paper_profiles, ClusterState.uniform(3), sched_s=1.0)
    plain = out.times("plain")[1]
    assert plain.end - plain.start == pytest.approx(3600, rel=0.01)
    reshaped = out.times("synergy")[1]
    assert reshaped.end - reshaped.start < 0.8 * 3600
    # Without the layout, the hour is taken as work at 3 cores per GPU.
    even = build_replay([replace(spread, batch_node=None), *fill], paper_profiles,
                        pools("n1", "n2"))
    assert {t.job_id: t for t in even.trace}[1].work_s == pytest.approx(3600)
    # Left as submitted by synergy (its comment opts out): the same pace in both replays.
    out_left = replay(build_replay([replace(spread, comment="synergy:profile=alexnet "
                                            "synergy:off"), *fill], paper_profiles,
                                   pools("n1", "n2")),
                      paper_profiles, ClusterState.uniform(3), sched_s=1.0)
    for which in ("plain", "synergy"):
        left = out_left.times(which)[1]
        assert left.end - left.start == pytest.approx(3600, rel=0.01), which
    # Shaped by synergy in the history (the hook's tag): its work is measured at the
    # share synergy gave it, as the model lays that out (evenly), and it is replayed plain
    # with its partition's default, laid out afresh.
    managed = build_replay([replace(spread, admin_comment="synergy.managed=1"), *fill],
                           paper_profiles, pools("n1", "n2"))
    shaped = {t.job_id: t for t in managed.trace}[1]
    assert shaped.spread_cpus == 0.0 and shaped.work_s == pytest.approx(3600)
    # A poorest node at or above the share it is replayed with (28 cores: 3 per GPU,
    # its batch node 13 for 4 GPUs, 3.25) is not a slower pace.
    odd = build_replay([replace(spread, cpus=28, batch_node=(13, 4)), *fill],
                       paper_profiles, pools("n1", "n2"))
    assert {t.job_id: t for t in odd.trace}[1].spread_cpus == 0.0
    # One node that holds all 8 GPUs: its cores are its share's on that node.
    big = (Pool("", ClusterState((Server("n9", Resources(16, 48, 1000.0)),))),)
    whole = run(rp, paper_profiles, big[0].cluster, big, "tune",
                ControllerSettings(sched_s=1.0)).times("plain")[1]
    assert whole.end - whole.start == pytest.approx(tj.work_s, rel=0.01)


def test_spread_jobs_without_their_layout_earn_a_warning():
    """An -X export keeps only a spread job's totals: where such jobs hold a real share
    of the GPU-hours, the first screen says so and how to export their layout."""
    from synergy_slurm.whatif import summary

    spread = hjob(1, gpus=8, cpus=24, nodes=("n1", "n2"))          # 8 GPU-hours
    small = [hjob(i, gpus=1) for i in range(2, 10)]                 # 8 more
    every = range(1, 10)
    assert summary.spread_unrecorded([spread, *small], every) == pytest.approx(0.5)
    assert summary.spread_unrecorded([replace(spread, nodes=("n1",)), *small], every) == 0
    # Its pace not read (no profile, or it ended at its limit): nothing overstated.
    assert summary.spread_unrecorded([spread, *small], range(2, 10)) == 0
    # An export with steps: a spread job without a batch step (salloc) is not a layout
    # left out.
    stepped = [replace(small[0], batch_node=(3, 1)), *small[1:]]
    assert summary.spread_unrecorded([spread, *stepped], every) == 0
    trust = {"wait_h": {"history": 0.0, "replay": 0.0, "missed_share": 0.0},
             "jct_mean": 0.0}
    said = [w.what + " / " + w.check for w in summary.warnings(
        trust, 1.0, 2, 2, 8, 16, True, {}, summary.spread_unrecorded([spread, *small],
                                                                     every))]
    assert len(said) == 1 and "hold 50% of the GPU-hours" in said[0]
    assert "export without -X (sacct -a -D --json)" in said[0]
    assert not summary.warnings(trust, 1.0, 2, 2, 8, 16, True, {}, 0.04)


def test_what_to_do_next_reads_in_order_with_or_without_warnings():
    from synergy_slurm.whatif import summary

    assert summary.next_steps([], False) == [
        "Run synergy in dry-run for a week (synergy controller run --dry-run) and compare "
        "with this forecast."]
    warned = summary.next_steps([], True)
    assert warned[0].startswith("Check the warnings") and warned[1].startswith("Then run")
