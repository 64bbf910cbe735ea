"""The ``phonetrain`` console script: one click group, one subcommand per concept.

Each subcommand is a thin wrapper: the work lives in the module it calls. ``study``: ``run``
(one experiment), ``aggregate``, ``report``, ``compare``, ``trace``; ``check``: ``check``;
``stale``: ``stale``, ``refresh``; ``devices``: ``devices``, ``virtual-device``, ``adb`` (the
bundled adb); ``info``: this host's OpenCL devices.
"""

from __future__ import annotations

import click

from phonetrain.cli import check, devices, info, stale, study


class _Group(click.Group):
    """The command group; an operating-system error that reaches it (a results folder that
    is read-only, a file where a folder is expected, a full disk) becomes one line naming the
    path, not a traceback; it names the ``--results`` option (``results_dir``) only for a
    command that takes it."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except OSError as e:
            where = e.filename if e.filename is not None else "a file"
            cmd = self.get_command(ctx, ctx.invoked_subcommand or "")
            takes = cmd is not None and any(p.name == "results" for p in cmd.params)
            option = " (results_dir, --results)" if takes else ""
            raise click.ClickException(
                f"{where}: {e.strerror or e}; check that the path{option} is a folder you can "
                "write to, with free space") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="phonetrain")
def main() -> None:
    """phonetrain: measure DNN training on phone GPUs and CPUs (see README.md)."""


for command in (study.run_command, study.aggregate_command, study.report_command,
                study.compare_command, study.trace_command, check.check_command,
                stale.stale_command,
                stale.refresh_command, devices.devices, devices.virtual_device,
                devices.adb_command,
                info.info_command):
    main.add_command(command)
