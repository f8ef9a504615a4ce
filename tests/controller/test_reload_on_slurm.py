"""Switching a running controller to enforce with ``systemctl reload`` (SIGHUP), on the
dev cluster: before, SIGHUP re-read only what Slurm allows, so a job the hook held stayed
held by an observing controller until a restart, and nothing said a restart was needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ..slurm.helpers import submit
from .test_controller_on_slurm import fresh_table, held_ids
from .test_reload import ROOT, free_port, scrape, wait_for

pytestmark = pytest.mark.slurm


def test_a_reload_to_enforce_releases_what_the_hook_held(env):
    cli, tmp = env["cli"], env["tmp"]
    port = free_port()
    text = env["cfg_path"].read_text().replace('mode = "enforce"', 'mode = "observe"')
    text = text.replace("[controller]\n", f"[controller]\nmetrics_port = {port}\n")
    env["cfg_path"].write_text(text)
    fresh_table(env)
    job = submit(cli, "sleep 30", "--gpus=1", "--comment=synergy:profile=alexnet", "-o",
                 "/dev/null", tmp=tmp)
    assert job in held_ids(cli)
    log_path = tmp / "controller.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "synergy_slurm", "-v", "controller",
                                 "run", "--config", str(env["cfg_path"])], stdout=log,
                                stderr=log, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wait_for(lambda: "round 2:" in log_path.read_text())
        assert job in held_ids(cli)                    # observing: held it stays
        env["cfg_path"].write_text(text.replace('mode = "observe"', 'mode = "enforce"'))
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: job not in held_ids(cli), timeout=60)
        assert 'synergy_mode{mode="enforce"} 1.0' in scrape(port)
        said = [x for x in log_path.read_text().splitlines() if "reload:" in x]
        assert len(said) == 1 and "enforce mode" in said[0] and "was observe" in said[0]
        status = subprocess.run([sys.executable, "-m", "synergy_slurm", "status", "--config",
                                 str(env["cfg_path"]), "--job", str(job)],
                                capture_output=True, text=True, check=False,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
        assert "enforce mode" in status.splitlines()[0], status
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert Path(log_path).read_text().count("Traceback") == 0
