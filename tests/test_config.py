"""The one TOML config: defaults, and clear errors that name the key."""

from __future__ import annotations

import pytest

from synergy_slurm.config import Config, ConfigError, config_from_dict, load_config


def test_defaults_and_values(tmp_path):
    path = tmp_path / "synergy.toml"
    path.write_text('[controller]\nmode = "enforce"\ninterval_s = 5\n'
                    '[hook]\npartitions = ["gpu", "a100"]\n')
    cfg = load_config(path)
    assert cfg.controller.mode == "enforce" and cfg.controller.interval_s == 5.0
    assert cfg.hook.partitions == ("gpu", "a100") and cfg.hook.hold_unknown is True
    assert cfg.controller.policy == "slurm" and cfg.controller.allocator == "tune"


@pytest.mark.parametrize("doc, match", [
    ({"controler": {}}, "unknown section \\[controler\\]"),
    ({"controller": {"intervall_s": 3}}, "unknown key 'intervall_s'"),
    ({"controller": {"interval_s": "fast"}}, "interval_s = 'fast' has the wrong type"),
    ({"controller": {"mode": "yolo"}}, "\\[controller\\] mode = 'yolo': must be one of"),
    ({"controller": {"mode": "advise"}}, "must be one of observe, enforce \\('advise' was observe"),
    ({"controller": {"policy": "bogus"}}, "policy = 'bogus': must be one of slurm, fifo"),
    ({"controller": {"allocator": "nope"}}, "allocator = 'nope': must be one of"),
    ({"controller": {"metrics_port": 99999}}, "metrics_port = 99999: must be <= 65535"),
    ({"controller": {"requeue_budget": -1}}, "requeue_budget = -1: must be >= 0"),
    ({"profiling": {"budget_s": -5}}, "budget_s = -5.0: must be >= 10"),
    ({"hook": {"partitions": ["gpu", "a b"]}}, "bad partition name 'a b'"),
    ({"hook": {"hold_known": "yes"}}, "hold_known = 'yes' has the wrong type"),
    ({"hook": {"partitions": "gpu"}}, "partitions = 'gpu' has the wrong type"),
])
def test_bad_config_names_the_key(doc, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict(doc)


def test_missing_explicit_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    (tmp_path / "bad.toml").write_text("[controller\n")
    with pytest.raises(ConfigError):
        load_config(tmp_path / "bad.toml")


def test_the_documented_example_is_every_key_at_its_default():
    """docs/synergy.toml.example and the admin guide's table list every key, with the
    default the code uses: the documentation cannot drift from the dataclasses."""
    import dataclasses
    import tomllib
    from pathlib import Path

    from synergy_slurm.config import SECTIONS, Config

    docs = Path(__file__).resolve().parents[1] / "docs"
    example = docs / "synergy.toml.example"
    doc = tomllib.loads(example.read_text())
    guide = (docs / "admin-guide.md").read_text()
    assert set(doc) == set(SECTIONS)
    for name, cls in SECTIONS.items():
        keys = {f.name for f in dataclasses.fields(cls)}
        assert set(doc[name]) == keys, name
        defaults = cls()
        for key in keys:
            # Key by key, so a drifted default names itself (a TOML array is the tuple).
            value = doc[name][key]
            shown = tuple(value) if isinstance(value, list) else value
            assert shown == getattr(defaults, key), f"[{name}] {key}: example {value!r}"
            assert f"| `{key}` |" in guide, f"[{name}] {key} missing from admin-guide.md"
    assert load_config(example, missing_ok=False) == dataclasses.replace(
        Config(), path=str(example))


def test_config_check_lists_every_problem_or_prints_the_effective_config(tmp_path):
    from click.testing import CliRunner

    from synergy_slurm.cli.main import main

    bad = tmp_path / "bad.toml"
    bad.write_text('[controller]\npolicy = "bogus"\nallocator = "nope"\n'
                   '[hook]\nmax_age_s = -1\ncolour = "red"\n')
    res = CliRunner().invoke(main, ["config", "check", "--config", str(bad)])
    assert res.exit_code == 2
    errors = res.stderr.splitlines()
    assert len(errors) == 4 and all(e.startswith(f"Error: {bad}: [") for e in errors)
    good = tmp_path / "good.toml"
    good.write_text('[controller]\nmode = "enforce"\n')
    res = CliRunner().invoke(main, ["config", "check", "--config", str(good)])
    assert res.exit_code == 0 and res.stderr == ""
    assert 'mode = "enforce"' in res.stdout and 'allocator = "tune"' in res.stdout
    # What it prints is a config that loads to the same values.
    again = tmp_path / "again.toml"
    again.write_text(res.stdout)
    assert load_config(again) == load_config(good).__class__(
        **{**load_config(good).__dict__, "path": str(again)})


def test_config_check_catches_what_an_admin_gets_wrong(tmp_path):
    """Each problem once, in words an admin reads: a TOML array for a list, a default
    partition the hook does not manage, a relative hook directory, a timeout no command
    meets, and files the config names that this machine lacks."""
    from click.testing import CliRunner

    from synergy_slurm.cli.main import main

    bad = tmp_path / "bad.toml"
    bad.write_text('[hook]\npartitions = "gpu"\ndefault_partition = "other"\ndir = "etc"\n'
                   '[slurm]\ntimeout_s = 0.0001\n')
    res = CliRunner().invoke(main, ["config", "check", "--config", str(bad)])
    lines = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert res.exit_code == 2 and len(lines) == len(set(lines)) == 4
    text = "\n".join(lines)
    assert "expected a list of strings" in text and "expected tuple" not in text
    assert "must be the absolute directory" in text and "timeout_s = 0.0001: must be >= 1" in text
    bad.write_text('[hook]\npartitions = ["gpu"]\ndefault_partition = "other"\n')
    res = CliRunner().invoke(main, ["config", "check", "--config", str(bad)])
    assert "default_partition = 'other': not one of partitions (gpu)" in res.output
    missing = tmp_path / "missing.toml"
    missing.write_text(f'[hook]\ndir = "{tmp_path}"\nstate_dir = "{tmp_path}"\n'
                       f'[profiles]\nfile = "{tmp_path}/p.json"\n'
                       f'[slurm]\nbindir = "{tmp_path}"\n')
    res = CliRunner().invoke(main, ["config", "check", "--config", str(missing)])
    assert res.exit_code == 2
    assert "[profiles] file" in res.output and "no such file" in res.output
    assert "[slurm] bindir" in res.output and "has no scontrol" in res.output


def test_only_site_wide_and_own_profiles_shape_a_users_jobs_by_default():
    """Issue 43, item 2: under the old default trust = "all", one user's profiling job
    (numbers the user writes) shaped every user's jobs of the key."""
    assert Config().profiles.trust == "own"
