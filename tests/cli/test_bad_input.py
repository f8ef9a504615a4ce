"""Every command and subcommand, given bad input: one line on stderr ("Error: ..."), no
traceback, exit 2 (bad input, as `synergy --help` documents), and nothing created.

The inputs tried are the table below; a test checks that it covers every command, so a new
command cannot be added without its bad inputs. Nothing here needs Slurm: each case fails
before a Slurm command would run.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from synergy_slurm.cli import sbatch_cmd
from synergy_slurm.cli.main import main
from synergy_slurm.shipped import SHIPPED_PROFILES

# (command path, arguments). {tmp}: an empty directory, the working directory of the run;
# {bad_toml}, {not_db}, {not_json}, {not_profiles}, {script}: files made there first.
CASES: list[tuple[str, list[str]]] = [
    ("plan", ["--gpu-sizes", "0"]),
    ("plan", ["--gpu-sizes", "x"]),
    ("plan", ["--cpus-per-server", "1"]),
    ("plan", ["--policy", "bogus"]),
    ("plan", ["--allocator", "nope"]),
    ("plan", ["--split", "1,2"]),
    ("plan", ["--profiles", "{tmp}/missing.json"]),
    ("plan", ["--profiles", "{not_json}"]),
    ("simulate", ["--trace", "{tmp}/missing.csv"]),
    ("simulate", ["--generate", "philly", "--out", "/proc/nope"]),
    ("simulate", ["--generate", "philly", "--record-trace", "/proc/x/y.csv"]),
    ("simulate", ["--generate", "philly", "--cpus-per-server", "2"]),
    ("simulate", ["--generate", "philly", "--window", "9,1"]),
    ("simulate", ["--trace", "{not_json}", "--servers", "4"]),
    ("whatif", ["--from", "{tmp}/missing.json", "--servers", "4"]),
    ("whatif", ["--from", "{not_json}", "--servers", "4"]),
    ("whatif", ["--from", "{not_json}", "--rule", "name:(=res50"]),
    ("whatif", ["--from", "{not_json}", "--rule", "owner:x=res50"]),
    ("whatif", ["--from", "{not_json}", "--assume-mix", "1,2"]),
    ("whatif", ["--from", "{not_json}", "--report", "/proc/x"]),
    ("whatif", ["--config", "{bad_toml}"]),
    ("dev-cluster up", ["--nodes", "0"]),
    ("dev-cluster up", ["--cluster", "{tmp}/missing.toml"]),
    ("dev-cluster config", ["--cluster", "{not_json}"]),
    ("simulate", ["--generate", "philly", "--cluster", "{not_json}"]),
    ("whatif", ["--from", "{not_json}", "--cluster", "nosuch"]),
    ("dev-cluster config", ["--dir", "/proc/x/cluster"]),
    ("dev-cluster status", ["--format", "yaml"]),
    ("dev-cluster down", ["--dir", "{not_profiles_dir}"]),
    ("dev-cluster venv", ["--slurm", "24.11", "--pyslurm", "{tmp}/missing.tar.gz"]),
    ("dev-cluster venv", ["--slurm", "system", "--pyslurm", "{script}"]),
    ("dev-cluster exec", ["--dir", "{not_profiles_dir}", "--", "python", "-V"]),
    ("hook explain", ["--config", "{bad_toml}", "--", "--gpus=1", "job.sh"]),
    ("hook explain", ["--", "--gpus=x", "job.sh"]),
    ("hook export", ["--config", "{bad_toml}"]),
    ("hook export", ["--out", "/proc/x/t", "--node-cpus", "1", "--node-mem-mb", "1",
                     "--node-gpus", "1"]),
    ("hook export", ["--profiles", "{not_profiles}", "--out", "{tmp}/t", "--node-cpus", "1",
                     "--node-mem-mb", "1", "--node-gpus", "1"]),
    ("hook install", ["--conf-dir", "/proc/x", "--write"]),
    ("hook failsafe", ["--config", "{tmp}/missing.toml"]),
    ("controller run", ["--config", "{bad_toml}", "--once"]),
    ("controller run", ["--mode", "bogus"]),
    ("controller snapshot", ["/proc/x/snap"]),
    ("controller snapshot", ["{script}"]),
    ("controller replay", ["{tmp}/missing"]),
    ("controller replay", ["{not_profiles_dir}"]),
    ("status", ["--config", "{bad_toml}"]),
    ("status", ["--job", "0"]),
    ("profile run", ["--key", "bad key!", "--", "true"]),
    ("profile run", ["--key", "k", "--out", "/proc/x/y.json", "--", "true"]),
    ("profile run", ["--key", "k", "--store", "{not_db}", "--", "true"]),
    ("profile import", ["--store", "{tmp}/s.db", "{tmp}/missing.json"]),
    ("profile import", ["--store", "{tmp}/s.db", "{not_json}"]),
    ("profile import", ["--store", "{tmp}/s.db", "{not_profiles}"]),
    ("profile export", ["--store", "{tmp}/missing.db"]),
    ("profile export", ["--store", "{not_db}"]),
    ("profile export", ["--store", "{tmp}/missing.db", "--out", "/proc/x/y.json"]),
    ("profile show", ["--store", "{tmp}/missing.db", "k"]),
    ("profile show", ["--store", "{not_db}", "k"]),
    ("profile list", ["--store", "{not_db}"]),
    ("profile suspects", ["--config", "{bad_toml}"]),
    ("profile suspects", ["--clear", "k", "--confirm", "k"]),
    ("profile suspects", ["--confirm", "k"]),
    ("profile list", ["--store", "{tmp}/typo/dir/x.db"]),
    ("demo", ["--profiles", "{tmp}/missing.json"]),
    ("demo", ["--jobs", "1"]),
    ("config check", ["--config", "{bad_toml}"]),
    ("config check", ["--config", "{tmp}/missing.toml"]),
    ("nosuch", []),
    ("synergy-sbatch", ["--profile-key", "bad key!", "{script}"]),
    ("synergy-sbatch", ["--dry-run", "/nonexistent.sh"]),
    ("synergy-sbatch", ["--template", "nosuch"]),
    ("synergy-sbatch", ["--var", "A=1", "{script}"]),
    ("synergy-sbatch", ["--explain", "--config", "{bad_toml}", "{script}"]),
    # Inputs that were taken without a word (issue 45, item 7).
    ("profile import", ["--store", "{tmp}/typo/dir/p.db", "{profiles}"]),
    ("synergy-sbatch", ["--dry-run", "--dataset-size", "99999999999999999999999T",
                        "{script}"]),
    ("hook explain", ["--table", "{table}", "--", "--gpus=99999999999999999999", "job.sh"]),
    ("hook explain", ["--table", "{table}", "--", "--gpus=1", "--mem-per-gpu=10XB",
                      "job.sh"]),
    ("hook explain", ["--table", "{table}", "--", "--gpus=1",
                      "--cpus-per-gpu=99999999999", "job.sh"]),
    ("whatif", ["--from", "{not_json}", "--assume-mix", "90,90,90"]),
    ("synergy-sbatch", ["--explain", "--gpus=1"]),
    ("hook install", ["--conf-dir", 'etc"3']),
    ("hook install", ["--conf-dir", "etc3"]),
]


def leaf_commands(group: click.Group, prefix: str = "") -> set[str]:
    out = set()
    for name, cmd in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            out |= leaf_commands(cmd, path + " ")
        else:
            out.add(path)
    return out


def test_the_cases_cover_every_command():
    covered = {path for path, _ in CASES}
    assert leaf_commands(main) | {"synergy-sbatch"} <= covered


def files(tmp: Path) -> dict[str, str]:
    (tmp / "bad.toml").write_text('[controller]\npolicy = "bogus"\n')
    (tmp / "not.db").write_text("this is not a database\n" * 100)
    (tmp / "not.json").write_text("{not json")
    (tmp / "not_profiles.json").write_text('{"models": 3}')
    (tmp / "job.sh").write_text("#!/bin/sh\ntrue\n")
    plain = tmp / "plain_dir"
    plain.mkdir()
    (plain / "keep").write_text("not a dev cluster")
    return {"tmp": str(tmp), "bad_toml": str(tmp / "bad.toml"), "not_db": str(tmp / "not.db"),
            "profiles": str(SHIPPED_PROFILES), "table": _fresh_table(),
            "not_json": str(tmp / "not.json"),
            "not_profiles": str(tmp / "not_profiles.json"),
            "not_profiles_dir": str(plain), "script": str(tmp / "job.sh")}


def _fresh_table() -> str:
    """A fresh hook table outside the run's directory (so that explain gets as far as
    saying it "manages" a job), made once per session."""
    import tempfile
    import time

    from synergy_slurm.config import HookSection
    from synergy_slurm.hook.export import build_table
    from synergy_slurm.profiles import load_profiles

    path = Path(tempfile.gettempdir()) / f"synergy-test-table-{os.getuid()}-{os.getpid()}"
    table = build_table(HookSection(max_age_s=3600), load_profiles(SHIPPED_PROFILES), 32,
                        256000, 8, time.time())
    table.write(path)
    return str(path)


def tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("path, args", CASES, ids=[f"{p} {' '.join(a)}" for p, a in CASES])
def test_bad_input_is_one_line_exit_2_and_creates_nothing(path, args, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    names = files(work)
    monkeypatch.chdir(work)
    # Nothing may run Slurm or write the real /etc/slurm.
    monkeypatch.setenv("PATH", "/nonexistent")
    argv = [a.format(**names) for a in args]
    before = tree(work)
    if path == "synergy-sbatch":
        res = CliRunner().invoke(sbatch_cmd.main, argv)
    else:
        res = CliRunner().invoke(main, [*path.split(), *argv])
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert tree(work) == before
    assert not Path("/proc/nope").exists() and not (work / "typo").exists()
    assert not os.path.exists(f"{work}/missing.db")


def test_a_round_that_cannot_reach_slurm_fails_with_1_and_says_why(tmp_path):
    """--once with Slurm unreachable: exit 1 (2 is for bad input), no "next try" for a
    retry that will not come, and with --format json a JSON error."""
    import json

    bindir = tmp_path / "bin"
    bindir.mkdir()
    for cmd in ("scontrol", "squeue", "sinfo", "sacctmgr"):
        (bindir / cmd).write_text("#!/bin/sh\necho 'slurm_load_jobs error: Unable to "
                                  "contact slurm controller' >&2\nexit 1\n")
        (bindir / cmd).chmod(0o755)
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[slurm]\nbindir = "{bindir}"\n[controller]\n'
                   f'state_db = "{tmp_path}/state.db"\naudit_log = "{tmp_path}/audit.jsonl"\n')
    from click.testing import CliRunner

    from synergy_slurm.cli.main import main

    res = CliRunner().invoke(main, ["controller", "run", "--once", "--dry-run", "--config",
                                    str(cfg)])
    assert res.exit_code == 1 and "Unable to contact slurm controller" in res.output
    assert "next try" not in res.output
    res = CliRunner().invoke(main, ["controller", "run", "--once", "--dry-run", "--config",
                                    str(cfg), "--format", "json"])
    assert res.exit_code == 1
    assert "Unable to contact" in json.loads(res.stdout.splitlines()[0])["error"]


def test_help_and_notes_say_what_the_commands_do(tmp_path):
    from click.testing import CliRunner

    from synergy_slurm.cli.main import main
    from synergy_slurm.cli.sbatch_cmd import main as sbatch_main

    demo_help = CliRunner().invoke(main, ["demo", "--help"]).output
    assert "--nodes" not in demo_help          # the demo has no --nodes
    res = CliRunner().invoke(main, ["profile", "list", "--store", str(tmp_path / "x.db")])
    assert res.exit_code == 0 and "no store at" in res.output and "no profiles" in res.output
    res = CliRunner().invoke(sbatch_main, ["--profile-key", "bad key!", "x.sh"],
                             prog_name="synergy-sbatch")
    assert res.exit_code == 2 and "synergy-sbatch --synergy-help" in res.output


def test_a_round_without_slurm_says_its_error_once(tmp_path):
    """`controller run --once --dry-run` with no Slurm on PATH: the error was logged by the
    controller and printed again by the command; now the command alone says it. Run as a
    process, as an admin does: the log goes to the process's stderr."""
    import subprocess
    import sys

    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[controller]\nstate_db = "{tmp_path}/state.db"\n'
                   f'audit_log = "{tmp_path}/audit.jsonl"\n')
    env = {**os.environ, "PATH": "/nonexistent"}
    res = subprocess.run([sys.executable, "-m", "synergy_slurm", "controller", "run",
                          "--once", "--dry-run", "--config", str(cfg)],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert res.returncode == 1, res
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if "not found" in ln]
    assert len(lines) == 1 and lines[0].startswith("Error: "), (res.stdout, res.stderr)


