"""Release detection and what the reader asks each release for (no Slurm needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from synergy_slurm.slurm.reader import SlurmReader
from synergy_slurm.slurm.release import Release

FIX = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("text, want", [("slurm 22.05.8\n", (22, 5, 8)),
                                        ("slurm-wlm 26.05.5", (26, 5, 5)),
                                        ("slurm 24.11.5", (24, 11, 5))])
def test_parse_versions(text, want):
    r = Release.parse(text)
    assert (r.major, r.minor, r.micro) == want and str(r).startswith(text.split()[1][:5])


def test_unparsable_version_is_an_error():
    with pytest.raises(ValueError, match="no Slurm version"):
        Release.parse("scontrol: command not found")


def test_capabilities_by_release():
    old, mid, new = Release(22, 5, 8), Release(24, 11, 5), Release(26, 5, 5)
    assert not old.json_filters and not old.scontrol_json
    assert mid.json_filters and mid.scontrol_json and new.json_filters
    assert Release(23, 2).scontrol_json and not Release(22, 5).json_filters


class RecordedCLI:
    """Answers the reader's commands from recorded output and notes what it was asked."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.calls: list[list[str]] = []

    def run(self, command: str, args, timeout_s=None, input_text=None) -> str:
        self.calls.append([command, *args])
        v = self.version
        if args == ["--version"]:
            return f"slurm {v}\n"
        if command == "squeue":
            return (FIX / f"squeue_{v}.json").read_text()
        if command == "sinfo":
            return (FIX / f"sinfo_{v}.json").read_text()
        if args[:2] == ["show", "nodes"]:
            return (FIX / f"nodes_{v}.json").read_text()
        if args[:2] == ["show", "partition"]:
            return (FIX / f"partitions_{v}.txt").read_text()
        raise AssertionError(f"unexpected {command} {args}")


@pytest.mark.parametrize("version, filtered, nodes_cmd", [
    ("22.05.8", False, ["sinfo", "--json"]),
    ("26.05.5", True, ["scontrol", "show", "nodes", "--json"])])
def test_reader_asks_each_release_what_it_answers(version, filtered, nodes_cmd):
    cli = RecordedCLI(version)
    reader = SlurmReader(cli)  # type: ignore[arg-type]
    snap = reader.snapshot()
    reader.snapshot()
    assert cli.calls.count(["scontrol", "--version"]) == 1          # detected once
    squeue = next(c for c in cli.calls if c[0] == "squeue")
    assert ("-t" in squeue) is filtered
    assert nodes_cmd in cli.calls
    assert snap.version == version and len(snap.nodes) == 4
    assert {n.gpus for n in snap.nodes} == {8} and snap.partitions[0].def_cpu_per_gpu == 3
