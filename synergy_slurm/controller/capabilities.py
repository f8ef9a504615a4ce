"""What the controller may do on this Slurm, worked out once from the release, the site's
slurm.conf and the config, never learnt from an error in the middle of a round.

Computed at the first round that can read Slurm and kept; ``Controller.refresh`` (SIGHUP
to ``synergy controller run``) works it out again, e.g. after an admin set
``PrologFlags=Contain``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..slurm.release import Release


@dataclass(frozen=True)
class Capabilities:
    release: Release | None
    # Lowering a pending job's cores takes effect (26.05): known profiles start unheld.
    lowers_pending: bool
    # Running jobs' memory is lowered in place to what they need; "" or why not.
    no_shrink: str

    @property
    def shrinks_running(self) -> bool:
        return not self.no_shrink

    def describe(self) -> str:
        lowering = ("honours lowering a scheduled job: known profiles start unheld, jobs "
                    "planned smaller are lowered" if self.lowers_pending else
                    "ignores lowering a scheduled job: known profiles are held until shaped, "
                    "scheduled jobs only raised")
        shrink = ("running jobs' memory lowered in place to what their profiles need, once "
                  "measured and never below their peak use" if self.shrinks_running else
                  f"running jobs' memory left as is: {self.no_shrink}")
        return f"Slurm {self.release}: {lowering}; {shrink}"


# Until Slurm can be read: change nothing Slurm might ignore or refuse.
UNKNOWN = Capabilities(None, False, "the Slurm release is not known yet")


def capabilities(release: Release, shrink_running_memory: bool, contains_jobs: bool
                 ) -> Capabilities:
    """``contains_jobs``: slurm.conf's PrologFlags has Contain (every job gets the extern
    step Slurm needs to lower a running job's memory)."""
    if not shrink_running_memory:
        no_shrink = "shrink_running_memory = false in the config"
    elif not release.lowers_running_memory:
        no_shrink = f"Slurm {release} cannot lower a running job's memory (26.05 can)"
    elif not contains_jobs:
        no_shrink = ("Slurm lowers a running job's memory only for jobs with an extern step: "
                     "set PrologFlags=Contain in slurm.conf (jobs started after it qualify) "
                     "and send the controller SIGHUP")
    else:
        no_shrink = ""
    return Capabilities(release, release.lowers_pending, no_shrink)
