"""The commands' one error path: every failure ends as one line on stderr, never a traceback.

Exit codes, the same for every command (``synergy`` and ``synergy-sbatch``):

  0  done
  1  the work could not be done: Slurm failed or refused, a controller round failed
  2  bad input: options, the config file, a profiles/trace/table/database file, an output
     path that cannot be written; nothing was changed

The boundary (:class:`Boundary`) runs the top-level command: what a command does not turn
into a message itself is turned here, by kind: synergy's own errors (``synergy_slurm.errors``)
by the exit code each carries, files and databases that cannot be read as bad input. Any
other exception, a plain ValueError included, is a bug and shows as one.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from ..errors import EXIT_BAD_INPUT, EXIT_FAILED, SynergyError
from ..slurm.commands import SlurmError


class BadInput(click.ClickException):
    """Bad input: exits 2 with the message (which names the file, section or key)."""

    exit_code = EXIT_BAD_INPUT


class Failed(click.ClickException):
    """The work could not be done (Slurm, a round): exits 1."""

    exit_code = EXIT_FAILED


def as_click_error(exc: BaseException) -> click.ClickException | None:
    """The one-line error for an exception that escaped a command, or None for a bug."""
    if isinstance(exc, SlurmError):
        return Failed(f"slurm: {exc}")
    if isinstance(exc, SynergyError):    # ConfigError, ProfileError, TableError, ...
        err = click.ClickException(str(exc))
        err.exit_code = exc.exit_code
        return err
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return BadInput(f"{where}{exc.strerror or exc}")
    if isinstance(exc, sqlite3.Error):
        return BadInput(f"database: {exc}")
    if isinstance(exc, json.JSONDecodeError):
        return BadInput(f"not JSON: {exc}")
    return None


class Boundary:
    """Mixin for the top-level click command or group: runs it with click's standalone
    handling replaced by ours, so that usage errors, our errors and escaped exceptions all
    end as one ``Error: ...`` line and the exit codes above."""

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)  # type: ignore[misc]
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)  # type: ignore[misc]
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(EXIT_FAILED)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "synergy"
            helps = exc.ctx.help_option_names if exc.ctx else ["--help"]
            _fail(f"{exc.format_message()} (see '{where} {helps[0]}')", EXIT_BAD_INPUT)
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code)
        except Exception as exc:
            err = as_click_error(exc)
            if err is None:
                raise
            _fail(err.format_message(), err.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str, code: int) -> None:
    # One line, whatever the message carried (an sbatch error, a JSON position).
    click.echo("Error: " + " ".join(message.split()), err=True)
    sys.exit(code)


class BoundaryGroup(Boundary, click.Group):
    pass


def writable_file(path: Path, what: str = "--out") -> Path:
    """Check, before any work, that ``path`` can be written as a file: its directory
    exists and takes a new file, and it is not a directory. Creates nothing."""
    if path.is_dir():
        raise BadInput(f"{what} {path}: is a directory")
    _probe_dir(path.parent if str(path.parent) else Path("."), what, path)
    return path


def writable_dir(path: Path, what: str = "--out") -> Path:
    """Check, before any work, that directory ``path`` exists and takes files, or can be
    made (its nearest existing ancestor takes a directory). Creates nothing."""
    if path.exists() and not path.is_dir():
        raise BadInput(f"{what} {path}: exists and is not a directory")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    _probe_dir(probe, what, path)
    return path


def _probe_dir(directory: Path, what: str, target: Path) -> None:
    if not directory.is_dir():
        raise BadInput(f"{what} {target}: directory {directory} does not exist")
    try:
        # Permissions alone do not tell (root, read-only mounts, /proc): try it.
        fd, tmp = tempfile.mkstemp(prefix=".synergy-probe.", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise BadInput(f"{what} {target}: cannot write in {directory} ({reason})") from None
