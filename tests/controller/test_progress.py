"""Jobs' progress in production: where profiler.progress writes it, how the controller
reads it (as untrusted input), and when a measured profile is stale."""

from __future__ import annotations

import os

import pytest

from profiler.progress import ENV_DIR, ENV_FILE, Progress, progress_path
from synergy_slurm.cli.sbatch_cmd import progress_env
from synergy_slurm.controller.usage import PROGRESS_TAIL_BYTES, read_progress, stale_slots
from synergy_slurm.core.usage import UsageRule

ME = os.getuid()

def write(path, lines):
    path.write_text("".join(f"{t} {n}\n" for t, n in lines))


def test_the_recent_throughput_of_the_latest_run(tmp_path):
    write(tmp_path / "7.progress", [(100 + i, 50) for i in range(10)])
    assert read_progress(str(tmp_path), 7, ME) == pytest.approx(50.0)
    # A restart (a new process's clock starts lower): only the new run counts.
    write(tmp_path / "8.progress", [(1000 + i, 50) for i in range(10)] +
          [(5 + 2 * i, 50) for i in range(6)])
    assert read_progress(str(tmp_path), 8, ME) == pytest.approx(25.0)
    # Only the last two minutes.
    write(tmp_path / "9.progress", [(i, 10) for i in range(100)] +
          [(100 + i, 100) for i in range(200)])
    assert read_progress(str(tmp_path), 9, ME) == pytest.approx(100.0)


def test_bad_or_thin_progress_reads_as_none(tmp_path):
    assert read_progress(str(tmp_path), 1, ME) is None                      # no file
    write(tmp_path / "2.progress", [(1, 5), (2, 5)])
    assert read_progress(str(tmp_path), 2, ME) is None                      # too few steps
    (tmp_path / "3.progress").write_text("garbage\n1 x\nnan 4\n" +
                                         "".join(f"{i} 10\n" for i in range(8)))
    assert read_progress(str(tmp_path), 3, ME) == pytest.approx(10.0)       # garbage skipped
    secret = tmp_path / "secret"
    write(secret, [(i, 1) for i in range(10)])
    os.symlink(secret, tmp_path / "4.progress")
    assert read_progress(str(tmp_path), 4, ME) is None                      # no symlinks
    big = tmp_path / "5.progress"
    write(big, [(i * 0.01, 1) for i in range(PROGRESS_TAIL_BYTES)])
    assert read_progress(str(tmp_path), 5, ME) == pytest.approx(100.0, rel=0.01)


def test_only_the_jobs_own_regular_file_counts(tmp_path):
    """The directory is everyone's (1777) and job ids are predictable: user B's file
    named after A's job is not A's progress (B could mark A's profile stale); a FIFO,
    a device or a link is not read, and reading one does not block."""
    import time

    write(tmp_path / "11.progress", [(100 + i, 50) for i in range(10)])
    assert read_progress(str(tmp_path), 11, ME) == pytest.approx(50.0)
    assert read_progress(str(tmp_path), 11, ME + 1) is None        # someone else's file
    os.mkfifo(tmp_path / "12.progress")
    os.symlink("/dev/zero", tmp_path / "13.progress")
    t0 = time.monotonic()
    assert read_progress(str(tmp_path), 12, ME) is None
    assert read_progress(str(tmp_path), 13, ME) is None
    assert time.monotonic() - t0 < 1.0


def test_a_measured_profile_far_off_progress_is_stale():
    rule = UsageRule(min_observed_s=60)
    rows = [{"job_id": 1, "throughput": 40.0, "predicted": 100.0, "observed_s": 600,
             "slot": "k@a100"},
            {"job_id": 2, "throughput": 90.0, "predicted": 100.0, "observed_s": 600,
             "slot": "near"},
            {"job_id": 3, "throughput": 1.0, "predicted": 100.0, "observed_s": 30,
             "slot": "young"},
            {"job_id": 4, "throughput": 1.0, "predicted": None, "observed_s": 600,
             "slot": "paper"}]
    found = stale_slots(rows, rule, off=2.0)
    assert list(found) == ["k@a100"] and "0.40x" in found["k@a100"]


def test_where_progress_goes(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_FILE, raising=False)
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert progress_path() == str(tmp_path / "42.progress")
    with Progress(batch_size=8) as p:
        p.step()
    assert (tmp_path / "42.progress").read_text().split()[1] == "8"
    monkeypatch.setenv(ENV_FILE, str(tmp_path / "profiling"))    # the profiler's wins
    assert progress_path() == str(tmp_path / "profiling")
    monkeypatch.delenv(ENV_FILE)
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "missing"))
    assert progress_path() is None
    monkeypatch.setenv(ENV_DIR, "/proc/1")                        # not writable: no crash
    with Progress() as p:
        p.step()


def test_synergy_sbatch_exports_the_progress_directory(tmp_path):
    cfg = tmp_path / "synergy.toml"
    cfg.write_text('[usage]\nprogress_dir = "/var/spool/synergy/progress"\n')
    assert progress_env(str(cfg))["SYNERGY_PROGRESS_DIR"] == "/var/spool/synergy/progress"
    cfg.write_text("[usage]\n")
    assert "SYNERGY_PROGRESS_DIR" not in progress_env(str(cfg))
    cfg.write_text("[usage]\nprogress_dir = 3\n")                 # broken: submit anyway
    assert "SYNERGY_PROGRESS_DIR" not in progress_env(str(cfg))
