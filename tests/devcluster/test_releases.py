"""Releases from cached roots, without building one: wrappers, binds, the entry's checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from synergy_slurm.devcluster import releases
from synergy_slurm.devcluster.conf import local_spec, slurm_conf
from synergy_slurm.devcluster.releases import ReleaseError, SlurmInstall


def test_unknown_release_is_refused_with_the_choices(tmp_path):
    with pytest.raises(ReleaseError, match=r"choose from system, 22\.05, 24\.11, 26\.05"):
        releases.resolve("23.02", tmp_path)


def test_wrappers_run_the_roots_commands_through_its_loader(tmp_path):
    root = tmp_path / "roots" / "26.05"
    inst = SlurmInstall("26.05.5", root)
    written = inst.write_wrappers(tmp_path / "bin")
    assert sorted(p.name for p in written) == sorted(releases.CLIENTS)
    text = (tmp_path / "bin" / "squeue").read_text()
    assert text.startswith("#!/bin/sh\n")
    assert (f"exec {root}/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path "
            f"{root}/usr/lib/x86_64-linux-gnu/slurm-wlm:{root}/usr/lib/x86_64-linux-gnu "
            f'{root}/usr/bin/squeue "$@"') in text
    assert SlurmInstall("22.05.8").write_wrappers(tmp_path / "none") == []
    with pytest.raises(ReleaseError, match="characters"):
        SlurmInstall("26.05.5", Path("/tmp/a b")).write_wrappers(tmp_path / "bad")


def test_daemons_start_in_a_private_namespace_inside_the_root(tmp_path):
    inst = SlurmInstall("26.05.5", tmp_path)
    cmd = inst.daemon("/usr/sbin/slurmctld", ["-f", "/x/slurm.conf"], ["/tmp", "/home"])
    assert cmd[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert cmd[-4:] == ["--", "/usr/sbin/slurmctld", "-f", "/x/slurm.conf"]
    assert cmd[cmd.index("--bind") + 1] == "/tmp"
    assert SlurmInstall("22.05.8").daemon("/usr/sbin/slurmd", ["-N", "n1"], []) == [
        "/usr/sbin/slurmd", "-N", "n1"]


def test_the_plugin_dir_is_in_slurm_conf_only_for_a_root(tmp_path):
    spec = local_spec(tmp_path)
    assert "PluginDir" not in slurm_conf(spec)
    from dataclasses import replace
    rooted = replace(spec, plugin_dir=SlurmInstall("26.05.5", tmp_path / "r").plugin_dir)
    assert f"PluginDir={tmp_path}/r/usr/lib/x86_64-linux-gnu/slurm-wlm" in slurm_conf(rooted)


def test_jobs_get_this_python_and_the_shared_directories():
    binds = releases.job_binds(("/tmp/extra-does-not-exist",))
    assert "/tmp" in binds and "/etc/passwd" in binds and sys.prefix in binds
    assert str(Path(releases.__file__).resolve().parents[2]) in binds
    real = str(Path(sys.executable).resolve())
    assert real in binds
    assert "/tmp/extra-does-not-exist" not in binds        # only paths that exist


PYENV_LDD = """\
\tlinux-vdso.so.1 (0x00007ffd5a1f2000)
\tlibpython3.11.so.1.0 => /root/.pyenv/versions/3.11.9/lib/libpython3.11.so.1.0 (0x00007f1)
\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f2)
\tlibc.so.6 => /usr/lib/x86_64-linux-gnu/libc.so.6 (0x00007f3)
\tlibfoo.so.1 => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f4)
"""


def test_a_python_that_links_its_own_libpython_gets_that_directory_bound():
    """A pyenv/conda Python built with --enable-shared needs its lib directory inside the
    root (issue: every demo job died on libpython3.11.so.1.0 in the 26.05 root)."""
    assert releases.library_dirs(PYENV_LDD) == ["/root/.pyenv/versions/3.11.9/lib"]


def _ldd(exe: str) -> dict[str, str]:
    """Library name -> the file ldd resolves it to, for ``exe`` in this environment."""
    out = {}
    for line in subprocess.run(["ldd", exe], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if arrow and rest.startswith("/"):
            out[name] = rest.split(" (")[0]
    return out


def test_this_pythons_libraries_from_outside_the_system_are_found(tmp_path, monkeypatch):
    """The same, for real and for whatever Python runs the suite (Debian's, a venv of
    pyenv's, conda's): the libraries it already finds outside the system's directories
    (a pyenv Python's libpython) are named, and so is a directory of its own that one of its
    libraries is then found in (LD_LIBRARY_PATH), and no other."""
    exe = os.path.realpath(sys.executable)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    found = _ldd(exe)
    outside = list(dict.fromkeys(
        os.path.dirname(os.path.realpath(f)) for f in found.values()
        if not any(os.path.realpath(f).startswith(d + "/")
                   for d in releases.SYSTEM_LIB_DIRS)))
    before = releases.own_libraries(exe)
    assert before == outside
    # A system library it links (libm at least: libpython needs it), copied to a directory
    # of its own that the loader searches first.
    name = next(n for n, f in found.items() if n.startswith(("libm.so", "libz.so"))
                and os.path.dirname(os.path.realpath(f)) not in outside)
    shutil.copy(found[name], tmp_path / name)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    assert _ldd(exe)[name] == str(tmp_path / name)
    after = releases.own_libraries(exe)
    assert str(tmp_path) in after and sorted(after) == sorted([*before, str(tmp_path)])
    assert str(tmp_path) in releases.job_binds()
    monkeypatch.delenv("LD_LIBRARY_PATH")
    assert releases.own_libraries(exe) == before


def test_root_version_is_read_from_the_package_database(tmp_path):
    status = tmp_path / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text("Package: munge\nVersion: 0.5.18-1\n\n"
                      "Package: slurmctld\nStatus: install ok installed\n"
                      "Version: 26.05.5-1\n")
    assert releases.root_version(tmp_path) == "26.05.5"
    status.write_text("Package: munge\nVersion: 0.5.18-1\n")
    with pytest.raises(ReleaseError, match="no slurmctld"):
        releases.root_version(tmp_path)


def test_the_entry_refuses_to_mount_in_the_hosts_namespace(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "synergy_slurm.devcluster.enter",
                           str(tmp_path), "--", "/bin/true"], capture_output=True, text=True)
    assert proc.returncode != 0 and "private mount namespace" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "synergy_slurm.devcluster.enter",
                           str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "put it after --" in proc.stderr
