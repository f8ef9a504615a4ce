"""pyslurm on a live Slurm 24.11: synergy run inside the release's root, with pyslurm 24.11.0
built from ../shared/vendor (``synergy dev-cluster venv``), on a cluster with typed GPUs.

Runs where the test cluster's release has that venv in its root (scripts/test.sh builds it
before the tests); skipped elsewhere, saying why.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from synergy_slurm import devcluster
from synergy_slurm.devcluster import inroot, local_spec
from synergy_slurm.devcluster.releases import SlurmInstall
from synergy_slurm.hook.table import TABLE_NAME, HookTable
from synergy_slurm.site import load_site
from synergy_slurm.slurm.reader import SlurmReader

from ..conftest import TEST_SLURM, shared_dir, slot_dir, slot_port, slurm_section
from ..slurm.helpers import cancel_all, submit, wait_file, wait_for

pytestmark = pytest.mark.slurm
PORT = slot_port(16977)
DUMP = Path(__file__).resolve().parents[2] / "scripts" / "record" / "pyslurm_dump.py"
REPORT = 'echo "cpus=$SLURM_CPUS_ON_NODE node=$SLURMD_NODENAME"'
# The jobs the parser's fixtures cover, on the mixed cluster (A100 and H100 nodes).
KINDS = {
    "multinode": ["-N2", "--gpus-per-node=2", "-p", "h100"],
    "uneven": ["--gpus=5", "-N2", "-p", "h100"],
    "pertask": ["-n2", "--gpus-per-task=1"],
    "typed": ["--gres=gpu:a100:1", "--comment=synergy:key=res18"],
    "memnode": ["--gpus=1", "--mem=10G", "--no-requeue"],
    "array": ["--array=0-3", "--gpus=1"],
    "gpus2": ["--gpus=2", "--cpus-per-gpu=3", "--mem-per-gpu=2G"],
    "held": ["--hold", "--gpus=1"],
    "nogpu": ["-c2", "--mem=1G"],
    "typedh": ["-N2", "--gpus-per-node=h100:8", "-p", "h100"],
    "limit": ["-t", "30", "--gpus=1"],
    "memcpu": ["--mem-per-cpu=1G", "-c4"],
}


def pyslurm_ready(spec) -> SlurmInstall:
    info = devcluster.release_info(spec)
    if not info.get("root"):
        pytest.skip("pyslurm runs inside a release's root: the test cluster runs the "
                    "system's Slurm")
    install = SlurmInstall(info["version"], Path(info["root"]))
    if not inroot.venv_ready(install):
        pytest.skip(f"no pyslurm venv in {install.root} (scripts/test.sh builds it; or: "
                    "synergy dev-cluster venv --slurm "
                    f"{install.release} --pyslurm ../shared/vendor/pyslurm-24.11.0.tar.gz)")
    return install


@pytest.fixture(scope="module")
def typed_cluster(slurm_cluster, request):
    """The mixed cluster's nodes (typed GPUs), without accounting, beside the session's."""
    if TEST_SLURM != "24.11":
        pytest.skip("the vendored pyslurm is 24.11.0: it binds Slurm 24.11 only")
    pyslurm_ready(slurm_cluster)
    spec = local_spec(slot_dir("synergy-test-pyslurm"), port=PORT, slurm=TEST_SLURM,
                      binds=(str(shared_dir().resolve()),), site=load_site("mixed"))
    devcluster.down(devcluster.existing_spec(spec.state_dir))
    _, spec = devcluster.up(spec, timeout_s=90)
    yield spec
    devcluster.down(spec)


def test_pyslurm_reads_every_kind_of_job_as_the_json_reader_does(typed_cluster, tmp_path):
    cli = devcluster.slurm_cli(typed_cluster)
    tmp_path.chmod(0o755)
    for name, opts in KINDS.items():
        submit(cli, "sleep 300", f"--job-name={name}", "-o", "/dev/null", *opts, tmp=tmp_path)
    het = tmp_path / "het.sh"
    het.write_text("#!/bin/sh\nsleep 300\n")
    cli.run("sbatch", ["--job-name=het", "-o", "/dev/null", "--gpus=1", ":", "-c1", str(het)])
    time.sleep(3)                      # the scheduler's first pass: some run, some wait
    t0 = time.monotonic()
    done = subprocess.run(inroot.cluster_command(typed_cluster, ["python", str(DUMP)]),
                          capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - t0
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["pyslurm_version"] == "24.11.0"
    by_json, by_pyslurm = doc["json"], doc["pyslurm"]
    assert sorted(by_json["jobs"]) == sorted(by_pyslurm["jobs"])
    names = {j["name"] for j in by_json["jobs"].values()}
    assert set(KINDS) | {"het"} <= names
    states = {j["state"] for j in by_json["jobs"].values()}
    assert {"RUNNING", "PENDING"} <= states
    for jid, left in by_json["jobs"].items():
        right = dict(by_pyslurm["jobs"][jid])
        left = dict(left)
        if left["name"] == "uneven" and left["state"] == "RUNNING":
            # Documented: pyslurm's dictionaries do not say how --gpus=5 split over two
            # nodes; the reader leaves that layout out (the totals agree).
            assert right["alloc"] == [] and sum(a["gpus"] for a in left["alloc"]) == 5
            left.pop("alloc"), right.pop("alloc")
        assert left == right, left["name"]
    # A node's load is read at each reader's own moment (slurmd reports it as it changes):
    # both read it, each its own value.
    def steady(nodes: dict) -> dict:
        return {k: {f: v for f, v in n.items() if f != "load"} for k, n in nodes.items()}

    assert steady(by_json["nodes"]) == steady(by_pyslurm["nodes"])
    assert by_json["partitions"] == by_pyslurm["partitions"]
    assert by_json["skipped"] == by_pyslurm["skipped"] == []
    print(f"\npyslurm parity: {len(by_json['jobs'])} jobs, {len(by_json['nodes'])} nodes, "
          f"field by field, in {seconds:.1f} s (root entered, both readers)")
    cancel_all(cli)


def test_a_controller_round_with_pyslurm_shapes_and_releases(slurm_cluster, slurm_cli,
                                                             tmp_path, profiles_path):
    """The controller run inside the root with ``[slurm] reader = "pyslurm"`` on the session
    cluster: the hook, whose table knows no profile yet, holds both jobs unshaped; the
    round says it reads with pyslurm, shapes each job to its profile (from the profiles
    file) and releases it, and the jobs run with those cores."""
    if TEST_SLURM != "24.11":
        pytest.skip("the vendored pyslurm is 24.11.0: it binds Slurm 24.11 only")
    pyslurm_ready(slurm_cluster)
    cli = slurm_cli
    cancel_all(cli)
    tmp_path.chmod(0o755)
    HookTable(generated_at=int(time.time()), node_cpus=24, node_mem_mb=500000, node_gpus=8,
              partitions=("gpu",), default_partition="gpu", max_age_s=60,
              profiles={}, hold_unknown=True, hold_known=True,
              ).write(slurm_cluster.etc / TABLE_NAME)
    try:
        low = submit(cli, REPORT, "--gpus=1", "--comment=synergy:profile=gnmt",
                     "-o", str(tmp_path / "low"), tmp=tmp_path)
        high = submit(cli, REPORT, "--gpus=1", "--comment=synergy:profile=alexnet",
                      "-o", str(tmp_path / "high"), tmp=tmp_path)
        held = [j.job_id for j in SlurmReader(cli).snapshot().jobs if j.held_by_synergy]
        assert sorted(held) == sorted([low, high])
        cfg = tmp_path / "synergy.toml"
        cfg.write_text(f"""{slurm_section(slurm_cluster)}reader = "pyslurm"
