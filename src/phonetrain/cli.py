"""The ``phonetrain`` console script: one click group, one subcommand per concept.

Each subcommand is a thin wrapper; the work lives in the module it names.
"""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="phonetrain")
def main() -> None:
    """phonetrain: measure DNN training on phone GPUs and CPUs (see README.md)."""


if __name__ == "__main__":
    main()
