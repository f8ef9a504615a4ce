"""The append-only audit log: one JSON line per action (who, what, before -> after, why)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class AuditLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, round_id: int, mode: str, action: dict[str, Any], user: str,
              result: str) -> None:
        line = json.dumps({
            "ts": round(time.time(), 3), "actor": "synergy-controller", "round": round_id,
            "mode": mode, "job_id": action["job_id"], "user": user, "action": action["action"],
            "before": action["before"], "after": action["after"], "reason": action["reason"],
            "result": result}, sort_keys=True)
        # O_APPEND writes of one line are atomic enough for one writer; fsync per round.
        # 0640: every user's jobs and reasons are in it (PrivateData's rule); a log an
        # older version made 0644 is tightened.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o640)
        with os.fdopen(fd, "a") as fh:
            if os.fstat(fd).st_mode & 0o037:
                os.fchmod(fd, 0o640)
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
