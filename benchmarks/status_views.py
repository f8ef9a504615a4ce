"""What writing the status views costs a round (controller/views.py): a state with N
managed jobs spread over this machine's users, ``--actions`` recorded actions each, and
the views written as
where PrivateData hides jobs (one file per user, owned by them; needs root) and as where
it does not (all.json public). Prints seconds per write, the median of a few.

    PYTHONPATH=. .venv/bin/python benchmarks/status_views.py --jobs 10000
"""

from __future__ import annotations

import argparse
import pwd
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from synergy_slurm.controller.state import StateStore
from synergy_slurm.controller.views import write_views
from synergy_slurm.slurm.access import Access


def build(where: Path, jobs: int, users: list[str], actions: int) -> StateStore:
    store = StateStore(where / "state.db")
    rid = store.start_round("enforce")
    store.finish_round(rid, duration_s=1.0, managed=jobs, actions=jobs, errors=0)
    store.replace_jobs([{
        "job_id": i, "user": users[i % len(users)], "state": "PENDING",
        "profile_key": "alexnet", "gpus": 1, "cpus_per_gpu": 3, "mem_per_gpu_mb": 62500,
        "planned_cpus": 12, "planned_mem_mb": 125000, "speedup": 2.9, "how": "tune",
        "note": "waiting", "updated": 1.0} for i in range(1, jobs + 1)])
    store.db.execute("BEGIN")
    for i in range(1, jobs + 1):
        for _ in range(actions):
            store.record_action(rid, {"job_id": i, "action": "release", "before": None,
                                      "after": None, "reason": "r"}, users[0], "done")
    store.db.execute("COMMIT")
    return store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--actions", type=int, default=1, help="recorded actions per job")
    args = ap.parse_args()
    users = [p.pw_name for p in pwd.getpwall() if p.pw_uid > 0][:50]
    where = Path(tempfile.mkdtemp(prefix="synergy-views-bench-"))
    try:
        store = build(where, args.jobs, users, args.actions)
        for name, access in (("private", Access(True, frozenset())),
                             ("public", Access(False, frozenset()))):
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                write_views(store, where / "view", access)
                times.append(time.perf_counter() - t)
            print(f"{args.jobs} jobs, {args.actions} actions each, {len(users)} users, {name}: "
                  f"{statistics.median(times):.3f} s per round (median of {args.repeat})")
    finally:
        shutil.rmtree(where)


if __name__ == "__main__":
    main()
