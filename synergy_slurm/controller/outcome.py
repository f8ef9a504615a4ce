"""What became of one action: a typed outcome (a result and its detail), not a string.

The audit log, the state database and ``RoundResult.results`` keep its text
(``str(outcome)``: ``done``, ``error: ...``); metrics are labelled by its result.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Result(StrEnum):
    DONE = "done"                        # Slurm shows the change
    IGNORED = "ignored"                  # Slurm took the command and did not apply it
    ERROR = "error"                      # Slurm, or the writer's own checks, refused it
    PLANNED = "planned (observe)"        # observe mode: recorded, not sent
    NOT_SENT = "not sent"                # an action that is only a record (cannot)

    @property
    def label(self) -> str:
        """The metric label: one word."""
        return {Result.PLANNED: "planned", Result.NOT_SENT: "not-sent"}.get(self, self.value)


@dataclass(frozen=True)
class ActionOutcome:
    result: Result
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Done, or never meant to be sent: not an error of the round."""
        return self.result in (Result.DONE, Result.PLANNED, Result.NOT_SENT)

    def __str__(self) -> str:
        return f"{self.result}: {self.detail}" if self.detail else str(self.result)
