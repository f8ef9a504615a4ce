"""``synergy``: the admin's command (planning, simulation; more subcommands join later)."""

from __future__ import annotations

import logging

import click

from .config_cmd import config
from .controller_cmd import controller, status_cmd
from .demo_cmd import demo_cmd
from .devcluster_cmd import dev_cluster
from .errors import BoundaryGroup
from .hook_cmd import hook
from .plan_cmd import plan_cmd
from .profile_cmd import profile
from .simulate_cmd import simulate_cmd
from .whatif_cmd import whatif_cmd


@click.group(cls=BoundaryGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog="Exit codes: 0 done; 1 the work failed (Slurm refused or failed, a "
                    "round failed); 2 bad input (options, config, files); errors are one "
                    "line on stderr.")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="synergy-slurm")
def main(verbose: int) -> None:
    """Resource-sensitive scheduling of GPU training jobs on Slurm (Synergy, OSDI 2022).

    Synergy gives CPU- and memory-hungry training jobs more than their GPU-proportional
    share of cores and memory, and insensitive jobs less, without ever running a job slower
    than its proportional share would.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


main.add_command(plan_cmd)
main.add_command(simulate_cmd)
main.add_command(whatif_cmd)
main.add_command(dev_cluster)
main.add_command(hook)
main.add_command(controller)
main.add_command(status_cmd)
main.add_command(profile)
main.add_command(demo_cmd)
main.add_command(config)


if __name__ == "__main__":
    main()
