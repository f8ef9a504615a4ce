"""A Python that links its own libpython (as pyenv, conda or a module system's do) runs the
demo's jobs on every release, its library directory bound into a release's root.

Found by a user: from a pyenv venv, every job of ``synergy demo --slurm 26.05`` died at
once with "libpython3.11.so.1.0: cannot open shared object file" inside the root, and the
demo counted them as done. The interpreter here is built the way those are: a small
launcher calling ``Py_BytesMain``, linked against a copy of this Python's libpython (and
its non-libc libraries) in a ``lib`` directory beside it, found through its rpath, in a
directory outside every path the root binds wholesale (/tmp, /home).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from ..conftest import TEST_SLURM, slot_port

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
LAUNCHER = "#include <Python.h>\nint main(int c, char **v) { return Py_BytesMain(c, v); }\n"


def _why_not() -> str:
    if shutil.which("gcc") is None or shutil.which("ldd") is None:
        return "gcc and ldd are needed to build the test's Python"
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    lib = Path(sysconfig.get_config_var("LIBDIR") or "") / (
        sysconfig.get_config_var("LDLIBRARY") or "")
    if not include.exists() or not lib.name.endswith(".so") or not lib.exists():
        return f"this Python has no shared libpython and headers ({include}, {lib})"
    if os.geteuid() != 0:
        return "the test's Python goes under /opt (root)"
    return ""


def _own_python(top: Path) -> Path:
    """A venv of a launcher that finds libpython in ``top/lib`` only; the venv sees this
    checkout and the running venv's packages through a .pth file."""
    (top / "bin").mkdir(parents=True)
    (top / "lib").mkdir()
    libname = sysconfig.get_config_var("INSTSONAME")                 # libpython3.11.so.1.0
    ldd = subprocess.run(["ldd", str(Path(sysconfig.get_config_var("LIBDIR")) / libname)],
                         capture_output=True, text=True, check=True).stdout
    for line in ldd.splitlines():
        _, _, rest = line.partition("=>")
        path = rest.strip().split(" (")[0]
        if path.startswith("/") and not Path(path).name.startswith(("libc.", "libm.")):
            shutil.copy(path, top / "lib" / Path(path).name)
    shutil.copy(Path(sysconfig.get_config_var("LIBDIR")) / libname, top / "lib" / libname)
    (top / "lib" / "libpython.so").symlink_to(libname)
    src = top / "launch.c"
    src.write_text(LAUNCHER)
    exe = top / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run(["gcc", "-O1", f"-I{sysconfig.get_paths()['include']}", str(src), "-o",
                    str(exe), f"-L{top / 'lib'}", "-lpython", "-Wl,-rpath,$ORIGIN/../lib",
                    "-Wl,--disable-new-dtags"], check=True, capture_output=True)
    top.chmod(0o755)
    venv = top / "venv"
    subprocess.run([str(exe), "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "synergy-test.pth").write_text(
        f"{REPO}\n{sysconfig.get_paths()['purelib']}\n")
    # The demo submits with the synergy-sbatch beside its interpreter, as pip would install it.
    sbatch = venv / "bin" / "synergy-sbatch"
    sbatch.write_text(f"#!{venv / 'bin' / 'python'}\n"
                      "from synergy_slurm.cli.sbatch_cmd import main\nmain()\n")
    sbatch.chmod(0o755)
    return venv / "bin" / "python"


def test_a_python_with_its_own_libpython_runs_the_demos_jobs(slurm_cluster, profiles_path):
    why = _why_not()
    if why:
        pytest.skip(why)
    top = Path(tempfile.mkdtemp(prefix="synergy-test-python-", dir="/opt"))
    demo_dir = Path(tempfile.mkdtemp(prefix="synergy-demo-ownpy-", dir="/tmp"))
    demo_dir.chmod(0o755)
    try:
        python = _own_python(top)
        ldd = subprocess.run(["ldd", os.path.realpath(python)], capture_output=True,
                             text=True, check=True).stdout
        assert f"{top}/bin/../lib/" in ldd, ldd               # libpython from its own lib
        env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
        res = subprocess.run(
            [str(python), "-m", "synergy_slurm.cli.main", "demo", "--dir", str(demo_dir),
             "--port", str(slot_port(16717)), "--profiles", str(profiles_path),
             "--slurm", TEST_SLURM,
             "--jobs", "4", "--mean-s", "10", "--seed", "1", "--format", "json"],
            capture_output=True, text=True, env=env, timeout=600, check=False)
        assert res.returncode == 0, res.stderr[-3000:]
        out = json.loads(res.stdout.strip().splitlines()[-1])
        # Every job ran (the demo gives figures only then) for about its length.
        assert out["proportional_makespan_s"] > 10, out
    finally:
        shutil.rmtree(demo_dir, ignore_errors=True)
        shutil.rmtree(top, ignore_errors=True)
