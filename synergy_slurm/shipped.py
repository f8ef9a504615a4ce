"""Files shipped with the package: the Lua hook and the job templates beside it, the
paper's per-model profiles inside it (package data).

In a source checkout (or an editable install) they are in the repository; a regular
``pip install`` puts them under ``<prefix>/share/synergy-slurm/`` (pyproject's data-files).
"""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[1]


def shipped_paths(relative: str) -> list[Path]:
    """Where ``relative`` (e.g. ``job_submit_hook/job_submit.lua``) may be, source first."""
    return [SOURCE_ROOT / relative, Path(sys.prefix) / "share" / "synergy-slurm" / relative]


def shipped_file(relative: str) -> Path:
    """The first existing copy of ``relative``, else the source-tree path (for messages)."""
    for path in shipped_paths(relative):
        if path.exists():
            return path
    return SOURCE_ROOT / relative


# The hook: synergy's rules as a Lua module, and the job_submit.lua that runs them alone
# (for a site without its own; one that has one adds a dofile line instead).
HOOK_LUA = "job_submit_hook/job_submit.lua"
HOOK_MODULE = "job_submit_hook/synergy.lua"
# The reference profiles (model_profiles.json shape), as package data: `simulate`, `plan`
# and the demo work from a plain pip install.
SHIPPED_PROFILES = Path(__file__).resolve().parent / "data" / "model_profiles.json"