def test_a_mix_that_does_not_sum_to_100_is_refused():
    """--assume-mix 90,90,90 (270%) was taken as given; a mix is refused, not normalised
    quietly, unless it sums to 100 (rounding of a half point allowed)."""
    from synergy_slurm.cli.whatif_cmd import _assumed_mix

    with pytest.raises(click.BadParameter, match="sums to 270%"):
        _assumed_mix("90,90,90")
    with pytest.raises(click.BadParameter, match="sums to 99%"):
        _assumed_mix("20,70,9")
    assert _assumed_mix("33.3,33.3,33.4") == [33.3, 33.3, 33.4]
    assert _assumed_mix("20,70,10") == [20, 70, 10]


def test_config_check_lists_every_problem_in_one_run(tmp_path):
    """A missing profiles file was reported only once the file's other errors were fixed."""
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[profiles]\nfile = "{tmp_path}/missing.json"\n[controller]\n'
                   f'policy = "bogus"\n[hook]\ndir = "{tmp_path}/nodir"\nmax_age_s = "x"\n')
    res = CliRunner().invoke(main, ["config", "check", "--config", str(cfg)])
    assert res.exit_code == 2
    errors = res.stderr.splitlines()
    assert all(e.startswith("Error: ") for e in errors)
    for what in ("policy = 'bogus'", "max_age_s", "missing.json': no such file",
                 "nodir': no such directory"):
        assert sum(what in e for e in errors) == 1, (what, errors)


def test_hook_install_refuses_a_relative_conf_dir(tmp_path, monkeypatch):
    """--conf-dir etc3 printed dofile("etc3/synergy.lua"): slurmctld, which does not run
    in the admin's directory, would find no such file. Refused, as a relative --state-dir
    is; an absolute one gives the line with absolute paths."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "etc3").mkdir()
    (tmp_path / "etc3" / "job_submit.lua").write_text("return slurm.SUCCESS\n")
    cfg = tmp_path / "synergy.toml"
    cfg.write_text('[hook]\nstate_dir = "/var/lib/synergy"\n')
    res = CliRunner().invoke(main, ["hook", "install", "--config", str(cfg), "--conf-dir",
                                    "etc3"])
    assert res.exit_code == 2 and 'dofile("etc3' not in res.output, res.output
    assert res.stderr.startswith("Error: --conf-dir 'etc3': must be an absolute path")
    res = CliRunner().invoke(main, ["hook", "install", "--config", str(cfg), "--conf-dir",
                                    str(tmp_path / "etc3")])
    assert res.exit_code == 0, res.output
    assert f'dofile("{tmp_path}/etc3/synergy.lua").chain("/var/lib/synergy")' in res.output
