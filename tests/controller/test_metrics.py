"""The controller's Prometheus endpoint: where it listens."""

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
