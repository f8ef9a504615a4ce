"""Profiles users can see (issue 45, item 2): ``synergy profile list/show`` print the
profiles the hook and the controller resolve (``profiles.resolve.configured``) with each
one's source: the store, the site's file, or the paper's profiles shipped with synergy.

Before: with ``[profiles] file`` set and no store, ``profile list`` said "no profile store
... yet" and ``profile show res18`` failed, while ``hook export`` and ``synergy-sbatch
--explain --profile-key res18`` shaped jobs by those very profiles. ``--explain`` on an
unknown key said "held" without saying for how long or how to profile it, and
``--profile-key res18 --comment=synergy:profile=gnmt`` silently used gnmt."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.cli.sbatch_cmd import main as sbatch_main
from synergy_slurm.hook.table import parse_table
from synergy_slurm.shipped import SHIPPED_PROFILES


def site(tmp_path: Path, profiles: Path | str, trust: str = "own") -> Path:
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f"""
[hook]
dir = "{tmp_path}"
state_dir = "{tmp_path}"
[profiles]
file = "{profiles}"
store = "{tmp_path}/store/profiles.db"
trust = "{trust}"
""")
    return cfg


def listed(cfg: Path) -> dict[str, dict]:
    res = CliRunner().invoke(main, ["profile", "list", "--config", str(cfg), "--format",
                                    "json"])
    assert res.exit_code == 0, res.output
    return {p["key"]: p for p in json.loads(res.output)}


def test_a_profiles_file_without_a_store_is_listed_and_shown(tmp_path, profiles_path,
                                                           paper_profiles):
    cfg = site(tmp_path, profiles_path)
    seen = listed(cfg)
    assert sorted(seen) == sorted(paper_profiles)
    assert {p["source"] for p in seen.values()} == {"file"}
    res = CliRunner().invoke(main, ["profile", "show", "--config", str(cfg), "res18"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"res18: from the file ({profiles_path}); shapes everyone")
    assert "ideal 9 cores/GPU" in res.output
    res = CliRunner().invoke(main, ["profile", "list", "--config", str(cfg)])
    assert "res18" in res.output and "file" in res.output


def test_the_list_is_what_the_hooks_table_holds(tmp_path, profiles_path):
    cfg = site(tmp_path, profiles_path)
    res = CliRunner().invoke(main, ["hook", "export", "--config", str(cfg), "--node-cpus",
                                    "24", "--node-mem-mb", "500000", "--node-gpus", "8",
                                    "--out", str(tmp_path / "t.table")])
    assert res.exit_code == 0, res.output
    table = parse_table((tmp_path / "t.table").read_text())
    everyone = {k for k, p in listed(cfg).items() if p["shapes"].startswith("everyone")
                and p["ideal"]}
    assert everyone == set(table.profiles)


def test_a_stored_profile_wins_and_says_so(tmp_path, profiles_path, paper_profiles):
    cfg = site(tmp_path, profiles_path)
    (tmp_path / "store").mkdir()
    one = json.loads(profiles_path.read_text())
    one["models"] = {"res18": one["models"]["res18"]}
    (tmp_path / "one.json").write_text(json.dumps(one))
    res = CliRunner().invoke(main, ["profile", "import", "--config", str(cfg),
                                    str(tmp_path / "one.json")])
    assert res.exit_code == 0, res.output
    seen = listed(cfg)
    assert seen["res18"]["source"] == "store" and seen["alexnet"]["source"] == "file"
    shown = CliRunner().invoke(main, ["profile", "show", "--config", str(cfg), "res18",
                                      "--format", "json"])
    assert json.loads(shown.output)["resolved_from"] == "store"


def test_the_shipped_profiles_are_named_as_such(tmp_path):
    seen = listed(site(tmp_path, SHIPPED_PROFILES))
    assert seen and {p["source"] for p in seen.values()} == {"shipped"}


def test_an_unreadable_profiles_file_is_an_error_not_an_empty_list(tmp_path):
    res = CliRunner().invoke(main, ["profile", "list", "--config",
                                    str(site(tmp_path, tmp_path / "missing.json"))])
    assert res.exit_code == 2 and "missing.json" in res.output


def explain(tmp_path: Path, profiles: Path, *args: str):
    cfg = site(tmp_path, profiles)
    CliRunner().invoke(main, ["hook", "export", "--config", str(cfg), "--node-cpus", "24",
                              "--node-mem-mb", "500000", "--node-gpus", "8"])
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\n#SBATCH --gpus=1\necho hi\n")
    return CliRunner().invoke(sbatch_main, ["--config", str(cfg), "--explain", *args,
                                            str(script)], prog_name="synergy-sbatch")


def test_explain_says_how_long_an_unknown_key_is_held_and_how_to_profile_it(
        tmp_path, profiles_path):
    res = explain(tmp_path, profiles_path, "--profile-key", "mystery")
    assert res.exit_code == 0, res.output
    assert "held until the controller shapes and releases it: at its next round (every " \
           "30 s)" in res.output
    assert "the fail-safe releases it once its table is 120 s old" in res.output
    assert "synergy profile run --key mystery" in res.output


def test_a_profile_key_and_a_different_one_in_the_comment_are_refused(tmp_path,
                                                                     profiles_path):
    res = explain(tmp_path, profiles_path, "--profile-key", "res18",
                  "--comment=synergy:profile=gnmt")
    assert res.exit_code == 2
    assert "--profile-key res18 conflicts with synergy:profile=gnmt" in res.output
    same = explain(tmp_path, profiles_path, "--profile-key", "res18",
                   "--comment=mine synergy:profile=res18")
    assert same.exit_code == 0 and "profile res18" in same.output
