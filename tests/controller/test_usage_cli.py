"""The closed loop's marks for people: synergy status, synergy profile show KEY (the
evidence) and synergy profile suspects (list, --clear, --confirm)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.controller.state import StateStore


def setup(tmp_path):
    db = tmp_path / "state.db"
    state = StateStore(db)
    state.note_usage([{"job_id": 7, "key": "alexnet", "user": "eve", "granted_cpus": 12,
                       "granted_mem_gb": 125.0, "fair_cpus": 3, "fair_mem_gb": 62.5,
                       "used_cpus": 0.05, "peak_mem_gb": 0.4, "observed_s": 900.0,
                       "at": 1.8e9}])
    state.mark_suspect("alexnet", "eve", status="suspect", since=1.8e9, cap_cpus=3,
                       cap_mem_gb=62.5, jobs=1, cpu_use=0.004, mem_use=0.003,
                       note="1 job(s) used 0% of the cores and 0% of the memory")
    state.close()
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[controller]\nstate_db = "{db}"\n[profiles]\n'
                   f'store = "{tmp_path / "p.db"}"\n')
    return cfg


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_status_and_profile_show_give_the_evidence(tmp_path):
    cfg = setup(tmp_path)
    StateStore(tmp_path / "state.db").finish_round(
        StateStore(tmp_path / "state.db").start_round("enforce"), duration_s=0.1)
    res = run("status", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "alexnet" in res.output and "user eve" in res.output
    assert "capped at 3 cores and 62.5 GB per GPU" in res.output
    res = run("profile", "show", "alexnet", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "not in the profile store" in res.output
    assert "job 7" in res.output and "cores  0.05 of 12" in res.output
    res = run("profile", "show", "alexnet", "--config", str(cfg), "--format", "json")
    doc = json.loads(res.output)
    assert doc["suspects"][0]["user"] == "eve" and doc["usage"][0]["job_id"] == 7
    res = run("profile", "show", "bert", "--config", str(cfg))
    assert res.exit_code == 2 and "no profile 'bert'" in res.output   # none, no evidence
    assert "no store at" in res.output


def test_an_admin_confirms_or_clears_a_mark(tmp_path):
    cfg = setup(tmp_path)
    res = run("profile", "suspects", "--config", str(cfg))
    assert res.exit_code == 0 and "alexnet" in res.output and "suspect" in res.output
    res = run("profile", "suspects", "--config", str(cfg), "--confirm", "alexnet")
    assert res.exit_code != 0 and "--confirm needs --user" in res.output
    res = run("profile", "suspects", "--config", str(cfg), "--confirm", "alexnet",
              "--user", "eve")
    assert res.exit_code == 0, res.output
    assert StateStore(tmp_path / "state.db").suspects()[0]["status"] == "confirmed"
    res = run("profile", "suspects", "--config", str(cfg), "--clear", "alexnet",
              "--user", "bob")
    assert res.exit_code != 0 and "no mark of 'alexnet' for user bob" in res.output
    res = run("profile", "suspects", "--config", str(cfg), "--clear", "alexnet")
    assert res.exit_code == 0 and "cleared 1 mark(s)" in res.output
    state = StateStore(tmp_path / "state.db")
    assert state.suspects() == [] and state.usage() == []
    res = run("profile", "suspects", "--config", str(cfg))
    assert "no suspect profile keys" in res.output


def test_the_controller_and_the_simulator_keep_marks_by_one_rule(tmp_path):
    """A sequence of rounds' verdicts: eve's alexnet capped, then judged with no cap (its
    jobs, held to the cap, cannot show more use), then capped higher. The controller's
    stored marks (usage.record) and the simulator's (core.usage.marks_after) agree each
    round: the mark stays, its cap follows the latest capping verdict."""
    from synergy_slurm.controller.usage import record, suspect_caps
    from synergy_slurm.core import PerGpu
    from synergy_slurm.core.usage import UsageRule, UsageSample, judge, marks_after

    rule = UsageRule(threshold=0.3, min_jobs=1, min_observed_s=60, headroom=1.25)
    fair, big = PerGpu(3, 62.5), PerGpu(12, 125.0)

    def verdicts(job_id, used, peak, granted):
        return judge([UsageSample(job_id, "alexnet", "eve", granted, fair, used, peak,
                                  600.0)], rule)

    rounds = [verdicts(1, 0.5, 20.0, big),              # used little: capped at 3 / 62.5
              verdicts(2, 3.0, 60.0, fair),             # at the cap: no evidence, no cap
              verdicts(3, 2.0, 30.0, PerGpu(8, 100.0))]  # a later grant used a little more
    assert rounds[0]["alexnet", "eve"].cap is not None
    assert rounds[1]["alexnet", "eve"].cap is None
    state, marked = StateStore(":memory:"), {}
    for n, found in enumerate(rounds):
        record(state, found, 1.8e9 + n)
        marked = marks_after(marked, found)
        assert suspect_caps(state) == marked, n
    assert marked["alexnet", "eve"] == rounds[2]["alexnet", "eve"].cap
