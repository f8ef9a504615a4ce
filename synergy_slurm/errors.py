"""synergy's own errors, each carrying the exit code the commands end with.

Every part may import this module (it imports nothing). An error of bad input (a config,
profiles, trace, table, history or database file, a site description, sbatch options)
is a :class:`BadInputError`; the commands' boundary (cli/errors.py) turns it into one line
and exit 2. Any other ``ValueError`` that escapes a command is a bug, shown as one.
"""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class SynergyError(Exception):
    """The work could not be done: exit 1."""

    exit_code = EXIT_FAILED


class BadInputError(SynergyError, ValueError):
    """Bad input, nothing changed: exit 2. Still a ValueError, for callers that read a
    value and skip what they cannot."""

    exit_code = EXIT_BAD_INPUT
