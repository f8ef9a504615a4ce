"""SIGHUP re-reads synergy.toml: the mode, the interval, the policy, the profiles and the
hook table's place change from the next round; a file with a problem keeps the running
configuration and one log line says why; status and the metrics show the mode and when
the configuration was read.

Before, SIGHUP re-read only what Slurm allows and the site's limits: switching the file
to enforce did nothing until a restart, and nothing said so.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from synergy_slurm.config import load_config
from synergy_slurm.controller.audit import AuditLog
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.controller.state import StateStore
from synergy_slurm.controller.status import status_lines
from synergy_slurm.slurm.fake import FakeReader, FakeWriter

from .test_round_without_slurm import job, snapshot

ROOT = Path(__file__).resolve().parents[2]


def write_config(path: Path, tmp: Path, mode: str = "observe", interval: float = 30.0,
                 extra: str = "", port: int = 0) -> None:
    path.write_text(f"""
[slurm]
bindir = "{tmp}/no-slurm-here"
[hook]
dir = "{tmp}"
state_dir = "{tmp}/table"
[profiles]
store = "{tmp}/p.db"
[controller]
mode = "{mode}"
interval_s = {interval}
max_backoff_s = {interval}
state_db = "{tmp}/state.db"
audit_log = "{tmp}/audit.jsonl"
metrics_port = {port}
{extra}
""")


def in_process(tmp_path: Path) -> tuple[Controller, Path]:
    cfg_path = tmp_path / "synergy.toml"
    write_config(cfg_path, tmp_path)
    ctl = Controller(load_config(cfg_path), reader=FakeReader(snapshot(job(1))),
                     writer=FakeWriter(enforce=False), state=StateStore(tmp_path / "s.db"),
                     audit=AuditLog(tmp_path / "audit.jsonl"))
    return ctl, cfg_path


def test_a_reload_runs_by_the_new_file_from_the_next_round(tmp_path):
    ctl, cfg_path = in_process(tmp_path)
    ctl.run_round()
    assert ctl.mode == "observe" and not ctl.writer.enforce
    write_config(cfg_path, tmp_path, mode="enforce", interval=5,
                 extra='policy = "fifo"\nallocator = "greedy"')
    assert ctl.reload()
    assert (ctl.mode, ctl.cfg.controller.interval_s) == ("enforce", 5.0)
    assert ctl.writer.enforce and ctl.policy.name == "fifo"
    assert ctl.allocator.name == "greedy"
    assert ctl.metrics.mode.labels("enforce")._value.get() == 1
    assert ctl.metrics.mode.labels("observe")._value.get() == 0
    ctl.run_round()
    last = ctl.state.last_round()
    assert last["mode"] == "enforce" and last["interval_s"] == 5.0
    assert any(x.startswith("configuration: ") and "enforce mode" in x
               for x in status_lines(ctl.state))


def test_a_bad_file_keeps_the_running_configuration_and_says_why_in_one_line(tmp_path,
                                                                            caplog):
    ctl, cfg_path = in_process(tmp_path)
    loaded = ctl.config_loaded
    write_config(cfg_path, tmp_path, mode="advise", interval=-1)
    with caplog.at_level(logging.ERROR):
        assert not ctl.reload()
    lines = [r.getMessage() for r in caplog.records if "reload" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "mode" in lines[0] and "interval_s" in lines[0]      # every problem, one line
    assert "keeping the running configuration" in lines[0]
    assert ctl.mode == "observe" and ctl.cfg.controller.interval_s == 30.0
    assert ctl.config_loaded == loaded
    assert ctl.metrics.reloads.labels("failed")._value.get() == 1


def test_what_only_a_restart_changes_is_named_and_kept(tmp_path, caplog):
    ctl, cfg_path = in_process(tmp_path)
    write_config(cfg_path, tmp_path, extra="", port=9999)
    with caplog.at_level(logging.INFO):
        assert ctl.reload()
    assert ctl.cfg.controller.metrics_port == 0
    assert any("needs a restart to change: [controller] metrics_port" in r.getMessage()
               for r in caplog.records)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError("timed out")


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""


def status(cfg_path: Path) -> str:
    return subprocess.run([sys.executable, "-m", "synergy_slurm", "status", "--config",
                           str(cfg_path)], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout


@pytest.mark.skipif(sys.platform != "linux", reason="signals to a real daemon")
def test_a_live_daemon_reloads_on_sighup(tmp_path):
    """A real ``synergy controller run`` process (no Slurm here: its rounds fail and are
    recorded as failed, which is enough to see the configuration they ran under)."""
    cfg_path, port = tmp_path / "synergy.toml", free_port()
    write_config(cfg_path, tmp_path, interval=1, port=port)
    log_path = tmp_path / "controller.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "synergy_slurm", "controller", "run",
                                 "--config", str(cfg_path)], stdout=log, stderr=log,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wait_for(lambda: 'synergy_mode{mode="observe"} 1.0' in scrape(port))
        wait_for(lambda: "observe mode" in status(cfg_path))
        write_config(cfg_path, tmp_path, mode="enforce", interval=1, port=port)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: 'synergy_mode{mode="enforce"} 1.0' in scrape(port))
        assert "synergy_config_age_seconds" in scrape(port)
        shown = wait_for(lambda: (s := status(cfg_path)) and "enforce mode" in
                         s.splitlines()[0] and s)
        assert f"configuration: {cfg_path}, read " in shown
        write_config(cfg_path, tmp_path, mode="advise", interval=1, port=port)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "keeping the running configuration" in log_path.read_text())
        said = [x for x in log_path.read_text().splitlines() if "reload:" in x]
        assert len(said) == 1 and "advise" in said[0] and "enforce mode" in said[0]
        assert 'synergy_mode{mode="enforce"} 1.0' in scrape(port)
        assert 'synergy_config_reloads_total{result="failed"} 1.0' in scrape(port)
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
