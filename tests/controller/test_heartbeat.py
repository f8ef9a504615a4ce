"""The heartbeat without Slurm: it keeps the table fresh during a long round, stops for a
stuck or failed round, and a clean stop expires the table. Its timer is driven by hand
(``tick``) on a fake clock: no test waits."""

from __future__ import annotations

from synergy_slurm.controller.heartbeat import Heartbeat
from synergy_slurm.hook.table import HookTable, parse_table


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


def table(max_age_s: int = 4) -> HookTable:
    return HookTable(generated_at=1, node_cpus=24, node_mem_mb=500000, node_gpus=8,
                     max_age_s=max_age_s)


def stamp(path) -> int:
    return parse_table(path.read_text()).generated_at


def test_beats_through_a_long_round_and_expires_on_stop(tmp_path):
    path, clock = tmp_path / "t", Clock()
    hb = Heartbeat(path, clock=clock, monotonic=clock)
    hb.round_started()
    hb.publish(table(max_age_s=2))
    ages = []
    for _ in range(8):                  # 4 s of a round that does not end
        clock.advance(0.5)
        hb.tick()
        ages.append(clock() - stamp(path))
    assert max(ages) < 2, ages          # never as old as max_age_s
    assert hb.beats == 1 + 8            # the round's write, then one per max_age_s / 4
    hb.stop(expire=True)
    assert stamp(path) == 0


def test_the_timer_thread_starts_and_stops(tmp_path):
    path = tmp_path / "t"
    hb = Heartbeat(path)
    hb.publish(table())
    hb.start()
    hb.stop(expire=True)                # joins the thread at once, then expires the table
    assert hb._thread is None and stamp(path) == 0


def test_no_beat_for_a_stuck_round(tmp_path):
    path, clock = tmp_path / "t", Clock()
    hb = Heartbeat(path, clock=clock, stuck_after_s=0.2, monotonic=clock)
    hb.round_started()
    hb.publish(table())          # the round's own write
    first = stamp(path)
    clock.advance(5)
    assert hb.stuck_for() > 0 and not hb.beat() and not hb.tick()
    assert stamp(path) == first
    hb.round_finished(ok=True)
    assert hb.beat()             # the round ended: alive again
    assert stamp(path) == first + 5


def test_no_beat_after_a_failed_round_until_one_succeeds(tmp_path):
    path = tmp_path / "t"
    hb = Heartbeat(path)
    hb.publish(table())
    hb.round_started()
    hb.round_finished(ok=False)
    assert not hb.beat()
    hb.round_started()
    assert hb.beat()             # a round in progress (not stuck) beats
    hb.round_finished(ok=True)
    assert hb.beat()


def test_never_creates_the_hook_directory(tmp_path):
    hb = Heartbeat(tmp_path / "gone" / "t")
    hb.publish(table())
    assert not (tmp_path / "gone").exists()


def test_a_failed_write_is_reported(tmp_path):
    hb = Heartbeat(tmp_path / "missing-dir" / "t")
    assert hb.publish(table()) is False and hb.beats == 0

