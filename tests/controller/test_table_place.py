"""Issue 45, item 10: one place for the hook table. The dev cluster's --hook and `hook
install` write the same joining line; an enforcing controller whose table the installed
hook does not read refuses to start, in one line naming both places; and new GPU jobs that
arrive without the hook's tag while the table is fresh are noticed (log, status, metric)."""

from __future__ import annotations

import logging
from pathlib import Path

from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.controller.status import status_lines
from synergy_slurm.controller.tagwatch import GRACE_S, UNTAGGED_MIN, TagWatch
from synergy_slurm.devcluster import local_spec, write_all_config
from synergy_slurm.devcluster.controller_config import controller_dict
from synergy_slurm.hook.install import installed_table_dir, table_dir

from .test_round_without_slurm import NOW, controller, job, snapshot

SHIPPED = Path(__file__).resolve().parents[2] / "job_submit_hook" / "job_submit.lua"


def test_the_chain_line_says_where_the_hook_reads_its_table():
    etc = Path("/etc/slurm")
    assert table_dir(SHIPPED.read_text(), etc) == etc                 # bare chain(): beside
    assert table_dir('dofile("/opt/s/synergy.lua").chain()\n', etc) == Path("/opt/s")
    assert table_dir('x = 1\ndofile("/etc/slurm/synergy.lua").chain("/srv/syn")\n',
                     etc) == Path("/srv/syn")
    assert table_dir('-- dofile("/etc/slurm/synergy.lua").chain("/srv/syn")\n', etc) is None
    assert table_dir("return slurm.SUCCESS\n", etc) is None


def test_the_dev_cluster_and_hook_install_write_the_same_line(tmp_path):
    spec = local_spec(tmp_path / "cluster", nodes=1, hook=True)
    spec.etc.mkdir(parents=True)
    write_all_config(spec)
    other = tmp_path / "site-etc"
    other.mkdir()
    cfg = tmp_path / "synergy.toml"
    cfg.write_text("")
    res = CliRunner().invoke(main, ["hook", "install", "--config", str(cfg), "--conf-dir",
                                    str(other), "--state-dir", str(spec.etc), "--write"])
    assert res.exit_code == 0, res.output
    assert (spec.etc / "job_submit.lua").read_text() == (other / "job_submit.lua").read_text()
    assert (spec.etc / "synergy.lua").read_text() == (other / "synergy.lua").read_text()
    # ... and the dev cluster's controller writes the table where that line reads it.
    state_dir = controller_dict(spec, tmp_path / "p.json", tmp_path)["hook"]["state_dir"]
    assert installed_table_dir(spec.etc) == Path(state_dir) == spec.etc
    assert f'.chain("{spec.etc}")' in (spec.etc / "job_submit.lua").read_text()


def _site(tmp_path: Path, state_dir: Path, mode: str) -> Path:
    """A hook installed in tmp/etc with a bare chain() (the table beside the module, as the
    dev cluster's --hook wrote it) and a config whose state_dir is elsewhere."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "job_submit.lua").write_text(SHIPPED.read_text())
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[hook]\ndir = "{etc}"\nstate_dir = "{state_dir}"\n[controller]\n'
                   f'mode = "{mode}"\nstate_db = "{tmp_path}/state.db"\n'
                   f'audit_log = "{tmp_path}/audit.jsonl"\nmetrics_port = 0\n')
    return cfg


def test_an_enforcing_controller_whose_table_the_hook_does_not_read_refuses_to_start(
        tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")          # it must stop before Slurm
    state = tmp_path / "state"
    state.mkdir()
    cfg = _site(tmp_path, state, "enforce")
    res = CliRunner().invoke(main, ["controller", "run", "--once", "--config", str(cfg)])
    assert res.exit_code == 1, res.output
    (line,) = res.stderr.splitlines()
    assert line.startswith("Error: the hook") and f"reads its table in {tmp_path}/etc " in line
    assert f"writes it in {state} ([hook] state_dir)" in line
    assert not list(state.iterdir())                     # no table written where nobody reads
    # Observing writes no table: it says so and goes on (to the round, which needs Slurm).
    res = CliRunner().invoke(main, ["controller", "run", "--once", "--dry-run", "--config",
                                    str(cfg)])
    assert "the round failed: scontrol not found" in res.stderr
    # Where the two agree, it starts.
    cfg.write_text(cfg.read_text().replace(f'state_dir = "{state}"',
                                           f'state_dir = "{tmp_path}/etc"'))
    res = CliRunner().invoke(main, ["controller", "run", "--once", "--config", str(cfg)])
    assert "reads its table" not in res.output and "scontrol not found" in res.stderr


def test_the_tag_watch_counts_untagged_new_jobs_in_a_row():
    w = TagWatch()
    tagged = "synergy.managed=1"
    assert w.round([job(1, admin_comment="", submit_time=100)], None) == []
    # Submitted before the table was fresh (or within the hook's grace): not counted.
    assert w.round([job(2, admin_comment="", submit_time=100)], 100.0) == []
    late = 100 + GRACE_S + 1
    assert w.round([job(3, admin_comment="", submit_time=int(late))], 100.0) == [3]
    assert not w.blind
    assert w.round([job(3, admin_comment="", submit_time=int(late)),
                    job(4, admin_comment="", submit_time=int(late) + 5)], 100.0) == [3, 4]
    assert w.blind and UNTAGGED_MIN == 2
    assert w.round([job(5, admin_comment=tagged, submit_time=int(late) + 9)], 100.0) == []
    assert not w.blind


def test_a_controller_says_when_new_jobs_arrive_without_the_hooks_tag(tmp_path, profiles_path,
                                                                       caplog):
    """Round 1 makes the table fresh; jobs submitted later without the tag: round 2 logs
    it, status shows it, the metric counts them; a tagged job clears it."""
    ctl, _ = controller(tmp_path, profiles_path, snapshot())
    ctl.run_round()
    assert ctl._fresh_since == NOW
    later = dict(admin_comment="", priority=1, reason="Resources",
                 submit_time=int(NOW + GRACE_S + 5))
    ctl.reader.snap = snapshot(job(11, **later), job(12, **later))  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING):
        ctl.run_round()
    warned = [r.getMessage() for r in caplog.records if "without the hook's tag" in r.getMessage()]
    assert len(warned) == 1 and "the hook sees no table" in warned[0]
    assert "the installed hook reads" in warned[0] or "no job_submit.lua" in warned[0]
    assert ctl.metrics.untagged._value.get() == 2
    lines = status_lines(ctl.state)   # rounds are stamped by the wall clock
    assert lines[1].startswith("warning: 2 new GPU jobs in managed partitions")
    tagged = dict(later, admin_comment="synergy.managed=1,synergy.profile=alexnet")
    ctl.reader.snap = snapshot(job(13, **tagged))  # type: ignore[attr-defined]
    ctl.run_round()
    assert ctl.metrics.untagged._value.get() == 0
    assert not any(x.startswith("warning:") for x in status_lines(ctl.state))
