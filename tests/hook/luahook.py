"""Running job_submit.lua under Debian's lua5.1 with a mock ``slurm`` table."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from synergy_slurm.hook.rules import Submission

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("lua_driver.lua")


@dataclass(frozen=True)
class LuaResult:
    cpus_per_tres: str
    mem_per_tres: str
    priority: str
    admin_comment: str
    rc: str
    partition: str = ""
    min_cpus: str = ""


def job_desc(sub: Submission) -> dict[str, str]:
    d = {"partition": sub.partition, "comment": sub.comment,
         "tres_per_job": sub.tres_per_job, "tres_per_node": sub.tres_per_node,
         "tres_per_task": sub.tres_per_task, "tres_per_socket": sub.tres_per_socket,
         "cpus_per_tres": sub.cpus_per_tres, "mem_per_tres": sub.mem_per_tres}
    d = {k: v for k, v in d.items() if v}
    if sub.mem_per_node:
        d["pn_min_memory"] = "10240"
    if sub.mem_per_cpu:
        d["min_mem_per_cpu"] = "2048"
    # As slurmctld passes them: NO_VAL16 when not given.
    own = sub.own_shape
    d["cpus_per_task"] = "4" if own == "cpus-per-task" else "65534"
    d["ntasks_per_node"] = "2" if own == "ntasks-per-node" else "65534"
    d["shared"] = "0" if own == "exclusive" else "65534"
    if own == "mem0":
        d["pn_min_memory"] = "0"
    # As slurmctld passes them: NO_VAL when not given.
    d["min_nodes"] = str(sub.min_nodes) if sub.min_nodes > 1 else "4294967294"
    d["het_job_offset"] = "0" if sub.het else "4294967294"
    if sub.reservation:
        d["reservation"] = sub.reservation
    return d


def run_lua(hook_dir: Path, cases: list[tuple[int, dict[str, str]] | str],
            lfs: bool = True) -> tuple[list[LuaResult], str]:
    lua = shutil.which("lua5.1")
    if not lua:
        pytest.skip("needs lua5.1, slurmctld's Lua, to run the hook (Debian: apt-get install "
                    "lua5.1 lua-filesystem; scripts/bootstrap-system.sh installs them)")
    for name in ("synergy.lua", "job_submit.lua"):
        if not (hook_dir / name).exists():
            shutil.copyfile(REPO / "job_submit_hook" / name, hook_dir / name)
    lines = []
    for case in cases:
        if isinstance(case, str):               # a driver directive: "!rewrite NAME"
            lines.append(case)
            continue
        uid, fields = case
        for v in fields.values():
            assert "\t" not in v and "\n" not in v, "the driver's case format has no escapes"
        lines.append("\t".join([str(uid), *(f"{k}={v}" for k, v in fields.items())]))
    cases_file = hook_dir / "cases.tsv"
    cases_file.write_text("\n".join(lines) + "\n")
    env = dict(os.environ, SYNERGY_TEST_NO_LFS="0" if lfs else "1")
    proc = subprocess.run([lua, str(DRIVER), str(hook_dir), str(cases_file)], env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    out = [LuaResult(*(line.split("\t") + [""] * 7)[:7])
           for line in proc.stdout.splitlines()]
    return out, proc.stderr
