"""``python -m synergy_slurm ...`` is ``synergy ...`` (where the entry point is not
installed, e.g. inside a dev cluster's root: ``synergy dev-cluster exec``)."""

from .cli.main import main

main(prog_name="synergy")