[hook]
dir = "{slurm_cluster.etc}"
state_dir = "{slurm_cluster.etc}"
max_age_s = 60
[profiles]
file = "{profiles_path}"
store = "{tmp_path}/profiles.db"
[controller]
mode = "enforce"
state_db = "{tmp_path}/state.db"
audit_log = "{tmp_path}/audit.jsonl"
[profiling]
auto = false
spool = "{tmp_path}/spool"
""")
        argv = ["python", "-m", "synergy_slurm", "-v", "controller", "run", "--once",
                "--config", str(cfg)]
        done = subprocess.run(inroot.cluster_command(slurm_cluster, argv),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "reading Slurm 24.11.5 with pyslurm 24.11.0" in done.stderr
        for jid in (low, high):
            wait_for(cli, jid, {"COMPLETED"})
        assert "cpus=1 " in wait_file(tmp_path / "low", "cpus=")     # lowered: 3 -> 1
        assert "cpus=12 " in wait_file(tmp_path / "high", "cpus=")   # raised: 3 -> 12
        audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text()
                 .splitlines()]
        acted = {a["job_id"] for a in audit if a.get("action") == "shape-release"}
        assert acted == {low, high}, audit
    finally:
        (slurm_cluster.etc / TABLE_NAME).unlink(missing_ok=True)
        cancel_all(cli)


def test_auto_reads_squeues_text_on_every_release(slurm_cluster, caplog):
    """The default reader, for real, on every release: ``auto`` reads squeue's text and
    says so (pyslurm only when asked for)."""
    import logging

    from synergy_slurm.slurm.reader import TextReader, make_reader

    caplog.set_level(logging.INFO, "synergy_slurm.slurm.reader")
    cli = devcluster.slurm_cli(slurm_cluster)
    reader = make_reader(cli, "auto")
    assert type(reader) is TextReader
    assert "reading Slurm's jobs as squeue's text" in caplog.text
    assert reader.snapshot().nodes
