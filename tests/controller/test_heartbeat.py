"""The heartbeat without Slurm: it keeps the table fresh during a long round, stops for a
stuck or failed round, and a clean stop expires the table."""

from __future__ import annotations

import time

from synergy_slurm.controller.heartbeat import Heartbeat
from synergy_slurm.hook.table import HookTable, parse_table


def table(max_age_s: int = 4) -> HookTable:
    return HookTable(generated_at=1, node_cpus=24, node_mem_mb=500000, node_gpus=8,
                     max_age_s=max_age_s)


def age(path) -> float:
    return time.time() - parse_table(path.read_text()).generated_at


def test_beats_through_a_long_round_and_expires_on_stop(tmp_path):
    path = tmp_path / "t"
    hb = Heartbeat(path)
    hb.start()
    try:
        hb.round_started()
        hb.publish(table(max_age_s=2))
        ages = []
        for _ in range(8):
            time.sleep(0.5)
            ages.append(age(path))
        assert max(ages) < 2, ages
        assert hb.beats >= 3
    finally:
        hb.stop(expire=True)
    assert parse_table(path.read_text()).generated_at == 0


def test_no_beat_for_a_stuck_round(tmp_path):
    path = tmp_path / "t"
    hb = Heartbeat(path, stuck_after_s=0.2)
    hb.round_started()
    hb.publish(table())          # the round's own write
    first = parse_table(path.read_text()).generated_at
    time.sleep(0.3)
    assert hb.stuck_for() > 0 and not hb.beat()
    assert parse_table(path.read_text()).generated_at == first
    hb.round_finished(ok=True)
    assert hb.beat()             # the round ended: alive again


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

