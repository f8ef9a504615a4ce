"""synergy demo on a real cluster: one short run of the whole demo, and the refusals it
makes there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from synergy_slurm.demo import KINDS
from synergy_slurm.slurm.release import Release

from ..conftest import TEST_SLURM, slot_port

pytestmark = pytest.mark.slurm


def _demo(demo_dir: Path, profiles_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SLURM_CONF", None)
    return subprocess.run(
        [sys.executable, "-m", "synergy_slurm.cli.main", "demo", "--dir", str(demo_dir),
         "--port", str(slot_port(16617)), "--profiles", str(profiles_path),
         "--slurm", TEST_SLURM, *extra],
        capture_output=True, text=True, env=env, timeout=600, check=False)


def test_a_directory_slurm_cannot_reach_is_refused_clearly(slurm_cluster, tmp_path,
                                                           profiles_path):
    # pytest's tmp_path lies under a 0700 directory: munged could not open its log there.
    res = _demo(tmp_path / "demo", profiles_path, "--jobs", "4")
    assert res.returncode == 1
    assert "not searchable by other users" in res.stderr and "Traceback" not in res.stderr


def test_the_demo_runs_both_phases_and_speeds_up_cpu_hungry_jobs(slurm_cluster, slurm_release,
                                                                 profiles_path):
    """The README's main command, shortened: its own cluster beside the test cluster."""
    demo_dir = Path(tempfile.mkdtemp(prefix="synergy-demo-test-", dir="/tmp"))
    demo_dir.chmod(0o755)
    try:
        res = _demo(demo_dir, profiles_path, "--jobs", "10", "--mean-s", "20", "--seed",
                    "2", "--format", "json")
        _check_demo(res, demo_dir, Release(*slurm_release).lowers_pending)
    finally:
        shutil.rmtree(demo_dir, ignore_errors=True)


def _check_demo(res: subprocess.CompletedProcess, demo_dir: Path, lowers: bool) -> None:
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=1))
    jct = out["mean_jct_s"]
    assert set(jct) == {*KINDS, "all"}
    assert out["proportional_makespan_s"] > 0 and out["synergy_makespan_s"] > 0
    # The prediction sits beside what happened; a gross miss would mean the model and the
    # demo no longer describe the same run.
    assert set(out["predicted"]) == {"proportional", "synergy"}
    assert Path(out["timelines_png"]).stat().st_size > 10_000
    for phase, gap in out["prediction_gap"].items():
        assert abs(gap["makespan"]) < 0.5, (phase, gap)
    # The CPU-hungry jobs get 3-4x their share and finish clearly sooner.
    assert jct["cpu-hungry"]["synergy"] < 0.85 * jct["cpu-hungry"]["proportional"]
    # The controller's actions are audited, and the audit log outlives the cluster. Where
    # Slurm honours lowering a scheduled job (26.05) the hook shapes known profiles at
    # submission without a hold, and the controller may have had nothing to change.
    audit = Path(out["audit_log"])
    if audit.exists() or not lowers:
        actions = [json.loads(line) for line in audit.read_text().splitlines()]
        done = [a for a in actions if a["result"] == "done"]
        # 26.05 also lowers a running job's memory in place where its profile needs less
        # (docs/controller.md), as it did for the 40/20/40 multi-GPU mix of seed 2.
        assert {a["action"] for a in done} <= {"release", "shape-release", "raise", "lower",
                                               "requeue",
                                               *(("shrink-memory",) if lowers else ())}
        assert lowers or any(a["after"]["cpus_per_gpu"] > 3 for a in done), Counter(
            (a["action"], a["result"], a["after"]["cpus_per_gpu"]) for a in actions)
    assert not (demo_dir / "cluster").exists()
    assert (demo_dir / "synergy.toml").read_text().count("mode = \"enforce\"") == 1


def test_the_demo_on_the_mixed_cluster_with_accounting_compares_each_partition(
        slurm_cluster, profiles_path):
    """`synergy demo --cluster mixed --accounting`: A100 and H100 partitions and one over
    both, slurmdbd and fair-share; every job runs in its partition in both phases, and the
    comparison is printed per partition."""
    demo_dir = Path(tempfile.mkdtemp(prefix="synergy-demo-mixed-", dir="/tmp"))
    demo_dir.chmod(0o755)
    try:
        res = _demo(demo_dir, profiles_path, "--jobs", "6", "--mean-s", "10", "--seed", "2",
                    "--cluster", "mixed", "--accounting")
        assert res.returncode == 0, res.stderr[-3000:]
        lines = [ln for ln in res.stdout.splitlines() if ln.strip().startswith("partition ")]
        assert [ln.split()[1] for ln in lines] == ["a100", "h100", "all"], res.stdout
        assert all(" 2 jobs: makespan " in ln for ln in lines), lines
        outs = demo_dir / "jobs" / "synergy"
        assert len(list(outs.glob("job*.out"))) == 6
    finally:
        shutil.rmtree(demo_dir, ignore_errors=True)
