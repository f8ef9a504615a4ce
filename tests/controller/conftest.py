"""The controller's real-cluster fixture: a config file with the test cluster's paths."""

from __future__ import annotations

import shutil

import pytest

from synergy_slurm.config import config_from_dict
from synergy_slurm.hook.table import TABLE_NAME

from ..conftest import slurm_section
from ..slurm.helpers import cancel_all


@pytest.fixture
def env(slurm_cluster, slurm_cli, tmp_path, profiles_path):
    cancel_all(slurm_cli)
    profiles = tmp_path / "profiles.json"
    shutil.copyfile(profiles_path, profiles)
    cfg_path = tmp_path / "synergy.toml"
    cfg_path.write_text(f"""
{slurm_section(slurm_cluster)}timeout_s = 15
[hook]
dir = "{slurm_cluster.etc}"
state_dir = "{slurm_cluster.etc}"
hold_unknown = true
hold_known = true
max_age_s = 60
[profiles]
file = "{profiles}"
store = "{tmp_path}/profiles.db"
[controller]
mode = "enforce"
interval_s = 0.5
state_db = "{tmp_path}/state.db"
audit_log = "{tmp_path}/audit.jsonl"
restart_cost_s = 10
requeue_min_interval_s = 0
[profiling]
auto = false
spool = "{tmp_path}/spool"
budget_s = 60
""")
    yield {"cfg_path": cfg_path, "cluster": slurm_cluster, "cli": slurm_cli, "tmp": tmp_path}
    (slurm_cluster.etc / TABLE_NAME).unlink(missing_ok=True)
    cancel_all(slurm_cli)


def load(env, **controller):
    import tomllib

    doc = tomllib.loads(env["cfg_path"].read_text())
    doc["controller"].update(controller)
    return config_from_dict(doc)
