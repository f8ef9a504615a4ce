"""Who Slurm lets see every job: ``PrivateData`` (``scontrol show config``) and the users
with an admin level (``sacctmgr show user``), read-only. The controller's state and the
views of it that ``synergy status`` reads follow the same rule (controller/views.py)."""

from __future__ import annotations

from dataclasses import dataclass

from .commands import SlurmCLI, SlurmError
from .parse import config_flags

# The admin levels that see every job whatever PrivateData says (sacctmgr's words).
SEE_ALL_LEVELS = frozenset({"Operator", "Administrator"})


@dataclass(frozen=True)
class Access:
    """``jobs_private``: PrivateData hides other users' jobs; ``admins``: the users who
    see every job all the same (Slurm operators and administrators)."""

    jobs_private: bool = True
    admins: frozenset[str] = frozenset()


def parse_admins(sacctmgr_users: str) -> frozenset[str]:
    """``sacctmgr -n -P show user format=User,AdminLevel`` -> the operators and admins."""
    out = set()
    for line in sacctmgr_users.splitlines():
        user, _, level = line.strip().partition("|")
        if user and level.strip() in SEE_ALL_LEVELS:
            out.add(user)
    return frozenset(out)


def jobs_private(show_config: str) -> bool:
    """Whether PrivateData hides jobs (``jobs``, or ``all`` on releases that accept it)."""
    flags = {f.lower() for f in config_flags(show_config, "PrivateData")}
    return bool(flags & {"jobs", "all"})


def read_access(cli: SlurmCLI) -> Access:
    """This site's rule; raises SlurmError where slurmctld cannot be read. Without
    accounting (no slurmdbd), nobody but root and SlurmUser is an admin."""
    private = jobs_private(cli.run("scontrol", ["show", "config"]))
    try:
        admins = parse_admins(cli.run("sacctmgr", ["-n", "-P", "show", "user",
                                                   "format=User,AdminLevel"]))
    except SlurmError:
        admins = frozenset()
    return Access(private, admins)
