"""The shipped alert rules (docs/prometheus/synergy.rules.yml) against promtool and against
the metrics the controller really exports (issue 45, item 6)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.audit import AuditLog
from synergy_slurm.controller.daemon import Controller, RoundFailed
from synergy_slurm.controller.state import StateStore
from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.fake import FakeReader, FakeWriter

from .test_round_without_slurm import job, snapshot

RULES = Path(__file__).resolve().parents[2] / "docs" / "prometheus"
STALE_4M = ("The hook table was written 4m 0s ago, past its max age: the hook passes every "
            "job unchanged. Is the controller running (systemctl status synergy-controller), "
            "are its rounds failing (journalctl -u synergy-controller), can it write [hook] "
            "state_dir?")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (scripts/bootstrap-system.sh installs "
                    "Debian's prometheus package, which has it)")
    return found


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_rules_are_valid_and_their_tests_pass():
    res = run_promtool("check", "rules", "synergy.rules.yml", cwd=RULES)
    assert res.returncode == 0 and "SUCCESS: 4 rules found" in res.stdout, res
    res = run_promtool("test", "rules", "synergy.rules.test.yml", cwd=RULES)
    assert res.returncode == 0 and "SUCCESS" in res.stdout, res.stdout + res.stderr


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(tmp_path, profiles_path, clock, reader, mode="enforce") -> Controller:
    cfg = config_from_dict({
        "hook": {"dir": str(tmp_path), "state_dir": str(tmp_path), "max_age_s": 120},
        "profiles": {"file": str(profiles_path), "store": str(tmp_path / "p.db")},
        "controller": {"mode": mode, "interval_s": 60.0, "state_db": ":memory:",
                       "audit_log": str(tmp_path / "audit.jsonl")}})
    return Controller(cfg, clock=clock, reader=reader, writer=FakeWriter(enforce=True),
                      state=StateStore(":memory:"), audit=AuditLog(tmp_path / "audit.jsonl"))


def scrape(ctl: Controller) -> dict[str, float]:
    """The exposition as a scrape reads it: 'name{labels}' -> value."""
    out = {}
    for fam in text_string_to_metric_families(generate_latest(ctl.metrics.registry).decode()):
        for s in fam.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def test_every_metric_the_rules_use_is_exported(tmp_path, profiles_path):
    ctl = make(tmp_path, profiles_path, Clock(1000.0), FakeReader(snapshot(job(5))))
    ctl.run_round()
    names = {k.split("{")[0] for k in scrape(ctl)}
    used = set(re.findall(r"\b(synergy_[a-z_]+)", (RULES / "synergy.rules.yml").read_text()))
    assert used and used <= names, used - names


def test_the_metrics_say_table_age_held_jobs_failures_and_mode(tmp_path, profiles_path):
    clock = Clock(10_000.0)
    reader = FakeReader(snapshot(job(5, submit_time=9_900), job(6, submit_time=9_000)))
    ctl = make(tmp_path, profiles_path, clock, reader)
    m = scrape(ctl)
    assert m['synergy_mode{mode="enforce"}'] == 1 and m['synergy_mode{mode="observe"}'] == 0
    assert m["synergy_hook_table_generated_timestamp_seconds"] == 0      # no table yet
    assert m["synergy_interval_seconds"] == 60 and m["synergy_hook_table_max_age_seconds"] == 120
    # The FakeWriter releases nothing in Slurm: both jobs stay held after the round.
    ctl._loop(_stop_after_one(), once=True, on_round=None)
    m = scrape(ctl)
    assert m["synergy_held_jobs"] == 2 and m["synergy_held_oldest_seconds"] == 1000
    assert m["synergy_hook_table_generated_timestamp_seconds"] == 10_000
    clock.t += 90
    m = scrape(ctl)
    assert m["synergy_hook_table_age_seconds"] == 90
    ctl.run_round()                         # still held a round after their release
    assert scrape(ctl)["synergy_held_after_release_seconds"] == 90
    reader.snap = SlurmError("slurm_load_jobs error: Unable to contact slurm controller")
    for n in (1, 2, 3):
        assert ctl._loop(_stop_after_one(), once=True, on_round=None) == 1
        assert scrape(ctl)["synergy_failed_rounds_in_a_row"] == n
    assert scrape(ctl)['synergy_rounds_total{result="failed"}'] == 3


def _stop_after_one():
    import threading

    return threading.Event()


def test_the_table_stale_alert_fires_when_the_real_controller_stops(tmp_path, profiles_path):
    """An enforcing controller runs a round a minute for ten minutes and is scraped after
    each; then it stops (SIGTERM: it expires the table and nothing is scraped any more).
    Its own scrapes, fed to promtool with the shipped rules: no alert while it ran, the
    table-stale alert pending from 12m30s (past max_age_s) and firing a minute later."""
    clock = Clock(0.0)
    ctl = make(tmp_path, profiles_path, clock, FakeReader(snapshot(job(5))))
    scrapes = []
    for minute in range(11):
        clock.t = 60.0 * minute
        ctl.run_round()
        scrapes.append(scrape(ctl))
    ctl.heartbeat.stop(expire=True)
    wanted = ["synergy_hook_table_generated_timestamp_seconds",
              "synergy_hook_table_max_age_seconds", 'synergy_mode{mode="enforce"}']
    series = []
    for name in wanted:
        base, _, labels = name.partition("{")
        labels = labels.rstrip("}")
        values = " ".join(f"{s[name]:g}" for s in scrapes)
        series.append(f"      - series: '{base}{{job=\"synergy\", instance=\"ctl:9778\""
                      f"{', ' + labels if labels else ''}}}'\n        values: '{values} _x20'")
    test = tmp_path / "stop.test.yml"
    test.write_text(f"""rule_files:
  - {RULES / 'synergy.rules.yml'}
evaluation_interval: 30s
tests:
  - interval: 1m
    input_series:
{chr(10).join(series)}
    alert_rule_test:
      - eval_time: 10m
        alertname: SynergyHookTableStale
        exp_alerts: []
      - eval_time: 13m
        alertname: SynergyHookTableStale
        exp_alerts: []
      - eval_time: 14m
        alertname: SynergyHookTableStale
        exp_alerts:
          - exp_labels: {{severity: critical, job: synergy, instance: "ctl:9778"}}
            exp_annotations:
              summary: "synergy's hook table on ctl:9778 is stale"
              description: "{STALE_4M}"
""")
    res = run_promtool("test", "rules", str(test), cwd=tmp_path)
    assert res.returncode == 0 and "SUCCESS" in res.stdout, res.stdout + res.stderr
    assert [s["synergy_hook_table_generated_timestamp_seconds"] for s in scrapes] == \
        [60.0 * m for m in range(11)]


def test_a_controller_whose_rounds_crash_counts_failed_rounds(tmp_path, profiles_path):
    class Broken(FakeReader):
        def snapshot(self):
            raise RuntimeError("a bug")

    ctl = make(tmp_path, profiles_path, Clock(0.0), Broken(snapshot()))
    assert ctl._loop(_stop_after_one(), once=True, on_round=None) == 1
    m = scrape(ctl)
    assert m['synergy_rounds_total{result="failed"}'] == 1
    assert m["synergy_failed_rounds_in_a_row"] == 1
    with pytest.raises(RoundFailed):
        make(tmp_path, profiles_path, Clock(0.0),
             FakeReader(SlurmError("down"))).run_round()
