"""A site's accounting limits on cores and memory, as ``sacctmgr`` reports them.

Read with ``sacctmgr -n -P show qos|assoc format=...``: the parsable text format, the same
on every release we support (22.05 .. 26.05); ``--json`` for sacctmgr arrived later and
adds nothing we need. Only the cpu and mem TRES matter to synergy (it never changes a job's
GPUs); node, billing and gres limits are ignored. A cluster without accounting has no
limits (sacctmgr fails: the reader returns None and says so once).
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Skipped
from .units import size_mb, tres_items

QOS_FORMAT = "Name,MaxTRES,MaxTRESPU,GrpTRES"
ASSOC_FORMAT = "Cluster,Account,User,Partition,GrpTRES,MaxTRES,ParentName"


@dataclass(frozen=True)
class Tres:
    """Cores and memory (MB) in one limit; None where the limit does not cap it."""

    cpus: int | None = None
    mem_mb: int | None = None

    @property
    def empty(self) -> bool:
        return self.cpus is None and self.mem_mb is None


@dataclass(frozen=True)
class QosLimits:
    name: str
    per_job: Tres = Tres()
    per_user: Tres = Tres()
    group: Tres = Tres()


@dataclass(frozen=True)
class AssocLimits:
    """One association's limits; ``user`` is "" for the account itself (GrpTRES then
    caps all of the account's jobs together, its sub-accounts' included), ``partition``
    "" for every partition; ``parent`` the account above an account's own association
    ("" for a user's, whose parent is its account)."""

    cluster: str
    account: str
    user: str = ""
    partition: str = ""
    group: Tres = Tres()
    per_job: Tres = Tres()
    parent: str = ""


@dataclass(frozen=True)
class SiteLimits:
    qos: tuple[QosLimits, ...] = ()
    assocs: tuple[AssocLimits, ...] = ()
    skipped: tuple[Skipped, ...] = ()

    def qos_named(self, name: str) -> QosLimits | None:
        for q in self.qos:
            if q.name == name:
                return q
        return None

    def accounts_above(self, account: str) -> list[str]:
        """``account`` and the accounts above it, nearest first, to the root (a loop in a
        malformed tree ends the walk)."""
        parents = {a.account: a.parent for a in self.assocs if a.user == "" and a.parent}
        chain = [account]
        while (up := parents.get(chain[-1])) and up not in chain:
            chain.append(up)
        return chain


def parse_tres(text: str) -> Tres:
    """``cpu=8,mem=100G,gres/gpu=4`` -> Tres(8, 102400). Raises ValueError on a malformed
    cpu or mem value (other TRES are not read)."""
    cpus = mem = None
    items = tres_items(text)
    if "cpu" in items:
        if not items["cpu"].isdigit():
            raise ValueError(f"cpu limit {items['cpu']!r} is not a count")
        cpus = int(items["cpu"])
    if "mem" in items:
        mem = int(size_mb(items["mem"]))
    return Tres(cpus, mem)


def parse_qos(text: str) -> tuple[list[QosLimits], list[Skipped]]:
    out, skipped = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = line.split("|")
        if len(f) < 4 or not f[0]:
            skipped.append(Skipped(f"qos line {line[:60]!r}", "expected Name|MaxTRES|"
                                   "MaxTRESPU|GrpTRES"))
            continue
        try:
            out.append(QosLimits(f[0], parse_tres(f[1]), parse_tres(f[2]), parse_tres(f[3])))
        except ValueError as exc:
            skipped.append(Skipped(f"qos {f[0]}", str(exc)))
    return out, skipped


def parse_assocs(text: str) -> tuple[list[AssocLimits], list[Skipped]]:
    out, skipped = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = line.split("|")
        if len(f) < 6 or not f[1]:
            skipped.append(Skipped(f"association line {line[:60]!r}",
                                   "expected Cluster|Account|User|Partition|GrpTRES|MaxTRES"
                                   "|ParentName"))
            continue
        try:
            a = AssocLimits(f[0], f[1], f[2], f[3], parse_tres(f[4]), parse_tres(f[5]),
                            f[6] if len(f) > 6 else "")
        except ValueError as exc:
            skipped.append(Skipped(f"association {f[1]}/{f[2] or '-'}", str(exc)))
            continue
        # Kept: what limits, and every account's link to its parent (limits above it).
        if not (a.group.empty and a.per_job.empty) or (a.user == "" and a.parent):
            out.append(a)
    return out, skipped
