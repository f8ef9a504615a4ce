"""Running the dev cluster's programs (apt-get, mmdebstrap, mariadb, the daemons, Slurm's
commands): one place that turns a missing program, a timeout or a failure into the
caller's own error class, with the program's last words in the message."""

from __future__ import annotations

import subprocess


def run(cmd: list[str], error: type[Exception], timeout: float = 30,
        env: dict[str, str] | None = None, check: bool = True) -> str:
    """``cmd``'s standard output; ``error`` when it cannot run, times out or (with
    ``check``) exits non-zero."""
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise error(f"{cmd[0]}: {exc}") from None
    except subprocess.TimeoutExpired:
        raise error(f"{' '.join(cmd[:3])} timed out after {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        raise error(f"{' '.join(cmd[:4])} failed ({proc.returncode}): "
                    f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    return proc.stdout
