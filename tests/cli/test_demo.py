"""synergy demo: the job mix, its prediction and its result (the real runs:
test_demo_on_slurm.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from synergy_slurm.core import PerGpu
from synergy_slurm.core.resources import Resources
from synergy_slurm.demo import KINDS, demo_mix
from synergy_slurm.profiles import load_profiles


def test_the_mix_is_seeded_and_shaped_as_documented():
    mix = demo_mix(400, 60.0, seed=3)
    assert mix == demo_mix(400, 60.0, seed=3) and mix != demo_mix(400, 60.0, seed=4)
    kinds = Counter(j.kind for j in mix)
    assert kinds == {"cpu-hungry": 120, "memory-hungry": 80, "insensitive": 200}
    assert Counter(j.gpus for j in mix) == {1: 400}      # one GPU each, as --help says
    # The default mix is the one the demo names, 30/20/50 (largest remainders).
    default = demo_mix(48, 48.0, seed=0)
    assert Counter(j.kind for j in default) == {"cpu-hungry": 14, "memory-hungry": 10,
                                                 "insensitive": 24}
    for j in mix:
        assert j.model in KINDS[j.kind] and 30.0 <= j.seconds <= 90.0


def test_iterations_last_the_asked_time_at_the_proportional_share(profiles_path):
    profiles = load_profiles(profiles_path)
    fair = PerGpu(3, 62.5)
    for j in demo_mix(20, 40.0, seed=1):
        p = profiles[j.model]
        per_iter = p.iter_time_s / p.at(fair.cpus, fair.mem_gb)
        assert j.iterations(p, fair) * per_iter == pytest.approx(j.seconds, rel=0.05,
                                                                 abs=per_iter)


def test_the_prediction_replays_the_same_mix_in_the_controller_model(profiles_path):
    """The simulator's prediction for both phases: each job from its own submission, the
    same controller; CPU-hungry jobs predicted faster with synergy, none slower than its
    proportional length."""
    from synergy_slurm.core import ClusterState
    from synergy_slurm.core.pools import Pool
    from synergy_slurm.demo import phase_result, predict

    profiles = load_profiles(profiles_path)
    mix = demo_mix(12, 30.0, seed=2)
    at = {j.index: 0.5 * j.index for j in mix}
    ctl = {"policy": "fifo", "restart_cost_s": 15.0, "requeue_budget": 2,
           "requeue_min_interval_s": 60.0, "interval_s": 2.0}
    pred = predict(mix, {"proportional": at, "synergy": at}, profiles,
                   (Pool("", ClusterState.uniform(4)),), ctl, lowers_pending=False,
                   sched_s=5.0)
    prop, syn = pred["proportional"], pred["synergy"]
    assert set(prop.jct_s) == set(syn.jct_s) == {j.index for j in mix}
    for j in mix:          # 32 GPUs hold them all: each runs its length, from submission
        assert prop.jct_s[j.index] >= j.seconds
    kind = next(iter(KINDS))          # the CPU-hungry kind
    assert syn.mean_jct(mix, kind) < 0.9 * prop.mean_jct(mix, kind)
    res = phase_result("x", {0: 10.0, 1: 20.0}, {0: 1.0, 1: 4.0})
    assert res.jct_s == {0: 9.0, 1: 16.0} and res.makespan_s == 20.0
    assert res.submitted == {0: 1.0, 1: 4.0}


class ScriptedSqueue:
    """squeue's answers, one per poll (the last repeats): what wait_all reads."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)

    def run(self, tool: str, args: list[str]) -> str:
        assert tool == "squeue" and "-t" in args and "all" in args
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_a_result_only_from_jobs_that_ran(tmp_path):
    """Each job's end is seen with its state (finished jobs stay in squeue -t all for
    MinJobAge); a job that failed, or was requeued and then failed, is reported with its
    id, state and first lines of output, and no figures."""
    from synergy_slurm.demo import Ended, failures, wait_all

    cli = ScriptedSqueue("11|RUNNING|3|cpu=3,mem=62500M|\n12|PENDING|3||\n"
                         "13|RUNNING|6|cpu=6,mem=125G|",
                         "11|COMPLETED|3\n12|REQUEUED|3\n13|FAILED|6",
                         "11|COMPLETED|3\n12|RUNNING|9|cpu=9,mem=62500M|\n13|FAILED|6",
                         "11|COMPLETED|3\n12|COMPLETED|9\n13|FAILED|6")
    timeline: list = []
    ended = wait_all(cli, {11: 0, 12: 1, 13: 2}, t0=0.0, timeout_s=1e12, timeline=timeline)
    # What ran at each poll, by demo index, with the cores and memory (GB) Slurm shows it
    # holding.
    assert [{i: (c, round(m, 2)) for i, c, m in running} for _, running in timeline] == \
        [{0: (3, 61.04), 2: (6, 125.0)}, {}, {1: (9, 61.04)}, {}]
    assert {i: e.state for i, e in ended.items()} == {0: "COMPLETED", 1: "COMPLETED",
                                                      2: "FAILED"}
    (tmp_path / "job2.out").write_text("python3: error while loading shared libraries: "
                                       "libpython3.11.so.1.0\nmore\n")
    said = failures(ended, {11: 0, 12: 1, 13: 2}, tmp_path)
    assert len(said) == 1 and said[0].startswith("job 13 (demo job 2) ended FAILED: python3")
    # A job purged before its end was seen is not taken for a success either.
    gone = failures({0: Ended(5.0, "")}, {11: 0}, tmp_path)
    assert gone == ["job 11 (demo job 0) ended unseen (purged from the queue): (no output)"]


def test_the_timelines_picture_is_written(tmp_path):
    """Both phases side by side, from what Slurm showed running at each poll."""
    from synergy_slurm.demo import PhaseResult, plot_timelines

    mix = demo_mix(4, 20.0, seed=1)
    phases = [PhaseResult(name, 30.0, {j.index: 20.0 for j in mix},
                          [(0.0, ((0, 3, 62.5), (1, 3, 62.5))), (10.0, ((1, 6, 125.0),)),
                           (30.0, ())]) for name in ("proportional", "synergy")]
    path = plot_timelines(mix, phases, tmp_path / "demo.png", Resources(32, 96, 2000.0))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
