"""Click commands for phones: ``phonetrain devices`` and ``phonetrain virtual-device``.

Registered on the main group in :mod:`phonetrain.cli`; the work lives in
:mod:`phonetrain.devices.discovery` and :mod:`phonetrain.devices.virtual`.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from pathlib import Path

import click

from phonetrain.devices.base import TransportError
from phonetrain.errors import PhonetrainError


@click.command("devices")
@click.option("--write", is_flag=True,
              help="Push a runner to each online device, run 'runner info' there and write "
                   "conf/device/<name>.yaml.")
@click.option("--conf", "conf_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("conf"), show_default=True, help="Config tree to write into.")
@click.option("--adb-host", default="127.0.0.1", show_default=True, help="adb server host.")
@click.option("--adb-port", type=click.IntRange(1, 65535), default=None,
              help="adb server port [default: $ANDROID_ADB_SERVER_PORT or 5037].")
@click.option("--name", "names", multiple=True, metavar="SERIAL=NAME",
              callback=lambda ctx, param, value: serial_names(value),
              help="Config name for a serial (default: from the model).")
@click.option("--build-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where runners are built [default: a temporary folder].")
def devices(write: bool, conf_dir: Path, adb_host: str, adb_port: int | None,
            names: dict[str, str], build_dir: Path | None) -> None:
    """List adb devices (serial, state, model, SoC, ABI, Android version)."""
    try:
        from phonetrain.devices import discovery   # adbutils: $ANDROID_ADB_SERVER_PORT checked
        rows = discovery.list_devices(adb_host, adb_port)
    except TransportError as exc:
        raise click.ClickException(str(exc)) from exc
    if not rows:
        click.echo("no adb devices: plug a phone in with USB debugging enabled, or "
                   "'phonetrain adb connect HOST:PORT' for a network device")
        return
    click.echo(f"{'serial':24} {'state':13} {'model':22} {'soc':12} {'abi':12} android")
    for r in rows:
        f = r.facts
        click.echo(f"{r.serial:24} {r.state:13} {f.get('model', '-'):22} {r.soc or '-':12} "
                   f"{f.get('abi', '-'):12} {f.get('android_version', '-')}")
        if r.hint:
            click.echo(f"  -> {r.hint}")
    if write:
        _write_configs(rows, conf_dir, adb_host, written_port(adb_port), names, build_dir)


def serial_names(values: tuple[str, ...]) -> dict[str, str]:
    """``--name SERIAL=NAME`` options as {serial: name}. Raises :class:`click.BadParameter`
    for one without ``=``, with an empty side, or whose NAME is not a config name (letters,
    digits, ``_`` and ``-``: it becomes ``conf/device/<NAME>.yaml`` and the device id in the
    results' paths)."""
    from phonetrain.config import NAME_RE
    out = {}
    for v in values:
        serial, eq, name = v.partition("=")
        if not (eq and serial.strip() and NAME_RE.match(name)):
            raise click.BadParameter(
                f"{v!r} is not SERIAL=NAME; write e.g. --name R58M123ABC=pixel_7 (the serial "
                "as 'phonetrain devices' lists it; NAME of letters, digits, '_' and '-', as "
                "it becomes conf/device/NAME.yaml)", param_hint="--name")
        out[serial.strip()] = name
    return out


def written_port(adb_port: int | None) -> int | None:
    """The ``adb_port`` a written config gets: the port this command talked to when
    ``--adb-port`` or ``$ANDROID_ADB_SERVER_PORT`` chose it (so the config does not depend on
    the variable being set again), else None (the default local server, 5037)."""
    env = os.environ.get("ANDROID_ADB_SERVER_PORT", "").strip()
    return adb_port or (int(env) if env.isdigit() else None)


def _write_configs(rows, conf_dir, adb_host, adb_port, names, build_dir) -> None:
    from phonetrain.cli.info import vulkan_lines
    from phonetrain.devices import discovery, toolchains

    failed, used = [], set()
    build_root = Path(build_dir or tempfile.mkdtemp(prefix="phonetrain-devices-"))
    for r in (r for r in rows if r.state == "device"):
        try:
            name = names.get(r.serial) or _free_name(conf_dir, r, adb_host, adb_port, used)
            used.add(name)
            tc_name = discovery.ABI_TOOLCHAIN.get(r.facts.get("abi", ""), "host")
            runner = toolchains.build_runner_for({"name": name, "toolchain": tc_name},
                                                 build_root / tc_name)
            info = _probe(r.serial, runner, adb_host, adb_port)
            cfg = discovery.device_config(name, r, adb_host, adb_port, info)
            path, notes, written = discovery.write_config(conf_dir, cfg,
                                                          discovery.vulkan_comment(info))
        except PhonetrainError as exc:
            failed.append(r.serial)
            click.echo(f"{r.serial}: not written: {exc}", err=True)
            continue
        for note in notes:
            click.echo(f"{r.serial}: {path}: {note}", err=True)
        for line in vulkan_lines(info):
            click.echo(f"{r.serial}: {line}")
        done = "wrote" if written else "left unchanged (already up to date)"
        click.echo(f"{r.serial}: {done} {path} (GPU {cfg['facts']['gpu'] or 'none'}); add it "
                   f"to a sweep with: snakemake --cores 2 all --config "
                   f"'overrides=[\"sweep.devices=[host,{name}]\"]'")
    if failed:
        raise click.ClickException(f"no config written for {', '.join(failed)}")


def _free_name(conf_dir: Path, row, adb_host: str, adb_port: int | None,
               used: set[str]) -> str:
    """A config name for a phone named by its model: the model's name, unless this run
    already used it or ``conf/device/<name>.yaml`` belongs to another device; then the model
    plus the serial (two phones of one model)."""
    from phonetrain.devices import discovery

    name = discovery.config_name(row.facts, row.serial)
    probe = {"serial": row.serial, "adb_host": None if adb_host in ("127.0.0.1", "localhost")
             else adb_host, "adb_port": adb_port}
    existing = discovery.read_config(conf_dir, name)
    if name in used or (existing is not None and not discovery.same_device(existing, probe)):
        name = f"{name}_{discovery.config_name({}, row.serial)}"
    return name


def _probe(serial: str, runner: Path, adb_host: str, adb_port: int | None) -> dict:
    """Push ``runner`` to the phone and return what ``runner info`` prints there."""
    from phonetrain.devices.adb import AdbTransport
    from phonetrain.runner import Runner

    r = Runner(AdbTransport(serial, serial, adb_host, adb_port), timeout_s=120)
    r.push_runner(runner)
    return r.info()


@click.command("virtual-device")
@click.option("--port", type=click.IntRange(1, 65535), required=True,
              help="TCP port (outside 5555-5585, which adb treats as emulators).")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Sandbox folder standing for /data/local/tmp.")
@click.option("--props", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="getprop values (JSON or YAML mapping).")
@click.option("--sysfs", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Folder standing for /sys (fake sensors).")
@click.option("--drop-after-bytes", type=int, default=None,
              help="Fault: drop the connection after N received bytes.")
@click.option("--fail-push", default=None, metavar="GLOB",
              help="Fault: sync pushes to matching device paths fail.")
@click.option("--hang", default=None, metavar="REGEX",
              help="Fault: shell commands matching REGEX hang until stopped.")
@click.option("--crash", default=None, metavar="REGEX",
              help="Fault: shell commands matching REGEX die of SIGSEGV.")
@click.option("--hide", default=None, metavar="GLOB",
              help="Fault: matching device paths look absent to sync (a missing output).")
@click.option("--no-parent-dirs", is_flag=True,
              help="Fault: sync pushes into a folder that does not exist fail.")
@click.option("--drop-on", default=None, metavar="REGEX",
              help="Fault: drop the connection once a shell command matching REGEX runs.")
@click.option("--storage-full", is_flag=True,
              help="Fault: the phone's storage is full (sync pushes meet ENOSPC).")
@click.option("--short-recv", default=None, metavar="GLOB",
              help="Fault: sync pulls of matching device paths send half the file.")
@click.option("--fail-recv", default=None, metavar="GLOB",
              help="Fault: sync pulls of matching device paths fail (no such file).")
def virtual_device(port, root, props, sysfs, drop_after_bytes, fail_push, hang, crash,
                   hide, no_parent_dirs, drop_on, storage_full, short_recv, fail_recv) -> None:
    """Serve a virtual phone (device side of ADB) until interrupted; then run
    'phonetrain adb connect 127.0.0.1:PORT'."""
    from phonetrain.devices.virtual import Faults, VirtualDevice, load_props

    if 5555 <= port <= 5585:
        raise click.BadParameter("adb treats ports 5555-5585 as emulators; pick another",
                                 param_hint="--port")
    try:
        vd = VirtualDevice(root, port, load_props(props),
                           Faults(drop_after_bytes, fail_push, hang, crash, hide, no_parent_dirs,
                                  storage_full, drop_on, short_recv, fail_recv),
                           sysfs_root=sysfs)
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"virtual device on {vd.serial}, sandbox {vd.root}; "
               f"connect with: phonetrain adb connect {vd.serial}", err=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    vd.start()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        vd.stop()


@click.command("adb", context_settings={"ignore_unknown_options": True,
                                        "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def adb_command(args: tuple[str, ...]) -> None:
    """Run adb with ARGS: the adb binary that ships with the adbutils wheel, the one the study
    uses (no system adb needed), on the same server ($ANDROID_ADB_SERVER_PORT or 5037; adb's
    own -H HOST -P PORT before the command pick another, e.g. a phone's own server). E.g. `phonetrain adb devices`, `phonetrain adb connect 127.0.0.1:7100`, `phonetrain adb
    reconnect`, `phonetrain adb kill-server`."""
    import subprocess
    import sys

    try:   # the adb server's port variable, which adbutils and adb read: named when junk
        from phonetrain.devices.adb import adbutils, default_port
        default_port()
    except PhonetrainError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        adb = adbutils.adb_path()
    except Exception as exc:  # adbutils raises its own errors when the binary is missing
        raise click.ClickException(f"adbutils has no adb binary for this platform: {exc}; "
                                   "install Android's platform-tools and use its adb") from exc
    sys.exit(subprocess.call([adb, *args]))
