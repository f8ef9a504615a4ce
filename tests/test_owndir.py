"""Admin tools write only into directories no other user can steer (issue 43, item 7):
made here with an exclusive mkdir, or the caller's own and writable by no one else, under
parents no other user owns; files opened without following links. Runs as root here (as
an admin would), with ``nobody`` as the other user."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.owndir import UnsafeDirectory, own_dir, write_file

NOBODY = pwd.getpwnam("nobody").pw_uid


def others(path: Path) -> Path:
    """``path`` made a directory another user owns (as one they made first)."""
    path.mkdir()
    os.chown(path, NOBODY, -1)
    return path


def test_a_new_directory_is_made_with_its_mode_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        made = own_dir(tmp_path / "a" / "b", 0o700)
    finally:
        os.umask(old)
    assert made.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o700
    assert own_dir(made) == made              # the caller's own: used again


@pytest.mark.parametrize("make", [
    lambda p: others(p),
    lambda p: (p.mkdir(), p.chmod(0o777), p)[-1],
    lambda p: (p.symlink_to(p.parent / "elsewhere"), (p.parent / "elsewhere").mkdir(), p)[-1],
    lambda p: (p.write_text("x"), p)[-1],
])
def test_a_directory_another_user_could_steer_is_refused(tmp_path, make):
    target = make(tmp_path / "out")
    with pytest.raises(UnsafeDirectory):
        own_dir(target)


def test_a_directory_under_one_another_user_owns_is_refused(tmp_path):
    parent = others(tmp_path / "theirs")
    parent.chmod(0o755)
    with pytest.raises(UnsafeDirectory, match="parent"):
        own_dir(parent / "snap")
    assert not (parent / "snap").exists()


def test_a_sticky_world_writable_parent_is_fine(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    assert own_dir(shared / "mine").is_dir()


def test_a_file_is_never_written_through_a_link(tmp_path):
    d = own_dir(tmp_path / "d")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (d / "squeue.json").symlink_to(victim)
    with pytest.raises(OSError):
        write_file(d / "squeue.json", "overwritten")
    assert victim.read_text() == "keep"


def config(tmp_path: Path) -> Path:
    cfg = tmp_path / "synergy.toml"
    cfg.write_text('[slurm]\nconf = "/nonexistent/slurm.conf"\n')
    return cfg


def test_controller_snapshot_refuses_a_directory_another_user_made(tmp_path):
    """Before: it read Slurm and wrote into the user's directory (here it reached Slurm,
    absent, and failed with exit 1); now it refuses before reading anything."""
    snap = others(tmp_path / "snap")
    res = CliRunner().invoke(main, ["controller", "snapshot", "--config",
                                    str(config(tmp_path)), str(snap)])
    assert res.exit_code == 2 and "belongs to uid" in res.output, res.output


def test_whatif_report_refuses_a_link_planted_where_it_writes(tmp_path):
    history = tmp_path / "h.json"
    history.write_text("{}")
    (tmp_path / "target").mkdir()
    (tmp_path / "report").symlink_to(tmp_path / "target")
    res = CliRunner().invoke(main, ["whatif", "--config", str(config(tmp_path)), "--from",
                                    str(history), "--servers", "4", "--report",
                                    str(tmp_path / "report")])
    assert res.exit_code == 2 and "symbolic link" in res.output, res.output
    assert list((tmp_path / "target").iterdir()) == []


def test_the_dev_cluster_refuses_a_state_directory_another_user_made(tmp_path):
    from synergy_slurm.devcluster import cluster, local_spec

    spec = local_spec(others(tmp_path / "dc"))
    with pytest.raises(UnsafeDirectory):
        cluster._fresh_state_dir(spec, None)      # type: ignore[arg-type]
    assert list(spec.state_dir.iterdir()) == []


def wait_cmdline(pid: int, needle: bytes) -> None:
    """Until the child has exec'd its program (before, /proc shows the parent's)."""
    deadline = time.monotonic() + 10
    while needle not in Path(f"/proc/{pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, f"{pid} never showed {needle!r}"
        time.sleep(0.02)


def test_the_dev_clusters_pid_check_never_takes_a_process_it_did_not_start(tmp_path):
    """A pid file in the cluster's run directory naming a slurmctld that is not this
    cluster's (here a stand-in with that name) must not make it a target: before, the
    daemon's name was enough."""
    from synergy_slurm.devcluster import cluster, local_spec

    spec = local_spec(tmp_path / "dc")
    (spec.state_dir / "run").mkdir(parents=True)
    proc = subprocess.Popen(["bash", "-c", "exec -a /usr/sbin/slurmctld sleep 60"])
    try:
        wait_cmdline(proc.pid, b"slurmctld")
        pid_file = cluster.pid_files(spec)["slurmctld"]
        pid_file.write_text(f"{proc.pid}\n")
        assert cluster._our_pid(pid_file, spec) is None
        assert cluster._stop_processes(spec) == [] and proc.poll() is None
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_dev_clusters_pid_check_takes_its_own_daemon(tmp_path):
    from synergy_slurm.devcluster import cluster, local_spec

    spec = local_spec(tmp_path / "dc")
    (spec.state_dir / "run").mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-f",
                             str(spec.conf_path)])
    try:
        wait_cmdline(proc.pid, str(spec.conf_path).encode())
        pid_file = cluster.pid_files(spec)["slurmctld"]
        pid_file.write_text(f"{proc.pid}\n")
        assert cluster._our_pid(pid_file, spec) == proc.pid
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
