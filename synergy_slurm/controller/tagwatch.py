"""Noticing that the hook does not see the table the controller keeps.

The hook tags every GPU job it looks at in a managed partition (``synergy.managed=`` in
admin_comment) while its table is fresh. A job the controller manages that was submitted
while the controller kept the table fresh, and arrived without that tag, went past a hook
that found no table: it is not installed, slurm.conf lacks ``JobSubmitPlugins=lua``, or its
job_submit.lua reads the table somewhere else (an older ``chain()`` line). The jobs then run
as submitted and nothing else would say so. Counted per new job: each tagged job resets the
count, so one job slipping past during a table change is not an alarm, and several in a
row are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..slurm.model import SlurmJob

# Jobs submitted this soon after the table became fresh may have met the hook's cached view
# (it re-reads the table at most every 5 s, REFRESH_S in synergy.lua).
GRACE_S = 11.0
# Untagged new jobs in a row that make it a finding (log, status, metric, alert).
UNTAGGED_MIN = 2
MEMORY = 10_000           # job ids remembered as already counted


@dataclass
class TagWatch:
    untagged: list[int] = field(default_factory=list)   # in a row, since the last tagged
    _seen: dict[int, None] = field(default_factory=dict)

    def round(self, managed: Sequence[SlurmJob], fresh_since: float | None) -> list[int]:
        """Count the managed jobs submitted ``GRACE_S`` after ``fresh_since`` (None: the
        controller keeps no fresh table, nothing to expect) that were not counted yet.
        Returns the untagged new jobs in a row (oldest first)."""
        if fresh_since is None:
            self.untagged.clear()
            return []
        new = sorted((j for j in managed if j.job_id not in self._seen
                      and j.submit_time > fresh_since + GRACE_S),
                     key=lambda j: (j.submit_time, j.job_id))
        for j in new:
            self._seen[j.job_id] = None
            if "managed" in j.tags:
                self.untagged.clear()
            else:
                self.untagged.append(j.job_id)
        while len(self._seen) > MEMORY:
            del self._seen[next(iter(self._seen))]
        return list(self.untagged)

    @property
    def blind(self) -> bool:
        return len(self.untagged) >= UNTAGGED_MIN
