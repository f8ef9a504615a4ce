"""Parity: `synergy hook explain`'s rules and job_submit.lua (under lua5.1) agree on a few
hundred generated sbatch option sets. The same check against the hook inside slurmctld is
in test_hook_on_slurm.py."""

from __future__ import annotations

import time

from synergy_slurm.hook.rules import decide
from synergy_slurm.hook.sbatch_args import submission_from_args
from synergy_slurm.hook.table import TABLE_NAME, HookTable

from .gen import option_sets
from .luahook import job_desc, run_lua


def test_python_rules_and_lua_agree(tmp_path):
    now = int(time.time())
    table = HookTable(generated_at=now, node_cpus=24, node_mem_mb=500000, node_gpus=8,
                      partitions=("gpu",), default_partition="gpu",
                      profiles={"res18": (9, 62500), "gnmt": (1, 20000),
                                "alexnet": (12, 125000)},
                      hold_unknown=True, hold_known=True, no_hold=frozenset({"gnmt"}))
    table.write(tmp_path / TABLE_NAME)
    # Jobs in a reservation (not in the generator: the real-Slurm parity run has none).
    in_resv = [["--gpus=1", "--reservation=r1", "--comment=synergy:profile=res18"],
               ["--gres=gpu:2", "--reservation=r1"]]
    sets = option_sets(400) + in_resv
    subs = [submission_from_args(opts, uid=1000) for opts in sets]
    results, _ = run_lua(tmp_path, [(1000, job_desc(s)) for s in subs])
    assert len(results) == len(subs)
    managed = shaped = 0
    for opts, sub, lua in zip(sets, subs, results, strict=True):
        d = decide(table, sub, now)
        want_c = f"gres:gpu:{d.cpus_per_gpu}" if d.cpus_per_gpu else sub.cpus_per_tres
        want_m = f"gres:gpu:{d.mem_per_gpu_mb}" if d.mem_per_gpu_mb else sub.mem_per_tres
        assert (lua.cpus_per_tres, lua.mem_per_tres) == (want_c, want_m), opts
        assert ("synergy.managed=1" in lua.admin_comment) == d.managed, opts
        assert (lua.priority == "0") == d.hold, opts
        managed += d.managed
        shaped += d.cpus_per_gpu is not None
    assert managed > 100 and shaped > 50   # the generator exercises every branch
    for sub, lua in zip(subs[-len(in_resv):], results[-len(in_resv):], strict=True):
        assert decide(table, sub, now).reason == \
            "not reshaped: jobs in a reservation are not reshaped"
        assert lua.admin_comment == "" and lua.priority == ""
