"""synergy hook install never overwrites a file synergy did not write: it installs its
module, writes job_submit.lua only where the site has none (or one synergy wrote), tells a
site with its own the line that joins them, and replaces the site's only with --force,
after a backup and a diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.shipped import HOOK_LUA, HOOK_MODULE, shipped_file

SITE = (Path(__file__).parent / "site_job_submit.lua").read_text().replace(
    'dofile("@SYNERGY_DIR@/synergy.lua").chain()\n', "")


def install(conf: Path, *extra: str):
    cfg = conf.parent / f"{conf.name}-synergy.toml"
    cfg.write_text(f'[hook]\ndir = "{conf}"\nstate_dir = "{conf.parent / "state"}"\n')
    return CliRunner().invoke(main, ["hook", "install", "--config", str(cfg), *extra])


def chained(conf: Path) -> str:
    return f'dofile("{conf}/synergy.lua").chain("{conf.parent / "state"}")'


def test_a_fresh_directory_gets_both_files_and_a_second_run_changes_nothing(tmp_path):
    res = install(tmp_path)
    assert res.exit_code == 0 and "nothing written" in res.output
    assert not list(tmp_path.iterdir())
    res = install(tmp_path, "--write")
    assert res.exit_code == 0 and "installed" in res.output
    script = (tmp_path / "job_submit.lua").read_text()
    assert script == shipped_file(HOOK_LUA).read_text().replace(
        ".chain()", f'.chain("{tmp_path.parent / "state"}")')
    assert (tmp_path / "synergy.lua").read_text() == shipped_file(HOOK_MODULE).read_text()
    assert (tmp_path.parent / "state").is_dir()        # made for the controller's table
    res = install(tmp_path, "--write")
    assert "nothing to change" in res.output


def test_a_sites_own_hook_is_kept_and_told_the_line_that_joins_it(tmp_path):
    (tmp_path / "job_submit.lua").write_text(SITE)
    res = install(tmp_path, "--write")
    assert res.exit_code == 0
    assert (tmp_path / "job_submit.lua").read_text() == SITE         # not touched
    assert chained(tmp_path) in res.output
    assert (tmp_path / "synergy.lua").exists()
    joined = SITE.replace("return slurm.SUCCESS\n",
                          f'{chained(tmp_path)}\nreturn slurm.SUCCESS\n')
    (tmp_path / "job_submit.lua").write_text(joined)
    assert "already joined" in install(tmp_path, "--write").output
    # Joined before the state directory moved (the table beside the module): told the line.
    (tmp_path / "job_submit.lua").write_text(SITE.replace(
        "return slurm.SUCCESS\n", f'dofile("{tmp_path}/synergy.lua").chain()\n'
        'return slurm.SUCCESS\n'))
    res = install(tmp_path, "--write")
    assert "another state directory" in res.output and chained(tmp_path) in res.output


def test_force_replaces_the_sites_hook_after_a_backup_and_a_diff(tmp_path):
    (tmp_path / "job_submit.lua").write_text(SITE)
    res = install(tmp_path, "--write", "--force")
    assert res.exit_code == 0 and "-    if job_desc.account == \"bad\" then" in res.output
    (backup,) = tmp_path.glob("job_submit.lua.bak-*")
    assert backup.read_text() == SITE
    assert (tmp_path / "job_submit.lua").read_text().startswith("-- synergy-slurm:")
    assert f'.chain("{tmp_path.parent / "state"}")' in (tmp_path / "job_submit.lua").read_text()


def test_a_foreign_synergy_lua_is_refused_without_force(tmp_path):
    (tmp_path / "synergy.lua").write_text("-- someone else's module\nreturn {}\n")
    res = install(tmp_path, "--write")
    assert res.exit_code == 1 and "not synergy's; nothing written" in res.output
    assert not (tmp_path / "job_submit.lua").exists()
    assert (tmp_path / "synergy.lua").read_text().startswith("-- someone else's")
    res = install(tmp_path, "--write", "--force")
    assert res.exit_code == 0 and list(tmp_path.glob("synergy.lua.bak-*"))


def test_an_earlier_synergy_file_is_updated(tmp_path):
    install(tmp_path, "--write")
    old = (tmp_path / "synergy.lua").read_text().replace("local REFRESH_S = 5",
                                                         "local REFRESH_S = 9")
    (tmp_path / "synergy.lua").write_text(old)
    res = install(tmp_path, "--write")
    assert "an earlier synergy.lua: updated" in res.output
    assert (tmp_path / "synergy.lua").read_text() == shipped_file(HOOK_MODULE).read_text()
    assert not list(tmp_path.glob("*.bak-*"))


@pytest.mark.parametrize("state", ["state", '/var/lib/x")\nos.execute("id")--', "/a b",
                                   "/var/lib/synergy\n"])
def test_a_state_dir_that_cannot_go_into_lua_is_refused_before_anything_is_written(
        tmp_path, state):
    res = install(tmp_path, "--write", "--state-dir", state)
    assert res.exit_code == 2 and "must be an absolute path of letters" in res.output
    assert "Traceback" not in res.output and not list(tmp_path.iterdir())


def test_export_writes_the_table_into_the_state_dir_and_makes_it(tmp_path):
    """The table is runtime state: in [hook] state_dir (made when missing, readable by
    slurmctld's user), never in slurm.conf's directory."""
    from synergy_slurm.shipped import SHIPPED_PROFILES
    state = tmp_path / "var" / "synergy"
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[hook]\ndir = "{tmp_path}"\nstate_dir = "{state}"\n')
    res = CliRunner().invoke(main, ["hook", "export", "--config", str(cfg), "--profiles",
                                    str(SHIPPED_PROFILES), "--node-cpus", "24",
                                    "--node-mem-mb", "500000", "--node-gpus", "8"])
    assert res.exit_code == 0, res.output
    assert (state / "synergy-hook.table").is_file() and state.stat().st_mode & 0o777 == 0o755
    assert not (tmp_path / "synergy-hook.table").exists()
