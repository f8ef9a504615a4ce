"""Trace generation statistics for a fixed seed, replay round trips and bad traces."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter

import pytest

from synergy_slurm.sim.jobsets import CLASSES
from synergy_slurm.sim.trace import (
    MULTI_GPU_SIZES,
    MULTI_GPU_WEIGHTS,
    TraceError,
    TraceJob,
    philly_jobs,
    read_trace,
    write_trace,
)

N = 20000


@pytest.fixture(scope="module")
def stream(paper_profiles):
    return list(itertools.islice(philly_jobs(paper_profiles, 9.0, seed=3), N))


def durations(jobs, profiles):
    return [j.iterations * profiles[j.model].iter_time_s for j in jobs]


def test_duration_mixture(stream, paper_profiles):
    d = durations(stream, paper_profiles)
    long = [x for x in d if x > 60 * 10**3 * 1.001]
    short = [x for x in d if x < 60 * 10**3 * 0.999]
    assert len(long) / N == pytest.approx(0.2, abs=0.012)
    assert min(d) >= 60 * 10**1.5 * 0.99 and max(d) <= 60 * 10**4 * 1.01
    # log10(d/60) is uniform on [1.5, 3] for short jobs: mean 2.25, sd 1.5/sqrt(12).
    logs = [math.log10(x / 60) for x in short]
    assert statistics.mean(logs) == pytest.approx(2.25, abs=0.02)
    assert statistics.stdev(logs) == pytest.approx(1.5 / math.sqrt(12), abs=0.02)


def test_poisson_arrivals_at_the_rate(stream):
    gaps = [b.arrival - a.arrival for a, b in itertools.pairwise(stream)]
    # gap = ceil(exponential with mean 400 s): mean about 400.5 s, all whole seconds.
    assert statistics.mean(gaps) == pytest.approx(3600 / 9 + 0.5, rel=0.03)
    assert all(g == int(g) and g >= 0 for g in gaps)
    assert statistics.stdev(gaps) == pytest.approx(400, rel=0.05)


def test_class_split_and_round_robin_models(stream):
    cls_of = {m: c for c, ms in CLASSES.items() for m in ms}
    counts = Counter(cls_of[j.model] for j in stream)
    assert counts["image"] / N == pytest.approx(0.20, abs=0.012)
    assert counts["language"] / N == pytest.approx(0.70, abs=0.012)
    assert counts["speech"] / N == pytest.approx(0.10, abs=0.012)
    lang = [j.model for j in stream if cls_of[j.model] == "language"][:6]
    assert lang == ["gnmt", "transformer", "lstm"] * 2


def test_same_seed_same_trace_and_multi_gpu_sizes(paper_profiles):
    a = list(itertools.islice(philly_jobs(paper_profiles, 6, multi_gpu=True, seed=5), 5000))
    b = list(itertools.islice(philly_jobs(paper_profiles, 6, multi_gpu=True, seed=5), 5000))
    assert a == b
    sizes = Counter(j.gpus for j in a)
    for g, w in zip(MULTI_GPU_SIZES, MULTI_GPU_WEIGHTS, strict=True):
        assert sizes[g] / 5000 == pytest.approx(w, abs=0.02)
    c = list(itertools.islice(philly_jobs(paper_profiles, 6, multi_gpu=True, seed=6), 50))
    assert c != a[:50]


def test_replay_round_trip(tmp_path, stream, paper_profiles):
    path = tmp_path / "t.csv"
    write_trace(path, stream[:300])
    assert read_trace(path, paper_profiles) == stream[:300]


def test_reference_traces_load(reference_dir, paper_profiles):
    assert len(read_trace(reference_dir / "static_100job.csv", paper_profiles)) == 100
    multi = read_trace(reference_dir / "multigpu_8job.csv", paper_profiles)
    assert [j.gpus for j in multi] == [4, 1, 2, 1, 4, 2, 4, 4]


@pytest.mark.parametrize("text, match", [
    ("1,gnmt,0,10\n", "expected job_id,model"),
    ("1,gnmt,zero,10,1\n", ":1:"),
    ("1,gnmt,0,10,1\n1,gnmt,0,10,1\n", "duplicate job id 1"),
    ("1,gnmt,0,10,0\n", "must be >= 1"),
    ("1,bert,0,10,1\n", "no profile for model 'bert'"),
    ("\n\n", "no jobs"),
])
def test_bad_traces_are_clear_errors(tmp_path, paper_profiles, text, match):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TraceError, match=match):
        read_trace(path, paper_profiles)


def test_missing_trace_file(tmp_path):
    with pytest.raises(TraceError, match="cannot read trace"):
        read_trace(tmp_path / "nope.csv")
    assert TraceJob(1, "x", 0, 1, 1).gpus == 1
