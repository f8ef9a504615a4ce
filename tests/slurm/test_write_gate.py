"""The one gate for changes to Slurm: a verb allowlist, the mode check, safe arguments,
and only Slurm's own commands run at all (no Slurm needed: nothing reaches a command)."""

from __future__ import annotations

import pytest

from synergy_slurm.slurm.commands import SlurmCLI
from synergy_slurm.slurm.writer import MUTATING_VERBS, NotEnforcing, SlurmWriter


class Recorder(SlurmCLI):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, list[str]]] = []

    def run(self, command, args, timeout_s=None, input_text=None):  # type: ignore[override]
        self.sent.append((command, list(args)))
        return ""


@pytest.mark.parametrize("verb", ["delete", "cancel", "shutdown", "reconfigure", "hold",
                                  "setdebug", ""])
def test_verbs_outside_the_allowlist_are_refused_even_when_enforcing(verb):
    cli = Recorder()
    with pytest.raises(ValueError, match="refusing scontrol"):
        SlurmWriter(cli, enforce=True).mutate([verb, "1"] if verb else [])
    assert cli.sent == []


def test_allowed_verbs_need_enforce_and_safe_arguments():
    cli = Recorder()
    for verb in sorted(MUTATING_VERBS):
        with pytest.raises(NotEnforcing):
            SlurmWriter(cli, enforce=False).mutate([verb, "1"])
    assert cli.sent == []
    with pytest.raises(ValueError, match="unsafe"):
        SlurmWriter(cli, enforce=True).mutate(["update", "JobId=1", "Comment=a b; rm -rf /"])
    SlurmWriter(cli, enforce=True).release(7)
    assert cli.sent == [("scontrol", ["release", "7"])]


@pytest.mark.parametrize("name", ["sh", "bash", "rm", "python3", "/bin/sh", "scontrol;id"])
def test_only_slurm_commands_run(name):
    with pytest.raises(ValueError, match="not a Slurm command"):
        SlurmCLI().run(name, [])
