"""The one gate for changes to Slurm: a verb allowlist, the mode check, safe arguments,
and only Slurm's own commands run at all (no Slurm needed: nothing reaches a command)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from synergy_slurm.slurm.commands import SlurmCLI, SlurmError
from synergy_slurm.slurm.model import SlurmJob
from synergy_slurm.slurm.writer import MUTATING_VERBS, NotEnforcing, Shape, SlurmWriter

from .helpers import squeue_fields_answer


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


class Scripted(Recorder):
    """A Slurm whose job reads PENDING once requeued and whose commands fail on request:
    ``fail`` holds (verb, first argument prefix) pairs."""

    def __init__(self, fail: set[tuple[str, str]], state: str = "PENDING") -> None:
        super().__init__()
        self.fail = fail
        self.state = state

    def run(self, command, args, timeout_s=None, input_text=None):  # type: ignore[override]
        self.sent.append((command, list(args)))
        if command == "squeue":      # the writer's read-back
            return squeue_fields_answer(args, JobId="5", JobState=self.state,
                                        Reason="JobHeldUser", CpusPerTres="gres:gpu:3",
                                        MemPerTres="gres:gpu:1000")
        for verb, prefix in self.fail:
            if args[0] == verb and any(a.startswith(prefix) for a in args[1:]):
                raise SlurmError(f"simulated {verb} failure", [command, *args], 1)
        return ""


def running(admin: str = "synergy.managed=1,synergy.profile=alexnet") -> SlurmJob:
    return SlurmJob(5, user="alice", state="RUNNING", partition="gpu", gpus=1,
                    gpus_per_job=1, requeue=True, batch=True, admin_comment=admin)


def mutations(cli: Recorder) -> list[list[str]]:
    return [a for c, a in cli.sent if c == "scontrol"]


@pytest.mark.parametrize("fail, state", [({("update", "TresPerJob")}, "PENDING"),
                                         (set(), "COMPLETING")])
def test_a_requeue_that_fails_after_the_job_stopped_releases_it(monkeypatch, fail, state):
    """The shape update refused, or the job COMPLETING past the wait: released anyway,
    and synergy's tag (set before the requeue) turned into the released one."""
    monkeypatch.setattr("synergy_slurm.slurm.writer.time.sleep", lambda s: None)
    cli = Scripted(fail, state)
    with pytest.raises(SlurmError):
        SlurmWriter(cli, enforce=True).requeue_reshape(running(), Shape(6, 2000), timeout_s=0)
    sent = mutations(cli)
    tagged = "AdminComment=synergy.managed=1,synergy.profile=alexnet,synergy.held=1"
    assert sent[0] == ["update", "JobId=5", tagged] and sent[1] == ["requeuehold", "5"]
    assert sent[-2:] == [["release", "5"], ["update", "JobId=5", "AdminComment=synergy."
                                            "managed=1,synergy.profile=alexnet,synergy.held=0"]]


def test_a_release_that_fails_too_leaves_synergys_tag_for_the_next_round(monkeypatch):
    monkeypatch.setattr("synergy_slurm.slurm.writer.time.sleep", lambda s: None)
    cli = Scripted({("update", "TresPerJob"), ("release", "5")})
    with pytest.raises(SlurmError, match="update"):
        SlurmWriter(cli, enforce=True).requeue_reshape(running(), Shape(6, 2000))
    assert mutations(cli)[-1] == ["release", "5"]      # tag left: held_by_synergy again
    held = replace(running("synergy.managed=1,synergy.held=1"), state="PENDING", priority=0,
                   reason="JobHeldUser")
    assert held.held_by_synergy


def test_a_refused_requeue_clears_the_tag_it_set():
    cli = Scripted({("requeuehold", "5")})
    with pytest.raises(SlurmError):
        SlurmWriter(cli, enforce=True).requeue_reshape(running(""), Shape(6, 2000))
    assert mutations(cli) == [["update", "JobId=5", "AdminComment=synergy.held=1"],
                              ["requeuehold", "5"],
                              ["update", "JobId=5", "AdminComment=synergy.held=0"]]


def test_a_requeue_whose_release_fails_is_not_reported_done(monkeypatch):
    monkeypatch.setattr("synergy_slurm.slurm.writer.time.sleep", lambda s: None)
    cli = Scripted({("release", "5")})
    with pytest.raises(SlurmError, match="release"):
        SlurmWriter(cli, enforce=True).requeue_reshape(running(), Shape(3, 1000))
