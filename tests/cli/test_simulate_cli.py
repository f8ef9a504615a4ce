"""``synergy simulate`` and ``synergy plan`` as a user runs them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.cli.options import default_profiles_path


@pytest.fixture
def run(reference_dir, monkeypatch):
    monkeypatch.setenv("SYNERGY_PROFILES", str(reference_dir / "model_profiles.json"))

    def invoke(*args):
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    return invoke


def test_replay_json_rows(run, reference_dir):
    res = run("simulate", "--trace", str(reference_dir / "static_100job.csv"), "--servers", "4",
              "--static", "--allocator", "proportional,tune-ref", "--reference-speedups",
              "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["allocator"] for r in rows] == ["proportional", "tune-ref"]
    assert set(rows[0]) == {"policy", "allocator", "load", "jobs", "mean_jct_h", "p50_jct_h",
                            "p99_jct_h", "p999_jct_h", "makespan_h", "wall_s"}
    assert rows[0]["makespan_h"] == 15.25 and rows[1]["makespan_h"] == 11.0
    assert rows[0]["jobs"] == 100 and rows[0]["load"] is None


def test_generated_run_writes_csv_plots_and_trace(run, tmp_path):
    out = tmp_path / "out"
    rec = tmp_path / "trace.csv"
    res = run("simulate", "--generate", "philly", "--jobs-per-hour", "1,2", "--servers", "2",
              "--window", "10,59", "--jobs", "80", "--policy", "fifo,las",
              "--allocator", "proportional,tune", "--out", str(out), "--record-trace", str(rec),
              "--format", "csv")
    assert res.exit_code == 0, res.output
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("policy,allocator,load,jobs,mean_jct_h")
    assert len(lines) == 1 + 2 * 2 * 2
    for name in ("jobs.csv", "summary.json", "jct_cdf_load1.png", "jct_cdf_load2.png",
                 "avg_jct_vs_load.png"):
        assert (out / name).stat().st_size > 0, name
    text = rec.read_bytes()
    assert text.count(b"\n") == 80 and b"\r" not in text
    # The recorded trace is exactly what was generated (arrivals to the second, not %g).
    from synergy_slurm.profiles import load_profiles
    from synergy_slurm.sim.runner import Workload
    from synergy_slurm.sim.trace import read_trace

    profiles = load_profiles(default_profiles_path())
    made = list(Workload(count=80, seed=0).stream(profiles, 1.0))
    assert read_trace(rec, profiles) == made
    # Arrivals past a million seconds (%g used to round them by up to 5 s) and fractions.
    from synergy_slurm.sim.trace import TraceJob, write_trace

    odd = [TraceJob(1, "res18", 1234567.0, 10, 1), TraceJob(2, "gnmt", 2345678.25, 10, 2)]
    write_trace(tmp_path / "odd.csv", odd)
    assert read_trace(tmp_path / "odd.csv", profiles) == odd
    # The recorded trace replays.
    again = run("simulate", "--trace", str(rec), "--servers", "2", "--format", "json")
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize("args, message", [
    ((), "exactly one of --trace CSV or --generate philly"),
    (("--generate", "philly", "--policy", "drf"), "unknown policy drf"),
    (("--generate", "philly", "--allocator", "magic"), "unknown allocator magic"),
    (("--generate", "philly", "--split", "50,50"), "three non-negative percentages"),
    (("--generate", "philly", "--window", "9,3"), "FIRST <= LAST"),
    (("--generate", "philly", "--window", "0,99", "--jobs", "50"), "must reach the window"),
    (("--generate", "philly", "--jobs-per-hour", "x"), "comma-separated numbers"),
    (("--trace", "/nonexistent.csv"), "cannot read trace"),
])
def test_bad_options_are_clear_errors(run, args, message):
    res = run("simulate", *args)
    assert res.exit_code != 0
    assert message in res.output


def test_plan_command_compares_allocators(run):
    res = run("plan", "--servers", "2", "--allocator", "proportional,tune,opt",
              "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["allocator"] for r in rows] == ["proportional", "tune", "opt"]
    assert rows[2]["bound"] >= rows[2]["total_speedup"] >= rows[0]["total_speedup"]


def test_progress_off_a_terminal_prints_lines(tmp_path):
    """--progress where stderr is a file (a log, a batch job): a line per tenth, not a
    bar that prints only its label."""
    from click.testing import CliRunner

    from synergy_slurm.cli.main import main

    res = CliRunner().invoke(main, ["simulate", "--generate", "philly", "--jobs-per-hour",
                                    "4", "--jobs", "300", "--window", "100,199",
                                    "--servers", "4", "--allocator", "tune", "--progress"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("simulating:")]
    assert lines[-1].startswith("simulating: 100%") and len(lines) >= 3
