"""The controller's Prometheus endpoint and audit log: where they go, and rotation."""

from __future__ import annotations

import pytest


def test_metrics_listen_where_the_config_says():
    import socket
    import urllib.request

    from synergy_slurm.config import ConfigError, config_from_dict
    from synergy_slurm.controller.metrics import Metrics

    with pytest.raises(ConfigError, match="metrics_address"):
        config_from_dict({"controller": {"metrics_address": "everywhere"}})
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    m = Metrics()
    m.rounds.labels("ok").inc()
    m.serve(port, "127.0.0.2")
    body = urllib.request.urlopen(f"http://127.0.0.2:{port}/metrics", timeout=5).read()
    assert b'synergy_rounds_total{result="ok"} 1.0' in body


def test_the_audit_log_goes_on_in_a_new_file_after_logrotate_moves_it(tmp_path):
    """docs/systemd/synergy.logrotate rotates by renaming: the next line starts a new
    file, and no line is lost or written to the rotated one."""
    import json

    from synergy_slurm.controller.audit import AuditLog

    log = AuditLog(tmp_path / "audit.jsonl")
    action = {"job_id": 1, "action": "release", "before": None, "after": None, "reason": "x"}
    log.write(1, "enforce", action, "alice", "ok")
    (tmp_path / "audit.jsonl").rename(tmp_path / "audit.jsonl.1")
    log.write(2, "enforce", {**action, "job_id": 2}, "bob", "ok")
    old = [json.loads(x) for x in (tmp_path / "audit.jsonl.1").read_text().splitlines()]
    new = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [r["job_id"] for r in old] == [1] and [r["job_id"] for r in new] == [2]
