"""A site's accounting for the dev cluster: a private MariaDB, slurmdbd, and the
associations a site would have (two accounts, the users, two QOS besides ``normal``).

The database is the host's MariaDB server program with its own data directory, socket and
port under the cluster's state directory; nothing system-wide is started or changed. slurmdbd
is the cluster's own release (from its root when it runs from one): it reaches the database
over TCP on 127.0.0.1, which the release's root shares with the host.
"""

from __future__ import annotations

import logging
import os
import pwd
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import SynergyError
from . import proc
from .conf import DevClusterSpec

log = logging.getLogger(__name__)

DB_PACKAGES = ("mariadb-server",)
DB_PROGRAMS = ("mariadbd", "mariadb-install-db", "mariadb")
# The site every test and the demo see: accounts of two groups, QOS levels for urgency.
ACCOUNTS = ("lab-a", "lab-b")
QOS = {"standard": 0, "urgent": 1000}
DEFAULT_ACCOUNT = ACCOUNTS[0]


class AccountingError(SynergyError, RuntimeError):
    """The database or slurmdbd could not be started or set up; the message says why."""


@dataclass(frozen=True)
class Database:
    """The cluster's MariaDB: where its files are."""

    spec: DevClusterSpec

    @property
    def dir(self) -> Path:
        return self.spec.state_dir / "mariadb"

    @property
    def socket(self) -> Path:
        return self.dir / "mysqld.sock"

    @property
    def pid_file(self) -> Path:
        return self.dir / "mysqld.pid"

    @property
    def log_file(self) -> Path:
        return self.spec.state_dir / "log" / "mariadb.log"


def start_database(spec: DevClusterSpec, programs: dict[str, str], timeout_s: float = 30
                   ) -> str:
    """Create and start the cluster's MariaDB; returns the password of its ``slurm`` user
    (random per start, written only into slurmdbd.conf, mode 0600)."""
    db = Database(spec)
    data = db.dir / "data"
    # Its own temporary directory: a MariaDB starting up deletes every "#sql*" file in
    # its tmpdir, so beside another cluster's (tests run passes side by side) a shared
    # /tmp lost the other's temporary tables mid-install.
    tmp = db.dir / "tmp"
    for path in (data, tmp):
        path.mkdir(parents=True, exist_ok=True)
    user = "mysql" if _has_user("mysql") else "root"
    pw = pwd.getpwnam(user)
    for path in (db.dir, data, tmp):
        os.chown(path, pw.pw_uid, pw.pw_gid)
    _run([programs["mariadb-install-db"], "--no-defaults", f"--user={user}",
          f"--datadir={data}", f"--tmpdir={tmp}", "--auth-root-authentication-method=socket",
          "--skip-test-db"], timeout=120)
    cmd = [programs["mariadbd"], "--no-defaults", f"--user={user}", f"--datadir={data}",
           f"--tmpdir={tmp}",
           f"--socket={db.socket}", f"--port={spec.db_port}", "--bind-address=127.0.0.1",
           f"--pid-file={db.pid_file}", f"--log-error={db.log_file}", "--skip-name-resolve",
           # What slurmdbd asks for (it warns otherwise).
           "--innodb-buffer-pool-size=128M", "--innodb-lock-wait-timeout=900"]
    subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not (db.socket.exists() and db.pid_file.exists()):
        if time.monotonic() > deadline:
            raise AccountingError(f"MariaDB did not start within {timeout_s:.0f} s; see "
                                  f"{db.log_file}")
        time.sleep(0.1)
    password = secrets.token_hex(16)
    _run([programs["mariadb"], "--no-defaults", f"--socket={db.socket}", "-u", "root", "-e",
          f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
          "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"], timeout=30)
    return password


def write_slurmdbd_conf(spec: DevClusterSpec, text: str) -> Path:
    """slurmdbd.conf beside slurm.conf (where slurmdbd looks), readable by root only: it
    holds the database password, and slurmdbd refuses a file others can read."""
    path = spec.etc / "slurmdbd.conf"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def wait_dbd(sacctmgr: str, env: dict[str, str], timeout_s: float = 30) -> None:
    """Until slurmdbd answers sacctmgr."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        res = subprocess.run([sacctmgr, "-n", "-P", "show", "cluster"], env=env,
                              capture_output=True, text=True, timeout=30, check=False)
        if res.returncode == 0:
            return
        last = (res.stderr or res.stdout).strip()
        time.sleep(0.3)
    raise AccountingError(f"slurmdbd did not answer within {timeout_s:.0f} s: {last[:300]}")


def provision(spec: DevClusterSpec, sacctmgr: str, env: dict[str, str]) -> None:
    """The cluster, the QOS, the two accounts and root in both (default the first)."""
    qos_names = ",".join(["normal", *QOS])
    steps = [["add", "cluster", spec.cluster_name],
             ["add", "qos", ",".join(QOS)],
             *(["modify", "qos", "where", f"name={name}", "set", f"priority={prio}"]
               for name, prio in QOS.items()),
             ["add", "account", ",".join(ACCOUNTS), f"cluster={spec.cluster_name}",
              "description=dev cluster group", "organization=synergydev",
              f"qos={qos_names}"]]
    for step in steps:
        _sacctmgr(sacctmgr, env, step)
    add_user(sacctmgr, env, "root", ACCOUNTS)


def add_user(sacctmgr: str, env: dict[str, str], user: str,
             accounts: tuple[str, ...] = ACCOUNTS) -> None:
    """Give ``user`` an association in ``accounts`` (the first is the default), so
    AccountingStorageEnforce=associations lets their jobs in."""
    _sacctmgr(sacctmgr, env, ["add", "user", user, f"account={','.join(accounts)}",
                              f"defaultaccount={accounts[0]}"])


def _sacctmgr(sacctmgr: str, env: dict[str, str], args: list[str]) -> None:
    res = subprocess.run([sacctmgr, "-i", *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    out = (res.stdout + res.stderr).strip()
    # sacctmgr exits 1 with "Nothing new added" when it is already there: that is fine.
    if res.returncode != 0 and "nothing new" not in out.lower() \
            and "already exists" not in out.lower():
        raise AccountingError(f"sacctmgr {' '.join(args[:3])} failed ({res.returncode}): "
                              f"{out[:300]}")


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _run(cmd: list[str], timeout: float) -> None:
    proc.run(cmd, AccountingError, timeout)
