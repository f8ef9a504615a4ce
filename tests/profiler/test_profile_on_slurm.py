"""`synergy profile run --submit` on the real test cluster with an emulated job."""

from __future__ import annotations

import sys
import time

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.profiles.store import ProfileStore

from ..slurm.helpers import cancel_all

pytestmark = pytest.mark.slurm
SCALE = 0.1   # res18: the fastest step (2.4x) takes 27 ms


@pytest.mark.timing
def test_submitted_profile_lands_in_the_store(slurm_cluster, slurm_cli, tmp_path,
                                              profiles_path, paper_profiles, monkeypatch):
    cancel_all(slurm_cli)
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf_path))
    monkeypatch.chdir(tmp_path)        # sbatch writes slurm-JOBID.out where it is run
    db = tmp_path / "profiles.db"
    cmd = [sys.executable, "-m", "synergy_slurm.emulate", "--profiles",
           str(profiles_path), "--model", "res18",
           "--iterations", "100000", "--scale", str(SCALE)]
    res = CliRunner().invoke(main, ["profile", "run", "--submit", "--store", str(db),
                                    "--key", "emu-res18", "--max-cpus", "24", "--steps", "20",
                                    "--warmup", "3", "--budget-s", "120", "--", *cmd])
    assert res.exit_code == 0, res.output
    job_id = int(res.output.split()[-1])
    fields = slurm_cli.run("scontrol", ["show", "job", "-o", str(job_id)])
    assert "Nice=10000" in fields and "synergy:off" in fields
    deadline = time.time() + 120
    while time.time() < deadline and ProfileStore(db).get("emu-res18") is None:
        time.sleep(0.5)
    stored = ProfileStore(db).get("emu-res18")
    assert stored is not None, slurm_cli.run("scontrol", ["show", "job", str(job_id)])
    assert 2 <= stored.measured_points <= 8 and stored.profiling_cpu_s >= 0
    prof = paper_profiles["res18"]
    errors = {}
    for c, row in zip(stored.profile.cpu_grid, stored.profile.throughput, strict=True):
        true = prof.at(c, prof.mem_grid[-1]) / (prof.iter_time_s * SCALE)
        errors[int(c)] = row[0] / true - 1
    # A busy machine makes every sleep-based step wake late: all points read low together
    # (-5.4% seen beside another test run). The curve's shape, which decides the ideal,
    # must be right within 5%; each point within 10%.
    assert max(errors.values()) - min(errors.values()) <= 0.05, errors
    assert all(abs(e) <= 0.10 for e in errors.values()), errors
    print(f"\nprofile of emulated res18 on Slurm (job {job_id}): {stored.measured_points} "
          f"points, {stored.profiling_cpu_s:.2f} CPU-s; error vs true curve by cores/GPU: "
          + ", ".join(f"{c}: {e:+.1%}" for c, e in sorted(errors.items())))
    # res18 saturates at 9 cores/GPU. The ideal is the cheapest point within 3% of the best
    # measured (profiles/build.py): one point read 3% low on a loaded machine (the test
    # passes run side by side) moves it to the next point of the grid, never below 9.
    assert stored.profile.ideal.cpus in (9, 12), errors
