"""Generated sbatch option sets for the parity tests."""

from __future__ import annotations

import random

KNOWN = ("res18", "gnmt", "alexnet")


def option_sets(n: int, seed: int = 1, typed: bool = True, partitions=("gpu", "cpu"),
                ) -> list[list[str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        opts: list[str] = []
        kind = rng.choice(["gpus", "gpus-per-node", "gres", "gpus-per-task", "none"])
        g = rng.choice([1, 1, 2, 3, 4, 8])
        t = "a100:" if typed and rng.random() < 0.15 else ""
        if kind == "gpus":
            opts.append(f"--gpus={t}{g}")
        elif kind == "gpus-per-node":
            opts.append(f"--gpus-per-node={t}{g}")
        elif kind == "gres":
            opts.append(f"--gres=gpu:{t}{g}")
        elif kind == "gpus-per-task":
            opts += [f"--ntasks={rng.choice([1, 2])}", f"--gpus-per-task={t}{min(g, 4)}"]
        # Per-GPU options without GPUs are sbatch's own error: only with a GPU request.
        if kind != "none" and rng.random() < 0.25:
            opts.append(f"--cpus-per-gpu={rng.randint(1, 3)}")
        mem = rng.random()
        if kind != "none" and mem < 0.15:
            opts.append(f"--mem-per-gpu={rng.choice([1000, 20000, 62500])}")
        elif mem < 0.25:
            opts.append("--mem=10G")
        c = rng.random()
        if c < 0.55:
            opts.append(f"--comment=synergy:profile={rng.choice(KNOWN)}")
        elif c < 0.65:
            opts.append("--comment=synergy:profile=unknownkey")
        elif c < 0.7:
            opts.append("--comment=synergy:off")
        elif c < 0.76:
            # The opt-out is a word of its own: only the first of these opts out.
            opts.append(rng.choice(["--comment=vision synergy:off",
                                    "--comment=synergy:offline synergy:profile=res18",
                                    "--comment=xsynergy:off synergy:profile=gnmt"]))
        if rng.random() < 0.3:
            opts.append(f"--partition={rng.choice(partitions)}")
        own = rng.random()
        if kind != "none" and own < 0.15:
            # sbatch refuses two memory options together: those only where none is yet.
            # (nor --cpus-per-gpu with --cpus-per-task).
            mem_set = any(o.startswith(("--mem=", "--mem-per-gpu=")) for o in opts)
            cpus_set = any(o.startswith("--cpus-per-gpu") for o in opts)
            opts.append(rng.choice(["--ntasks-per-node=2", "--exclusive"]
                                   + ([] if cpus_set else ["-c4", "--cpus-per-task=2"])
                                   + ([] if mem_set else ["--mem-per-cpu=4G", "--mem=0"])))
        shape = rng.random()
        # sbatch itself refuses fewer GPUs (or tasks) than nodes.
        if shape < 0.1 and (kind in ("gpus-per-node", "gres", "none")
                            or (kind == "gpus" and g >= 2)):
            opts.append(f"--nodes={rng.choice([1, 2, '2-4'] if kind != 'gpus' else [1, 2])}")
        elif shape < 0.15:
            opts.append(f"--array=0-{rng.randint(1, 5)}")
        elif shape < 0.2:
            opts += [":", "--gpus=1"]     # a heterogeneous job's second component
        out.append(opts)
    return out
