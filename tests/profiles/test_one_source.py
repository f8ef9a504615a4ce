"""One profile source: the hook's table (synergy hook export), explain, the controller and
whatif read the same profiles ([profiles] file, then the store), and say which."""

from __future__ import annotations

import json

from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.core import profiles_to_doc
from synergy_slurm.hook.table import parse_table


def test_export_whatif_and_explain_use_the_store_the_controller_plans_with(
        tmp_path, paper_profiles):
    """The case an admin met: profiles imported into the store and no [profiles] file;
    export wrote the paper's 10 (from the package), and explain's hook and controller
    lines disagreed. Now every command reads the store and says so."""
    mine = {"bert": paper_profiles["gnmt"], "res18": paper_profiles["res18"]}
    src = tmp_path / "mine.json"
    src.write_text(json.dumps(profiles_to_doc(mine)))
    store = tmp_path / "profiles.db"
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[hook]\ndir = "{tmp_path}"\nstate_dir = "{tmp_path}"\n'
                   f'[profiles]\nstore = "{store}"\n')
    run = CliRunner().invoke
    assert run(main, ["profile", "import", "--store", str(store), str(src)]).exit_code == 0
    res = run(main, ["hook", "export", "--config", str(cfg), "--node-cpus", "24",
                     "--node-mem-mb", "500000", "--node-gpus", "8"])
    assert res.exit_code == 0 and "2 profiles" in res.output and str(store) in res.output
    table = parse_table((tmp_path / "synergy-hook.table").read_text())
    assert set(table.profiles) == {"bert", "res18"}
    res = run(main, ["hook", "explain", "--config", str(cfg), "--", "--gpus=2",
                     "--comment=synergy:profile=bert", "job.sh"])
    assert "controller: profile bert" in res.output and str(store) in res.output
    res = run(main, ["whatif", "--config", str(cfg), "--no-progress", "--format", "json",
                     "--from", str(__import__("pathlib").Path(__file__).parents[1] / "slurm"
                                   / "fixtures" / "sacct_22.05.8.json"), "--servers", "4"])
    doc = json.loads(res.output.strip().splitlines()[-1])
    assert str(store) in doc["model"]["profiles_from"]


def test_export_with_no_profiles_configured_refuses_to_fall_back_to_the_papers(tmp_path):
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[hook]\ndir = "{tmp_path}"\nstate_dir = "{tmp_path}"\n'
                   f'[profiles]\nstore = "{tmp_path}/none.db"\n')
    res = CliRunner().invoke(main, ["hook", "export", "--config", str(cfg), "--node-cpus",
                                    "24", "--node-mem-mb", "500000", "--node-gpus", "8"])
    assert res.exit_code == 2 and "no profiles to export" in res.output
    assert not (tmp_path / "synergy-hook.table").exists()
