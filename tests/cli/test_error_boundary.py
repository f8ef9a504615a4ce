"""The commands' one error path: synergy's errors by the exit code they carry, a plain
ValueError as the bug it is (not as "bad input, nothing changed")."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from synergy_slurm.cli.errors import Boundary
from synergy_slurm.config import ConfigError
from synergy_slurm.errors import BadInputError, SynergyError
from synergy_slurm.slurm.commands import SlurmError


class _Cmd(Boundary, click.Command):
    pass


def _run(exc: BaseException):
    def body() -> None:
        raise exc
    cmd = _Cmd("x", callback=body)
    with pytest.raises(SystemExit) as ended:
        cmd.main([], prog_name="x")
    return ended.value.code


@pytest.mark.parametrize("exc, code", [(ConfigError("bad key"), 2), (BadInputError("no"), 2),
                                       (SynergyError("down"), 1), (SlurmError("refused"), 1),
                                       (json.JSONDecodeError("x", "{", 1), 2),
                                       (FileNotFoundError(2, "No such file", "/x"), 2)])
def test_our_errors_end_as_one_line_with_their_code(exc, code, capsys):
    assert _run(exc) == code
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and err.count("\n") == 1


def test_a_plain_value_error_is_a_bug_not_bad_input():
    def body() -> None:
        int("not a number")
    result = CliRunner().invoke(_Cmd("x", callback=body), [])
    assert isinstance(result.exception, ValueError) and result.exit_code != 2
