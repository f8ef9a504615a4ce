"""Run inside a release's root (``synergy dev-cluster exec``): read the cluster with both
readers, back to back, and print both snapshots as one JSON document.

The JSON reader is read before and after pyslurm's; the test uses a round where the two
JSON reads agree (nothing started or ended in between).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from synergy_slurm.slurm.commands import SlurmCLI
from synergy_slurm.slurm.reader import PyslurmReader, SlurmReader, make_reader


def as_dict(snap) -> dict:
    return {"jobs": {str(j.job_id): dataclasses.asdict(j) for j in snap.jobs},
            "nodes": {n.name: dataclasses.asdict(n) for n in snap.nodes},
            "partitions": [dataclasses.asdict(p) for p in snap.partitions],
            "skipped": [dataclasses.asdict(s) for s in snap.skipped], "version": snap.version}


def main() -> int:
    cli = SlurmCLI(os.environ["SLURM_CONF"], 30.0)
    auto = make_reader(cli, "pyslurm")
    if not isinstance(auto, PyslurmReader):
        print("reader = pyslurm did not give pyslurm's reader", file=sys.stderr)
        return 3
    json_reader = SlurmReader(cli)
    for _ in range(5):
        before = as_dict(json_reader.snapshot())
        mine = as_dict(auto.snapshot())
        after = as_dict(json_reader.snapshot())
        if before == after:
            break
    else:
        print("the cluster kept changing between reads", file=sys.stderr)
        return 4
    import pyslurm

    json.dump({"json": before, "pyslurm": mine, "pyslurm_version": pyslurm.__version__},
              sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
