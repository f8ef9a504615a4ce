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
            "not_json": str(tmp / "not.json"),
            "not_profiles": str(tmp / "not_profiles.json"),
            "not_profiles_dir": str(plain), "script": str(tmp / "job.sh")}


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
    assert res.exit_code == 0 and "no profile store" in res.output
    res = CliRunner().invoke(sbatch_main, ["--profile-key", "bad key!", "x.sh"],
                             prog_name="synergy-sbatch")
    assert res.exit_code == 2 and "synergy-sbatch --synergy-help" in res.output
