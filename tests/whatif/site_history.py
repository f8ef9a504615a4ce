"""A history like a real site's, for whatif: a V100 cluster's GPU jobs over six weeks,
converted to a ``sacct -a -X -D -P`` export, whose users chose their own cores per GPU
(1 to 40), with no profile, no usage columns, and waits the export cannot explain (the load
that kept the cluster busy is not in it: the jobs ran on a tenth of the nodes described).

Used by tests/whatif/test_site_history.py and benchmarks/whatif_site.py.
"""

from __future__ import annotations

import random
from datetime import datetime

from synergy_slurm.slurm.sacct import TEXT_FIELDS

# The cluster the admin describes: 40 nodes of 8 V100s, 80 cores, 720 GB; 10 cores and
# 90 GB per GPU by default.
CLUSTER_TOML = """# A V100 site (tests/whatif/site_history.py)
[[nodes]]
name = "v"
count = 40
cpus = 80
mem_gb = 720
gpus = 8
gpu_type = "v100"

[[partitions]]
name = "gpu"
nodes = ["v"]
default = true
def_cpu_per_gpu = 10
def_mem_gb_per_gpu = 90
"""
CORES_PER_GPU = (1, 2, 4, 8, 10, 16, 20, 32, 40)
NAMES = ("python", "bash", "train.sh", "jupyter", "sys/dashboard/sys/jupyter",
         "resnet50-imagenet", "bert-finetune", "wav2vec|ctc", "detectron2", "nerf")
FIELDS = (*TEXT_FIELDS, "Timelimit", "SubmitLine")


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")


def site_history(n: int = 600, seed: int = 1, weeks: float = 6.0) -> str:
    """``n`` GPU jobs (and a tenth as many CPU jobs) as ``sacct -P`` text with a header;
    a few with a submit line, most without (as sacct keeps it only from 23.02)."""
    rng = random.Random(seed)
    t0 = 1_790_000_000.0
    span = weeks * 7 * 86400
    users = [f"user{i:02d}" for i in range(30)]
    rows = ["|".join(FIELDS)]
    for i in range(n + n // 10):
        job_id = 500_000 + i
        submit = t0 + rng.random() * span
        wait = rng.expovariate(1 / (2.0 * 3600))
        gpus = rng.choices((1, 2, 4, 8), weights=(70, 15, 10, 5))[0] if i < n else 0
        cores = rng.choice(CORES_PER_GPU) * max(gpus, 1)
        cores = min(cores, 80)
        mem = (rng.choice((8, 16, 32, 64, 90)) * max(gpus, 1)) * 1000
        run = min(rng.lognormvariate(1.0, 1.0) * 3600, 3 * 86400)
        start, end = submit + wait, submit + wait + run
        state = rng.choices(("COMPLETED", "FAILED", "CANCELLED by 1", "TIMEOUT"),
                            weights=(70, 15, 10, 5))[0]
        node = f"v{rng.randrange(1, 5)}"          # 4 of the 40 nodes: the rest not exported
        gres = f",gres/gpu={gpus}" if gpus else ""
        tres = f"billing={cores},cpu={cores},mem={mem}M,node=1{gres}"
        name = rng.choice(NAMES)
        user = rng.choice(users)
        script = rng.choice(("train.sh", "run_exp.sh", "job.slurm"))
        line = f"sbatch --gpus={gpus} --cpus-per-gpu={cores // max(gpus, 1)} {script}" \
            if gpus and i % 5 == 0 else ""
        rows.append("|".join((str(job_id), user, f"lab{rng.randrange(6)}", "gpu", name, "",
                              state, _ts(submit), _ts(submit), _ts(start), _ts(end), tres,
                              tres, node, "normal", "2-00:00:00", line)))
    return "\n".join(rows) + "\n"
