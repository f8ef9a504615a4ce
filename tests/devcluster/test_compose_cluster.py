"""The compose cluster, up for real: scripts/compose-cluster.sh brings up
docker-compose.slurm.yml (dockerd started when none runs, the base image made locally,
nothing pulled), a GPU job submitted from the login container with
``synergy-sbatch --profile-key`` is shaped by the hook, released by the controller beside
slurmctld and runs; ``down`` leaves no container, network, volume or daemon of ours.

Skipped, saying why, where Docker cannot run (no dockerd and not root to start one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "compose-cluster.sh"
PROJECT = "synergy-slurm"
COMPOSE = ["docker-compose", "-p", PROJECT, "-f", str(REPO / "docker-compose.slurm.yml")]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _daemon_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, check=False,
                          timeout=30).returncode == 0


def _why_not() -> str:
    for exe in ("docker", "docker-compose", "mmdebstrap"):
        if shutil.which(exe) is None:
            return f"{exe} is not installed (scripts/bootstrap-system.sh installs it as root)"
    if _daemon_answers():
        return ""
    if shutil.which("dockerd") is None:
        return "no docker daemon runs and dockerd is not installed (apt-get install docker.io)"
    if os.geteuid() != 0:
        return "no docker daemon runs and starting one needs root"
    return ""


def _script(*args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def _login(command: str, user: str = "root") -> str:
    argv = [*COMPOSE, "exec", "-T", "login"]
    argv += ["su", "-", user, "-c", command] if user != "root" else ["bash", "-lc", command]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, f"{command!r} in login: {out.stderr}"
    return out.stdout


def _job(job_id: int) -> dict[str, str]:
    text = _login(f"scontrol -o show job {job_id}")
    return dict(f.split("=", 1) for f in text.split() if "=" in f)


def _ours_left() -> list[str]:
    """Containers, networks and volumes of the compose project, asked of a daemon (one
    started for the question when none runs, and stopped again)."""
    queries = [["docker", "ps", "-a", "--filter", f"label=com.docker.compose.project={PROJECT}",
                "-q"],
               ["docker", "network", "ls", "--filter", f"name={PROJECT}", "-q"],
               ["docker", "volume", "ls", "--filter", f"name={PROJECT}", "-q"]]
    daemon = None
    with tempfile.TemporaryDirectory() as tmp:
        if not _daemon_answers():
            daemon = subprocess.Popen(["dockerd", "--iptables=false", "--ip6tables=false",
                                       "--bridge=none", "--pidfile", f"{tmp}/pid"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(60):
                if _daemon_answers():
                    break
                time.sleep(0.5)
        try:
            return [line for q in queries
                    for line in subprocess.run(q, capture_output=True, text=True, timeout=30,
                                               check=True).stdout.split()]
        finally:
            if daemon is not None:
                daemon.terminate()
                daemon.wait(timeout=60)


def test_compose_cluster_runs_a_shaped_job_and_leaves_nothing_behind():
    why = _why_not()
    if why:
        pytest.skip(f"docker cannot run here: {why}")
    daemon_before = _daemon_answers()
    t0 = time.monotonic()
    up = _script("up", timeout=900)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        print(f"compose cluster up in {time.monotonic() - t0:.1f} s")
        # A CPU-hungry model (res18: 9 cores per GPU in the shipped profiles, the
        # partition's default is 3), submitted by a user as on a site's login node.
        sub = _login("cd ~ && synergy-sbatch --parsable --profile-key res18 --gpus=2 "
                     "--time=5 --wrap 'sleep 3; echo cpus=$SLURM_CPUS_ON_NODE'", user="alice")
        job_id = int(sub.strip().split(";")[0])
        deadline = time.monotonic() + 120
        while (job := _job(job_id))["JobState"] not in ("COMPLETED", "FAILED", "CANCELLED",
                                                         "TIMEOUT", "NODE_FAIL"):
            assert time.monotonic() < deadline, f"job {job_id} did not end: {job}"
            time.sleep(1)
        assert job["JobState"] == "COMPLETED", job
        assert job["CpusPerTres"] == "gres:gpu:9", job
        assert "synergy.managed=1" in job["AdminComment"], job
        assert _login(f"cat ~/slurm-{job_id}.out", user="alice").strip() == "cpus=18"
        audit = subprocess.run([*COMPOSE, "exec", "-T", "slurmctld", "cat",
                                "/var/lib/synergy-dev/audit.jsonl"], capture_output=True,
                               text=True, timeout=60, check=True).stdout
        ours = [r for r in map(json.loads, audit.splitlines()) if r["job_id"] == job_id]
        assert ours and ours[0]["actor"] == "synergy-controller" and ours[0]["result"] == "done"
        assert ours[0]["after"]["cpus_per_gpu"] == 9
    finally:
        down = _script("down", timeout=300)
    assert down.returncode == 0, down.stderr[-3000:]
    assert _daemon_answers() == daemon_before, "down left a daemon it started, or stopped one"
    assert _ours_left() == []
