"""Every ``synergy ...`` and ``synergy-sbatch ...`` command the admin and user guides show
(in their code blocks and in their prose's code spans) is checked against the code,
without Slurm: its subcommand path exists and every option it names is one of that
command's; the guides' synergy-sbatch lines are run (``--dry-run`` or ``--explain``, which
submit nothing) on a script of that name. The example configuration is checked too: the
file loads, and every alternative its comments offer for a key is accepted.

Before (issue 45, item 5): the example listed an ``advise`` mode that ``config check``
rejects, and nothing tied the guides' commands to the CLI."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.cli.sbatch_cmd import main as sbatch_main
from synergy_slurm.config import check_config

REPO = Path(__file__).resolve().parents[1]
GUIDES = (REPO / "docs" / "admin-guide.md", REPO / "docs" / "user-guide.md")
EXAMPLE = REPO / "docs" / "synergy.toml.example"


@dataclass(frozen=True)
class Shown:
    """A command as a guide shows it: where, and its words (up to a pipe or a comment)."""

    where: str
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: {shlex.join(self.words)}"


def _words(line: str) -> tuple[str, ...] | None:
    line = line.strip()
    if line.startswith("$ "):
        line = line[2:]
    if not re.match(r"(synergy|synergy-sbatch)(\s|$)", line):
        return None
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    for stop in ("|", "&&", ";", ">", "..."):
        if stop in words:
            words = words[:words.index(stop)]
    return tuple(words)


def shown_commands() -> list[Shown]:
    out = []
    for guide in GUIDES:
        text = guide.read_text()
        for m in re.finditer(r"```[a-z]*\n(.*?)```", text, re.S):
            lineno = text.count("\n", 0, m.start()) + 2
            block = re.sub(r"\\\n\s*", " ", m.group(1))        # continuation lines
            for line in block.splitlines():
                if (words := _words(line)) is not None:
                    out.append(Shown(f"{guide.name}:{lineno}", words))
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for m in re.finditer(r"`((?:synergy|synergy-sbatch) [^`]+)`", prose):
            if (words := _words(m.group(1))) is not None:
                out.append(Shown(f"{guide.name} (prose)", words))
    return out


SHOWN = shown_commands()


def test_the_guides_show_commands():
    assert len(SHOWN) > 30
    assert any(s.words[0] == "synergy-sbatch" for s in SHOWN)


def _resolve(words: tuple[str, ...]) -> tuple[click.Command, list[str], list[str]]:
    """The command ``words`` name (through synergy's groups), its path, and the rest."""
    cmd: click.Command = main if words[0] == "synergy" else sbatch_main
    path, rest = [words[0]], list(words[1:])
    while isinstance(cmd, click.Group) and rest:
        if rest[0].startswith("-"):          # the group's own (synergy -v controller ...)
            assert rest[0] in _option_names(cmd), f"{path}: no option {rest[0]}"
            path.append(rest.pop(0))
            continue
        sub = cmd.get_command(click.Context(cmd), rest[0])
        assert sub is not None, f"no command {' '.join(path + rest[:1])!r}"
        cmd, path = sub, [*path, rest.pop(0)]
    return cmd, path, rest


def _option_names(cmd: click.Command) -> set[str]:
    names = {"--help", "--synergy-help"}
    for p in cmd.params:
        if isinstance(p, click.Option):
            names.update(p.opts)
            names.update(p.secondary_opts)
    return names


def _named_options(cmd: click.Command, rest: list[str]) -> list[str]:
    """The options ``rest`` names as this command's: up to ``--`` (what follows is the
    job's or the training command's), and for synergy-sbatch up to its script (sbatch's
    own options pass through to sbatch and are not ours to check)."""
    out = []
    for w in rest:
        if w == "--":
            break
        if not w.startswith("-") or re.fullmatch(r"-\d.*", w):
            if cmd is sbatch_main and w.endswith(".sh"):
                break
            continue
        out.append(w.split("=", 1)[0])
    if cmd is sbatch_main:
        ours = _option_names(cmd)
        out = [o for o in out if o in ours or not _looks_like_sbatch(o)]
    return out


def _looks_like_sbatch(option: str) -> bool:
    """sbatch's own options the guides pass through synergy-sbatch."""
    return option in {"--gpus", "--cpus-per-gpu", "--mem-per-gpu", "--comment", "-p",
                      "--partition", "--time", "-t", "--nodes", "-N", "--wrap"}


@pytest.mark.parametrize("shown", SHOWN, ids=str)
def test_each_command_in_the_guides_exists_with_the_options_it_names(shown):
    cmd, path, rest = _resolve(shown.words)
    assert not isinstance(cmd, click.Group) or rest == [] or rest[0].startswith("-"), \
        f"{shown}: {' '.join(path)} needs a subcommand"
    unknown = [o for o in _named_options(cmd, rest) if o not in _option_names(cmd)]
    assert not unknown, f"{shown}: {' '.join(path)} has no option {', '.join(unknown)}"
    # synergy-sbatch --help is sbatch's; its own is --synergy-help.
    helps = "--help" if path[0] == "synergy" else "--synergy-help"
    res = CliRunner().invoke(main if path[0] == "synergy" else sbatch_main,
                             [*path[1:], helps], prog_name=path[0])
    assert res.exit_code == 0, res.output


# The code blocks' lines, which are whole commands (the prose's may leave out the job).
SBATCH = [s for s in SHOWN if s.words[0] == "synergy-sbatch" and "prose" not in s.where]


@pytest.mark.parametrize("shown", SBATCH, ids=str)
def test_each_synergy_sbatch_line_in_the_guides_runs(shown, tmp_path, monkeypatch,
                                                     profiles_path):
    """Run as shown, with --dry-run (or its own --explain), on a script of that name and
    a configuration naming the paper's profiles: no Slurm, nothing submitted."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.sh").write_text("#!/bin/sh\n#SBATCH --gpus=1\necho hi\n")
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[hook]\ndir = "{tmp_path}"\nstate_dir = "{tmp_path}"\n'
                   f'[profiles]\nfile = "{profiles_path}"\nstore = "{tmp_path}/p.db"\n')
    args = list(shown.words[1:])
    if "--explain" not in args and "--list-templates" not in args:
        args.insert(0, "--dry-run")
    res = CliRunner().invoke(sbatch_main, ["--config", str(cfg), *args],
                             prog_name="synergy-sbatch")
    assert res.exit_code == 0, f"{shown}: {res.output}"


def test_the_example_configuration_loads():
    cfg, problems = check_config(EXAMPLE)
    assert problems == [] and cfg is not None


def _offered() -> list[tuple[str, str, str]]:
    """(section, key, value) for each alternative a comment offers as ``a | b | c``."""
    out, section = [], ""
    for line in EXAMPLE.read_text().splitlines():
        if m := re.match(r"\[(\w+)\]", line):
            section = m.group(1)
        m = re.match(r'(\w+) = "[^"]*"\s*#\s*(.*)', line)
        if not m or "|" not in m.group(2):
            continue
        for alt in m.group(2).split("|"):
            word = re.match(r"\s*([\w-]+)", alt)
            if word:
                out.append((section, m.group(1), word.group(1)))
    return out


@pytest.mark.parametrize(("section", "key", "value"), _offered())
def test_every_value_the_example_offers_is_accepted(section, key, value, tmp_path):
    f = tmp_path / "synergy.toml"
    f.write_text(f'[{section}]\n{key} = "{value}"\n')
    _, problems = check_config(f)
    assert problems == [], problems


def _sections() -> list[str]:
    return re.findall(r"(?m)^## \d+\. (.*)$", GUIDES[0].read_text())


def test_the_admin_guide_goes_in_the_order_a_site_works():
    """whatif (what a site runs first, needing only the package) before anything that
    touches Slurm; the configuration before the hook install that reads it."""
    titles = _sections()

    def at(word: str) -> int:
        return next(i for i, t in enumerate(titles) if word in t)

    assert at("Install") < at("whatif") < at("slurm.conf") < at("configuration") < \
        at("The hook")


def test_the_paths_the_admin_guide_copies_from_are_installed():
    """Every ``.../share/synergy-slurm/X`` the guide names is shipped there by pyproject's
    data-files (the example configuration was not), and the guide does not ask the
    system's Python where synergy's venv is."""
    import tomllib

    text = GUIDES[0].read_text()
    assert "python3 -c 'import sys; print(sys.prefix)'" not in text
    files = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "data-files"]
    shipped = {f"{dest}/{src.name}" for dest, globs in files.items() for g in globs
               for src in REPO.glob(g)}
    named = set(re.findall(r"(share/synergy-slurm/[\w./-]+\.[a-z]+)", text))
    share = "share/synergy-slurm"
    named |= {f"{share}/{m}" for m in re.findall(r"\$share/([\w./-]+\.[a-z]+)", text)}
    assert named and named <= shipped, named - shipped
