"""The one TOML config: defaults, and clear errors that name the key."""

from __future__ import annotations

import pytest

from synergy_slurm.config import ConfigError, config_from_dict, load_config


def test_defaults_and_values(tmp_path):
    path = tmp_path / "synergy.toml"
    path.write_text('[controller]\nmode = "enforce"\ninterval_s = 5\n'
                    '[hook]\npartitions = ["gpu", "a100"]\n')
    cfg = load_config(path)
    assert cfg.controller.mode == "enforce" and cfg.controller.interval_s == 5.0
    assert cfg.hook.partitions == ("gpu", "a100") and cfg.hook.hold_unknown is True
    assert cfg.controller.policy == "fifo" and cfg.controller.allocator == "tune"


@pytest.mark.parametrize("doc, match", [
    ({"controler": {}}, "unknown section \\[controler\\]"),
    ({"controller": {"intervall_s": 3}}, "unknown key 'intervall_s'"),
    ({"controller": {"interval_s": "fast"}}, "interval_s = 'fast' has the wrong type"),
    ({"controller": {"mode": "yolo"}}, "mode must be one of"),
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
    assert load_config(example, missing_ok=False) == dataclasses.replace(
        Config(), path=str(example))
    guide = (docs / "admin-guide.md").read_text()
    for name, cls in SECTIONS.items():
        keys = {f.name for f in dataclasses.fields(cls)}
        assert set(doc[name]) == keys, name
        for key in keys:
            assert f"| `{key}` |" in guide, f"[{name}] {key} missing from admin-guide.md"
