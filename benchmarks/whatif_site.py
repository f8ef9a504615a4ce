#!/usr/bin/env python3
"""synergy whatif on a history like a real site's (tests/whatif/site_history.py): several
hundred GPU jobs whose users set their own cores per GPU (1-40), no profiles, no usage,
an export that lacks the load that made them wait.

Prints what an admin reads first and the figures the issue asks for: the synergy replay's
CPU and memory use against the plain replay's (equal within 2%: synergy changes nothing
for jobs it has no profile for), the headline and the forecast (both 1.00x), the warnings,
and the wall time of the whole command (target: under 60 s). Last line: one JSON object.

    python benchmarks/whatif_site.py [--jobs 2400] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synergy_slurm.cli.main import main
from tests.whatif.site_history import CLUSTER_TOML, site_history


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2400)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        hist, cluster = Path(d) / "history.txt", Path(d) / "v100.toml"
        hist.write_text(site_history(args.jobs, args.seed))
        cluster.write_text(CLUSTER_TOML)
        start = time.perf_counter()
        res = CliRunner().invoke(main, ["whatif", "--from", str(hist), "--cluster",
                                        str(cluster), "--format", "json"])
        wall = time.perf_counter() - start
    if res.exit_code:
        sys.exit(res.output)
    doc = json.loads(res.output.strip().splitlines()[-1])
    u = doc["utilisation"]
    out = {"jobs": doc["replayed"], "wall_s": round(wall, 2), "target_s": 60,
           "cpu_synergy_over_plain": round(u["synergy"]["cpu"] / u["plain"]["cpu"], 4),
           "mem_synergy_over_plain": round(u["synergy"]["mem"] / u["plain"]["mem"], 4),
           "headline_jct_mean": doc["headline"]["jct_mean"],
           "forecast_expected": doc["forecast"]["expected"],
           "warnings": [w["what"] for w in doc["warnings"]]}
    for w in out["warnings"]:
        print(f"warning: {w}")
    print(json.dumps(out))


if __name__ == "__main__":
    main_()
