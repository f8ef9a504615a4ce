"""Cluster descriptions: the shipped ones, what the dev cluster writes from them, and
mistakes named."""

from __future__ import annotations

import pytest

from synergy_slurm.core import PerGpu
from synergy_slurm.devcluster.conf import gres_conf, local_spec, slurm_conf
from synergy_slurm.site import DEFAULT_SITE, SiteError, load_site, site_from_dict


def test_paper_is_the_default_and_mixed_has_two_types_and_an_overlap():
    assert load_site("paper") == DEFAULT_SITE
    mixed = load_site("mixed")
    assert [n for n, _ in mixed.nodes] == ["a1", "a2", "h1", "h2"]
    assert mixed.cluster_state("h100").fair == PerGpu(12, 250.0)
    assert [s.name for s in mixed.cluster_state("all").servers] == ["a1", "a2", "h1", "h2"]
    assert mixed.cluster_state().total.gpus == 24
    assert site_from_dict(mixed.to_dict()) == mixed


def test_the_dev_cluster_config_of_a_description(tmp_path):
    spec = local_spec(tmp_path, port=16000, site=load_site("mixed"))
    conf, gres = slurm_conf(spec), gres_conf(spec)
    assert "NodeName=h2 " in conf and "CPUs=96 RealMemory=2000000 Gres=gpu:h100:8" in conf
    assert ("PartitionName=all Nodes=a1,a2,h1,h2 Default=NO MaxTime=INFINITE State=UP "
            "DefCpuPerGPU=8 DefMemPerGPU=64000") in conf
    assert "PartitionName=a100 Nodes=a1,a2 Default=YES" in conf
    assert f"NodeName=a1,a2 Name=gpu Type=a100 File={tmp_path}/gpu/gpu[0-3]" in gres
    assert spec.nodes == 4 and spec.node_names == ["a1", "a2", "h1", "h2"]


@pytest.mark.parametrize("doc, message", [
    ({"nodes": [], "partitions": []}, "at least one"),
    ({"nodes": [{"name": "a", "count": 1, "cpus": 8, "mem_gb": 64, "gpus": 4, "ram": 1}],
      "partitions": []}, "unknown keys ram"),
    ({"nodes": [{"name": "a", "count": 1, "cpus": 2, "mem_gb": 64, "gpus": 4}],
      "partitions": []}, "at least one core per GPU"),
    ({"nodes": [{"name": "a", "count": 1, "cpus": 8, "mem_gb": 64, "gpus": 4}],
      "partitions": [{"name": "p", "nodes": ["b"], "default": True}]}, "unknown node kinds b"),
    ({"nodes": [{"name": "a", "count": 1, "cpus": 8, "mem_gb": 64, "gpus": 4}],
      "partitions": [{"name": "p", "nodes": ["a"]}]}, "exactly one partition"),
    ({"nodes": [{"name": "A!", "count": 1, "cpus": 8, "mem_gb": 64, "gpus": 4}],
      "partitions": []}, "lower-case"),
    ({"nodes": [{"name": "a", "count": 1025, "cpus": 8, "mem_gb": 64, "gpus": 4}],
      "partitions": []}, "count must be"),
    ({"nodes": [{"name": "a", "count": 1000, "cpus": 8, "mem_gb": 64, "gpus": 4},
                {"name": "b", "count": 25, "cpus": 8, "mem_gb": 64, "gpus": 4}],
      "partitions": [{"name": "p", "nodes": ["a", "b"], "default": True}]},
     "at most 1024 nodes in all"),
])
def test_mistakes_are_named(doc, message):
    with pytest.raises(SiteError, match=message):
        site_from_dict(doc)


def test_a_file_that_is_not_toml(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text("[[nodes]\n")
    with pytest.raises(SiteError, match="not TOML"):
        load_site(bad)
    with pytest.raises(SiteError, match=r"no such file, nor a shipped cluster of that "
                                        r"name \(mixed, paper\)"):
        load_site(tmp_path / "missing.toml")
