"""The hook table as the controller's heartbeat, kept fresh by a timer of its own.

The hook holds new GPU jobs only while its table is younger than ``max_age_s``, and the
fail-safe releases held jobs once it is older. Written only at the start of each round, the
table went stale during a long round (a requeue can wait a minute or more in the writer):
jobs were then submitted unshaped and the fail-safe released held jobs while the controller
was healthy. Here a thread rewrites the last table with a new ``generated_at`` every
``max_age_s / 4`` seconds, however long a round takes; rounds replace its content.

Alive is not the same as healthy: a round stuck for longer than ``stuck_after_s`` (a hung
Slurm command past every timeout, a deadlock) stops the heartbeat, and so does a round that
failed (Slurm unreadable, a crash) until one succeeds again: the hook and the fail-safe
then treat the controller as gone. A clean stop writes an expired table at once, so
the hook stops holding jobs the moment nothing will release them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..hook.table import HookTable

log = logging.getLogger(__name__)

# A round running longer than this is stuck: even a round of several requeues (each
# waits at most a minute or two) is far shorter.
STUCK_AFTER_S = 900.0


class Heartbeat:
    def __init__(self, path: Path, clock: Callable[[], float] = time.time,
                 stuck_after_s: float = STUCK_AFTER_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """``clock`` stamps the table; ``monotonic`` times rounds and beats (tests pass
        one fake clock for both and drive the timer with :meth:`tick`)."""
        self.path = path
        self.clock = clock
        self.monotonic = monotonic
        self.stuck_after_s = stuck_after_s
        self._table: HookTable | None = None
        self._round_started: float | None = None
        self._healthy = True
        self._last_write = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.beats = 0

    # -- what the rounds tell it ----------------------------------------------------------
    def round_started(self) -> None:
        with self._lock:
            self._round_started = self.monotonic()

    def round_finished(self, ok: bool) -> None:
        with self._lock:
            self._round_started = None
            self._healthy = ok

    def publish(self, table: HookTable) -> bool:
        """New content from a round; written at once (False if that write failed)."""
        with self._lock:
            self._table = table
        return self.beat()

    # -- the beat -------------------------------------------------------------------------
    def stuck_for(self) -> float:
        """Seconds the current round has run past ``stuck_after_s`` (0: not stuck)."""
        with self._lock:
            started = self._round_started
        if started is None:
            return 0.0
        return max(0.0, self.monotonic() - started - self.stuck_after_s)

    def beat(self) -> bool:
        """Rewrite the table with the current time; False when there is nothing to write,
        the last round failed or the current one is stuck (the table is left to expire)."""
        with self._lock:
            table = self._table
            idle_and_failed = self._round_started is None and not self._healthy
        if table is None or idle_and_failed:
            return False
        if self.stuck_for() > 0:
            log.error("round running for over %.0f s: no heartbeat, the hook table will "
                      "expire and the fail-safe release held jobs", self.stuck_after_s)
            return False
        try:
            dataclasses.replace(table, generated_at=int(self.clock())).write(self.path)
        except OSError as exc:
            log.error("could not write the hook table %s: %s", self.path, exc)
            return False
        with self._lock:
            self._last_write = self.monotonic()
            self.beats += 1
        return True

    def tick(self) -> bool:
        """One look of the timer: beat when the last write is ``max_age_s / 4`` old."""
        with self._lock:
            table, last = self._table, self._last_write
        if table is not None and self.monotonic() - last >= table.max_age_s / 4:
            return self.beat()
        return False

    def start(self) -> None:
        """Beat every max_age_s / 4 seconds (checked twice a second) until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(0.5):
                self.tick()

        self._thread = threading.Thread(target=loop, name="synergy-heartbeat", daemon=True)
        self._thread.start()

    def stop(self, expire: bool = True) -> None:
        """Stop beating; with ``expire`` write the table as expired so that the hook holds
        nothing from now on."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            table = self._table
        if expire and table is not None:
            try:
                dataclasses.replace(table, generated_at=0).write(self.path)
            except OSError as exc:
                log.error("could not expire the hook table %s: %s", self.path, exc)
