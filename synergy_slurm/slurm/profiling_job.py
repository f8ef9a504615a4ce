"""The sbatch options of a profiling job, built once for `synergy profile run --submit`
and the controller's automatic profiling."""

from __future__ import annotations

from ..vocabulary import OPT_OUT_TOKEN

# Slurm cuts nothing itself: a longer --job-name is refused.
MAX_JOB_NAME = 64


def profiling_job_options(key: str, gpus: int, budget_s: float, cpus_per_gpu: int | None = None,
                          gpu_type: str = "") -> list[str]:
    """What every profiling job carries: its name (``synergy-profile-KEY``, cut to what
    Slurm takes), a time limit of the budget plus two minutes, the lowest priority that
    still runs (``--nice=10000``: users' jobs go first), the opt-out token (neither the
    hook nor the controller reshape it: it sets its own cores), its GPUs and cores."""
    opts = [f"--job-name=synergy-profile-{key}"[:MAX_JOB_NAME],
            f"--time={max(1, int(budget_s // 60) + 2)}", "--nice=10000",
            f"--comment={OPT_OUT_TOKEN}",
            f"--gpus={gpu_type}:{gpus}" if gpu_type else f"--gpus={gpus}"]
    if cpus_per_gpu:
        opts.append(f"--cpus-per-gpu={cpus_per_gpu}")
    return opts
