"""What each user may read of the controller's state, as Slurm's ``PrivateData`` would
allow: the views ``synergy status`` reads when the state itself is not readable.

The state database holds every user's jobs, profile keys and notes, and the audit log
every action: both are the controller's alone (0600 and 0640, in a directory only it
writes). After each round the controller writes, beside the state, a ``view`` directory
others may pass through but not list (0711):

- ``round.json`` (0644): the last round's counts and time, no job in it;
- in each of the others, beside the jobs in the queue, the jobs that left it lately
  (``StateStore.past``) and their last actions: what happened to a job after the fact,
  under the same rule as the jobs in the queue;
- ``all.json``: every managed job, 0644 where PrivateData does not hide jobs (any user
  sees them in squeue anyway), else 0600 (the controller's own);
- where PrivateData hides jobs, ``users/<name>.json`` for each user with a job, a
  profiling job or a mark: that user's rows only, owned by that user and readable by them
  alone (0400); a Slurm operator's or administrator's holds every job, as squeue shows
  them. Writing them needs root (the files change owner): a controller running as an
  operator account writes none, and says so once.

``synergy status`` reads the state where it may (root, the controller's account), else
the user's own view, else ``all.json``, else ``round.json`` and no jobs.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInputError
from ..slurm.access import Access
from .state import StateStore

log = logging.getLogger(__name__)

VIEW_DIR = "view"
ROUND, ALL, USERS = "round.json", "all.json", "users"
ACTIONS_PER_JOB = 5


def view_dir(state_db: str | Path) -> Path:
    return Path(state_db).parent / VIEW_DIR


@dataclass
class StatusView:
    """A view read back: the same questions as :class:`StateStore` asks (what
    ``controller/status.py`` shows), answered from what the view holds."""

    last: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    marks: list[dict[str, Any]] = field(default_factory=list)
    # The controller's standing warnings (an untagged job, ...): about the site, never a
    # user's job, so every view carries them.
    warnings: list[dict[str, Any]] = field(default_factory=list)
    # Jobs that left the queue lately (StateStore.past): what happened to them.
    gone: list[dict[str, Any]] = field(default_factory=list)

    def last_round(self) -> dict[str, Any] | None:
        return self.last

    def jobs(self) -> list[dict[str, Any]]:
        return self.rows

    def actions_for(self, job_id: int, limit: int = 5) -> list[dict[str, Any]]:
        return [a for a in self.actions if a["job_id"] == job_id][-limit:]

    def profiling(self) -> dict[str, dict[str, Any]]:
        return self.profiles

    def suspects(self, key: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.marks if key is None or m["key"] == key]

    def notices(self) -> list[dict[str, Any]]:
        return self.warnings

    def past(self) -> list[dict[str, Any]]:
        return self.gone

    def as_dict(self) -> dict[str, Any]:
        return {"last_round": self.last, "jobs": self.rows, "actions": self.actions,
                "profiling": self.profiles, "suspects": self.marks,
                "notices": self.warnings, "past": self.gone}


def view_of(store: StateStore) -> StatusView:
    """Everyone's rows, read once."""
    return StatusView(store.last_round(), store.jobs(),
                      store.recent_actions(ACTIONS_PER_JOB), store.profiling(),
                      store.suspects(), store.notices(), store.past())


def by_user(everyone: StatusView) -> dict[str, StatusView]:
    """Each user's part of ``everyone`` (their jobs and those jobs' actions, their
    profiling jobs and marks), in one pass."""
    out: dict[str, StatusView] = {}

    def of(user: str) -> StatusView:
        return out.setdefault(user, StatusView(everyone.last, warnings=everyone.warnings))

    owner = {}
    for r in everyone.rows:
        if r.get("user"):
            of(r["user"]).rows.append(r)
            owner[r["job_id"]] = r["user"]
    for r in everyone.gone:
        if r.get("user"):
            of(r["user"]).gone.append(r)
            owner.setdefault(r["job_id"], r["user"])
    for a in everyone.actions:
        if a["job_id"] in owner:
            of(owner[a["job_id"]]).actions.append(a)
    for key, p in everyone.profiles.items():
        if p.get("user"):
            of(p["user"]).profiles[key] = p
    for m in everyone.marks:
        if m.get("user"):
            of(m["user"]).marks.append(m)
    return out


def write_views(store: StateStore, where: Path, access: Access) -> list[str]:
    """Write the round's views into ``where`` (see the module); returns the users whose
    own view could not be written (no such user here, or not root)."""
    where.mkdir(mode=0o711, parents=True, exist_ok=True)
    os.chmod(where, 0o711)
    everyone = view_of(store)
    _write(where / ROUND, {"last_round": everyone.last, "notices": everyone.warnings}, 0o644)
    _write(where / ALL, everyone.as_dict(), 0o600 if access.jobs_private else 0o644)
    if not access.jobs_private:
        return []
    views = by_user(everyone)
    users = set(views) | set(access.admins)
    per_user = where / USERS
    per_user.mkdir(mode=0o711, exist_ok=True)
    os.chmod(per_user, 0o711)
    missed = []
    for user in sorted(users):
        try:
            uid = pwd.getpwnam(user).pw_uid
            view = everyone if user in access.admins else views[user]
            _write(per_user / f"{user}.json", view.as_dict(), 0o400, uid)
        except (KeyError, PermissionError):
            missed.append(user)
    return missed


def _write(path: Path, doc: dict[str, Any], mode: int, owner: int | None = None) -> None:
    """Replace ``path`` at once (a reader never sees half a file), mode and owner set
    before it takes the name."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(doc))     # the C encoder; json.dump streams in Python
            os.fchmod(fh.fileno(), mode)
            if owner is not None:
                os.fchown(fh.fileno(), owner, -1)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class NoView(BadInputError):
    """Nothing of the controller's state this user may read."""


def read_view(where: Path, user: str) -> StatusView:
    """What ``user`` may see: their own view, else every job where that is public, else
    the last round alone."""
    for path in (where / USERS / f"{user}.json", where / ALL):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        return StatusView(doc.get("last_round"), doc.get("jobs", []), doc.get("actions", []),
                          doc.get("profiling", {}), doc.get("suspects", []),
                          doc.get("notices", []), doc.get("past", []))
    try:
        doc = json.loads((where / ROUND).read_text())
        return StatusView(doc.get("last_round"), warnings=doc.get("notices", []))
    except (OSError, ValueError) as exc:
        raise NoView(f"no controller state you may read at {where} ({exc})") from None
