"""Random job sets that fill a cluster: what OPT-gap checks and planning benchmarks use."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence

from ..core import JobSpec, Profile

# The paper's classes (SYNERGY.md): image, language, speech.
CLASSES: dict[str, tuple[str, ...]] = {
    "image": ("alexnet", "res18", "res50", "mobilenet", "shufflenet"),
    "language": ("gnmt", "transformer", "lstm"),
    "speech": ("m5", "deepspeech"),
}


def models_in_turn(rng: random.Random, classes: Mapping[str, Sequence[str]],
                   weights: Sequence[float]) -> Iterator[tuple[str, str]]:
    """Endless (class, model) picks: each class drawn by ``weights``, the models of a class
    in turn (a mix that holds every model of a class alike)."""
    names = list(classes)
    turn = dict.fromkeys(names, 0)
    while True:
        cls = rng.choices(names, weights=weights)[0]
        yield cls, classes[cls][turn[cls] % len(classes[cls])]
        turn[cls] += 1


def pick_model(rng: random.Random, profiles: Mapping[str, Profile],
               split: Sequence[float] | None) -> Profile:
    """A model uniformly over all profiles, or by class split (image, language, speech)."""
    if split is None:
        return profiles[rng.choice(sorted(profiles))]
    cls = rng.choices(list(CLASSES), weights=list(split))[0]
    names = [m for m in CLASSES[cls] if m in profiles] or sorted(profiles)
    return profiles[rng.choice(names)]


def full_cluster_jobs(rng: random.Random, profiles: Mapping[str, Profile], gpus: int,
                      sizes: Sequence[int] = (1,), split: Sequence[float] | None = None,
                      overfill: float = 1.0) -> list[JobSpec]:
    """Jobs with GPU counts from ``sizes`` until they ask for ``overfill`` x ``gpus`` GPUs."""
    jobs: list[JobSpec] = []
    asked = 0
    while asked < gpus * overfill:
        g = rng.choice(list(sizes))
        prof = pick_model(rng, profiles, split)
        dur = 60 * 10 ** rng.uniform(1.5, 4)
        jobs.append(JobSpec(len(jobs), g, submitted=float(len(jobs)), duration_s=dur,
                            remaining_s=dur, profile=prof, profile_key=prof.key))
        asked += g
    return jobs
