"""The profiler on emulated jobs whose true curve is known, and on bad commands."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.profiles.store import ProfileStore

FASTEST_STEP_S = 0.025   # sleep-based steps: long enough that timer noise stays ~1%


def scale_for(prof) -> float:
    return FASTEST_STEP_S / (prof.iter_time_s / prof.best)


def emulated(reference_dir, model: str, scale: float, iterations: int = 100000) -> list[str]:
    return [sys.executable, "-m", "synergy_slurm.emulate", "--profiles",
            str(reference_dir / "model_profiles.json"), "--model", model,
            "--iterations", str(iterations), "--scale", str(scale)]


@pytest.mark.parametrize("model", ["alexnet", "res50", "gnmt"])
def test_search_recovers_the_true_curve(tmp_path, reference_dir, paper_profiles, model):
    db = tmp_path / "p.db"
    prof = paper_profiles[model]
    scale = scale_for(prof)
    res = CliRunner().invoke(main, [
        "profile", "run", "--store", str(db), "--key", f"emu-{model}", "--max-cpus", "24",
        "--steps", "20", "--warmup", "3", "--format", "json", "--",
        *emulated(reference_dir, model, scale)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert 2 <= out["measured_points"] <= 8
    assert out["profiling_cpu_s"] >= 0
    for cores, measured in out["curve"].items():
        true = prof.at(int(cores), prof.mem_grid[-1]) / (prof.iter_time_s * scale)
        assert measured == pytest.approx(true, rel=0.05), (cores, measured, true)
    stored = ProfileStore(db).get(f"emu-{model}")
    assert stored.measured_points == out["measured_points"]
    # The ideal lands where the true curve stops growing (within the search's 10% steps).
    true_ideal = prof.ideal.cpus
    assert abs(stored.profile.ideal.cpus - true_ideal) <= max(1, true_ideal // 2)


@pytest.mark.parametrize("script, message", [
    ("import sys; sys.exit(3)", "exited (3)"),
    ("import time; time.sleep(60)", "budget of 8 s spent after 0 steps"),
    ("from profiler.progress import Progress\nimport time\nwith Progress() as p:\n"
     "    [p.step() for _ in range(3)]\n    time.sleep(60)", "budget of 8 s spent after 3"),
    ("import os; open(os.environ['SYNERGY_PROGRESS_FILE'],'w').write('nonsense here\\n'*50)",
     "garbage progress"),
])
def test_bad_commands_end_within_budget_and_store_nothing(tmp_path, script, message):
    db = tmp_path / "p.db"
    res = CliRunner().invoke(main, [
        "profile", "run", "--store", str(db), "--key", "bad", "--max-cpus", "4",
        "--point-budget-s", "8", "--budget-s", "20", "--", sys.executable, "-c", script])
    assert res.exit_code != 0
    assert "not stored" in res.output and message in res.output
    assert ProfileStore(db).get("bad") is None
