#!/usr/bin/env python3
"""Record what pyslurm and the commands' JSON say of the same jobs, for the unit tests.

Run inside a release's root with pyslurm, against a cluster with jobs of every kind
(``synergy dev-cluster exec --dir D -- python scripts/record/record_pyslurm.py``): reads
``squeue --json`` and ``scontrol show nodes --json``, pyslurm's job and node dictionaries,
and ``squeue --json`` again; writes them, when both squeue reads agree, to
tests/slurm/fixtures/pyslurm_<release>.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "tests" / "slurm" / "fixtures"


def sh(*args: str) -> str:
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def main() -> int:
    import pyslurm

    for _ in range(5):
        squeue = sh("squeue", "--json")
        nodes = sh("scontrol", "show", "nodes", "--json")
        jobs_d = pyslurm.job().get()
        nodes_d = pyslurm.node().get()
        again = sh("squeue", "--json")
        if json.loads(squeue)["jobs"] == json.loads(again)["jobs"]:
            break
    else:
        print("the cluster kept changing", file=sys.stderr)
        return 4
    release = json.loads(squeue)["meta"]["slurm"]["release"]
    doc = {"pyslurm": pyslurm.__version__, "release": release,
           "pyslurm_jobs": {str(k): v for k, v in jobs_d.items()},
           "pyslurm_nodes": nodes_d, "squeue": json.loads(squeue),
           "nodes": json.loads(nodes), "partitions": sh("scontrol", "show", "partition", "-o")}
    path = OUT / f"pyslurm_{release}.json"
    path.write_text(json.dumps(doc, default=str, indent=None, separators=(",", ":")))
    print(f"recorded {len(jobs_d)} jobs and {len(nodes_d)} nodes in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
