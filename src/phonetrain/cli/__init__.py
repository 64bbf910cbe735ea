"""The ``phonetrain`` console script: one click group, one subcommand per concept.

Each subcommand is a thin wrapper; the work lives in the module it names.
"""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="phonetrain")
def main() -> None:
    """phonetrain: measure DNN training on phone GPUs and CPUs (see README.md)."""


def _register_phone_commands() -> None:
    from phonetrain.cli.devices import devices, virtual_device  # engineer E: adb, issue 5

    main.add_command(devices)
    main.add_command(virtual_device)


_register_phone_commands()


def _register_workflow_commands() -> None:
    from phonetrain.experiment import run_command  # engineer D1: one experiment, issue 4

    main.add_command(run_command)


_register_workflow_commands()


def _register_runner_commands() -> None:
    from phonetrain.cli.info import info_command  # engineer A: the runner, issue 2

    main.add_command(info_command)


_register_runner_commands()


def _register_results_commands() -> None:
    from phonetrain.cli.results import (aggregate_command, report_command,  # engineer D2
                                        trace_command)

    main.add_command(aggregate_command)
    main.add_command(report_command)
    main.add_command(trace_command)


_register_results_commands()

if __name__ == "__main__":
    main()
