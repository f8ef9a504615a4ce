"""The generated config of the local cluster (what `synergy dev-cluster up` writes)."""

from __future__ import annotations

from pathlib import Path

from synergy_slurm.devcluster.conf import DevClusterSpec, gres_conf, slurm_conf, write_config


def test_local_config_is_private_and_paper_shaped(tmp_path: Path):
    spec = DevClusterSpec(tmp_path, nodes=4, ctld_port=16817, node_port_base=17001,
                          hostname="box")
    conf = slurm_conf(spec)
    assert "SlurmctldHost=box(127.0.0.1)" in conf and "SlurmctldPort=16817" in conf
    assert f"AuthInfo=socket={tmp_path}/munge/munge.socket.2" in conf
    for i, port in enumerate(range(17001, 17005), start=1):
        assert (f"NodeName=n{i} NodeHostname=box NodeAddr=127.0.0.1 Port={port} CPUs=24 "
                "RealMemory=500000 Gres=gpu:8") in conf
    assert "DefCpuPerGPU=3 DefMemPerGPU=62500" in conf
    assert "JobSubmitPlugins" not in conf
    assert "JobSubmitPlugins=lua" in slurm_conf(DevClusterSpec(tmp_path, hook=True))
    assert all(str(tmp_path) in line for line in conf.splitlines()
               if line.split("=")[0].endswith(("File", "Dir", "Location")))
    assert f"File={tmp_path}/gpu/gpu[0-7]" in gres_conf(spec)
    written = write_config(spec)
    assert [p.name for p in written] == ["slurm.conf", "gres.conf", "cgroup.conf"]
    assert len(list((tmp_path / "gpu").iterdir())) == 8


def test_local_clusters_on_one_host_never_share_a_job_id(tmp_path: Path):
    """task/cgroup names a job's cgroup after its node (n1, ... in every dev cluster) and
    its job id: two clusters side by side (the test passes of scripts/test.sh) must not
    both run a job 5, or one would set the other's memory limit."""
    from synergy_slurm.devcluster.conf import local_spec

    def first(port: int) -> int:
        conf = slurm_conf(local_spec(tmp_path, port=port))
        return int(next(ln.split("=")[1] for ln in conf.splitlines()
                        if ln.startswith("FirstJobId=")))

    assert first(16917) != first(18917)
    assert first(16917) + 100_000 <= first(18917) < 67_043_328     # Slurm's MaxJobId
    assert "FirstJobId=1\n" in slurm_conf(DevClusterSpec(Path("/x"), containers=True))
