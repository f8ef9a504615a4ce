"""A regular (not editable) install carries what admins and users need beside the code:
the Lua hook and the job templates (synergy_slurm/shipped.py finds them there)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_the_hook_and_the_templates(tmp_path):
    # pyproject.toml's [build-system] asks for setuptools>=68; a new venv of Python 3.11
    # carries 65, which refuses its metadata.
    pytest.importorskip("setuptools", minversion="68",
                        reason="building the wheel needs setuptools>=68 in this Python "
                        "(scripts/bootstrap-python.sh's venv has it; pip install -U "
                        "setuptools)")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", str(REPO), "-w", str(tmp_path)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("synergy_slurm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    data = {n.split("/data/", 1)[1] for n in names if ".data/data/" in n}
    shipped = {f"share/synergy-slurm/{_installed(p)}" for p in [
        REPO / "job_submit_hook" / "job_submit.lua", REPO / "job_submit_hook" / "synergy.lua",
        *(REPO / "sbatch_templates").glob("*.sbatch"),
        REPO / "sbatch_templates" / "train_pytorch.py",
        *(REPO / "docs" / "systemd").glob("*.service"),
        REPO / "docs" / "systemd" / "synergy.logrotate"]}
    assert shipped <= data, shipped - data
    # The guides and the example configuration (the admin guide copies the example; the
    # units' Documentation= names the admin guide under the venv of the guide's §2).
    docs = {"share/synergy-slurm/docs/admin-guide.md", "share/synergy-slurm/docs/user-guide.md",
            "share/synergy-slurm/docs/synergy.toml.example",
            "share/synergy-slurm/docs/prometheus/synergy.rules.yml"}
    assert docs <= data, docs - data
    for unit in (REPO / "docs" / "systemd").glob("*.service"):
        (doc,) = re.findall(r"^Documentation=file:///opt/synergy-slurm/(\S+)$",
                            unit.read_text(), re.M)
        assert doc in data, (unit.name, doc)
    assert "profiler/harness.py" in names and "synergy_slurm/cli/main.py" in names
    # The reference profiles are package data: simulate, plan and the demo need no checkout.
    assert "synergy_slurm/data/model_profiles.json" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    points = zipfile.ZipFile(wheel).read(entry).decode()
    assert "synergy = synergy_slurm.cli.main:main" in points
    assert "synergy-sbatch = synergy_slurm.cli.sbatch_cmd:main" in points


def test_the_shipped_profiles_are_the_reference_profiles(reference_dir):
    from synergy_slurm.shipped import SHIPPED_PROFILES

    assert SHIPPED_PROFILES.read_bytes() == (reference_dir / "model_profiles.json").read_bytes()


def _installed(path: Path) -> str:
    """Where a shipped file lands under share/synergy-slurm/ (docs/systemd/ -> systemd/)."""
    rel = path.relative_to(REPO)
    return str(rel.relative_to("docs")) if rel.parts[0] == "docs" else str(rel)
