"""The shipped systemd units (docs/systemd/): hardened, and valid to systemd itself.

Issue 43, item 10: the units lacked CapabilityBoundingSet, MemoryMax, PrivateDevices,
ProtectProc and SystemCallFilter, and the fail-safe ran as root unconfined although a
Slurm operator's rights are all it needs (tests/controller/test_operator_on_slurm.py).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parents[1] / "docs" / "systemd"
HARDENING = ("CapabilityBoundingSet", "MemoryMax", "PrivateDevices", "ProtectProc",
             "SystemCallFilter", "ProtectSystem", "NoNewPrivileges", "PrivateTmp",
             "RestrictAddressFamilies", "SystemCallArchitectures", "LockPersonality")


def service(name: str) -> dict[str, list[str]]:
    """The [Service] section of a unit: key -> every value it is given, in order (systemd
    keys repeat)."""
    out: dict[str, list[str]] = {}
    section = ""
    for raw in (UNITS / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.parametrize("name", ["synergy-controller.service", "synergy-failsafe.service"])
def test_each_service_is_hardened(name):
    svc = service(name)
    missing = [k for k in HARDENING if k not in svc]
    assert not missing, f"{name} lacks {', '.join(missing)}"
    assert svc["ProtectSystem"] == ["strict"] and svc["ProtectProc"] == ["invisible"]
    assert svc["SystemCallFilter"][0] == "@system-service"


def test_the_failsafe_runs_as_an_operator_without_capabilities():
    svc = service("synergy-failsafe.service")
    assert svc["User"] == ["synergy"] and svc["CapabilityBoundingSet"] == [""]
    # It writes nothing: no state directory of its own (it would take /var/lib/synergy
    # from a root controller).
    assert "StateDirectory" not in svc and "ReadWritePaths" not in svc


def test_the_controller_keeps_only_what_automatic_profiling_needs_of_root():
    caps = set(service("synergy-controller.service")["CapabilityBoundingSet"][0].split())
    assert caps == {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH"}


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_the_units(tmp_path):
    """``systemd-analyze verify`` on the units as shipped, with ExecStart pointing at this
    Python (verify checks that the program exists): no error, no warning."""
    for unit in UNITS.glob("synergy-*"):
        text = unit.read_text().replace("/usr/local/bin/synergy", sys.executable)
        (tmp_path / unit.name).write_text(text)
    names = sorted(p.name for p in tmp_path.iterdir())
    res = subprocess.run(["systemd-analyze", "verify", *names], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr


@pytest.mark.skipif(shutil.which("logrotate") is None, reason="needs logrotate")
@pytest.mark.skipif(os.geteuid() != 0, reason="makes a log owned by another user")
def test_a_rotated_audit_log_stays_writable_by_the_controllers_user(tmp_path):
    """The shipped logrotate snippet on a log owned by the controller's service user (the
    guide's User=synergy; `nobody` here): the file it re-creates is that user's, 0640.
    Before, `create 0640 root adm` gave it to root and the controller could not append."""
    log = tmp_path / "audit.jsonl"
    log.write_text('{"action": "release"}\n')
    nobody = pwd.getpwnam("nobody")
    os.chown(log, nobody.pw_uid, nobody.pw_gid)
    log.chmod(0o640)
    conf = tmp_path / "synergy.logrotate"
    conf.write_text((UNITS / "synergy.logrotate").read_text().replace(
        "/var/log/synergy/audit.jsonl", str(log)))
    subprocess.run(["logrotate", "-f", "-s", str(tmp_path / "state"), str(conf)],
                   check=True, capture_output=True, timeout=60)
    assert (tmp_path / "audit.jsonl.1").exists()
    st = log.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (nobody.pw_uid, 0o640)
