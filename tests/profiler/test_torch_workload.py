"""The profiler on a real CPU workload: the PyTorch JPEG pipeline of sbatch_templates/.

Synthetic JPEGs (Pillow), decode + augment in data-loader workers, a small CNN step. The
machine has 2 cores, so whole-core allotments drown in noise; CFS quotas make clean ones:
8 "cores" of 1/8 of a physical core each, so the search spans 1/8 .. 1 core. Runs in CI
(~20-40 s); skipped only where torch or a writable cgroup is missing.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from profiler.cpulimit import QuotaUnavailable, quota_group
from synergy_slurm.cli.main import main
from synergy_slurm.profiles.store import ProfileStore

torch = pytest.importorskip("torch", reason="install the torch extra: pip install -e .[torch]")
TRAIN = Path(__file__).resolve().parents[2] / "sbatch_templates" / "train_pytorch.py"


@pytest.fixture(scope="module")
def jpeg_dir(tmp_path_factory) -> Path:
    sys.path.insert(0, str(TRAIN.parent))
    try:
        from train_pytorch import make_synthetic
    finally:
        sys.path.remove(str(TRAIN.parent))
    root = tmp_path_factory.mktemp("jpegs")
    make_synthetic(root, 192)
    return root


def _need_quota() -> None:
    try:
        with quota_group(0.5):
            pass
    except QuotaUnavailable as exc:
        pytest.skip(f"no CPU quota here: {exc}")


@pytest.mark.timing
def test_profile_of_a_pytorch_pipeline_is_monotone_and_stored(jpeg_dir, tmp_path):
    _need_quota()
    db = tmp_path / "profiles.db"
    cmd = [sys.executable, str(TRAIN), "--data", str(jpeg_dir), "--steps", "100000",
           "--batch-size", "16"]
    t0 = time.monotonic()
    res = CliRunner().invoke(main, [
        "profile", "run", "--store", str(db), "--key", "torch-jpeg", "--max-cpus", "8",
        "--core-fraction", "0.125", "--steps", "20", "--warmup", "8", "--budget-s", "110",
        "--format", "json", "--", *cmd])
    wall = time.monotonic() - t0
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    curve = {int(k): v for k, v in out["curve"].items()}
    print(f"\nPyTorch JPEG profile: {len(curve)} points in {wall:.1f} s wall, "
          f"{out['profiling_cpu_s']} CPU-s; samples/s by allotment (1/8 core units): "
          + ", ".join(f"{k}: {v:.0f}" for k, v in sorted(curve.items())))
    assert 2 <= len(curve) <= 8
    ks = sorted(curve)
    # Monotone where the quota step is bigger than the timing noise. Neighbouring 1/8-core
    # steps are not: on a busy CI machine 7/8 of a core measured 330 samples/s and the
    # whole core 290 (12% the wrong way). Allotments 1.5x apart differ by far more.
    for lo, hi in itertools.combinations(ks, 2):
        if hi >= 1.5 * lo:
            assert curve[hi] > curve[lo], f"not monotone: {curve}"
    # 1/8 of a core cannot run the pipeline as fast as a whole one: the quota bites.
    assert curve[max(ks)] > 1.5 * curve[min(ks)]
    stored = ProfileStore(db).get("torch-jpeg")
    assert stored is not None and stored.measured_points == len(curve)
    assert stored.profiling_cpu_s == pytest.approx(out["profiling_cpu_s"], abs=0.01)
    # CPU-bound all the way up: the ideal is at the top of the range. (Not always the
    # very top: the last 1/8-core step can come out within the 3% that counts as "as
    # fast" on a busy 2-core machine, e.g. 370 vs 377 samples/s.)
    assert stored.profile.ideal.cpus >= 6
    # Each sample is one JPEG read by a data-loader worker: the bytes the profiler saw
    # read per sample are the files' size (what --dataset-size turns into samples/epoch).
    mean_jpeg = sum(p.stat().st_size for p in jpeg_dir.glob("*.jpg")) / 192
    print(f"read per sample {out['read_bytes_per_sample']:.0f} B, mean JPEG {mean_jpeg:.0f} B")
    assert 0.9 * mean_jpeg <= out["read_bytes_per_sample"] <= 1.5 * mean_jpeg


def test_a_failing_workload_stores_nothing(tmp_path):
    db = tmp_path / "profiles.db"
    cmd = [sys.executable, str(TRAIN), "--data", str(tmp_path / "missing")]
    res = CliRunner().invoke(main, ["profile", "run", "--store", str(db), "--key", "bad",
                                    "--max-cpus", "2", "--budget-s", "60", "--", *cmd])
    assert res.exit_code != 0
    assert "not stored" in res.output and "no *.jpg files" in res.output
    assert ProfileStore(db).get("bad") is None
