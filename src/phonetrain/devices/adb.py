"""The ``adb`` transport: a phone (or the virtual device) reached through an adb server.

- Server: adbutils' client; by default the adb server on 127.0.0.1:5037 (or
  ``ANDROID_ADB_SERVER_PORT``), started from adbutils' bundled ``adb`` binary when nothing
  listens there; or the user's server at ``adb_host:adb_port`` (a configured port, on this
  host or another: never started, "no adb server at HOST:PORT" when nothing listens).
  Commands in hints name the device's own server (``phonetrain adb -P PORT ...``).
- Push: incremental by content hash. The device computes ``sha256sum`` of the files already
  under the target (toybox has it since Android 6); files whose hash matches are skipped, the
  others are sent with sync SEND and hashed again on the device to confirm they arrived whole.
  Hashing on the device, not a manifest, means a file changed or truncated there (a push
  dropped halfway) is never mistaken for current.
- Run: ``shell,v2:`` (exit status and stderr in their own packets) under a wall-clock
  deadline; on expiry the stream is closed, which makes adbd kill the command. Devices without
  ``shell_v2`` run the command with its stdout, stderr and exit status redirected into files
  that are then read with sync: nothing parses output that an early exit could cut short.
- Pull: into a temporary sibling folder over one sync connection (a LIST per folder, then
  the files' RECV requests pipelined a window ahead of the replies), every file's size
  checked against the device's listing, every expected file checked present and non-empty,
  then renamed into place.
- Facts and readings: getprop, sysfs clocks/temperatures/battery (docs/device-sensors.md).
"""

from __future__ import annotations

import itertools
import os
import posixpath
import re
import shlex
import shutil
import socket
import stat
import struct
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from phonetrain.devices.base import (CommandResult, TransportError, TransportTimeout,
                                     on_this_host)
from phonetrain.devices.locks import DeviceLock, HostLock, PhoneLock
from phonetrain.io import make_temp_dir, sha256_file

DEVICE_ROOT = "/data/local/tmp/phonetrain"
SYNC_CHUNK_BYTES = 64 * 1024  # SYNC.TXT: a DATA chunk holds at most 64 KiB
RECV_WINDOW = 32  # sync RECV requests sent ahead of the replies read (a pull of a folder)
DEFAULT_ADB_PORT = 5037
ADB_PORT_ENV = "ANDROID_ADB_SERVER_PORT"   # adb's own variable: the default server's port
FACT_PROPS = {  # fact name -> getprop key
    "model": "ro.product.model",
    "manufacturer": "ro.product.manufacturer",
    "soc_model": "ro.soc.model",
    "soc_manufacturer": "ro.soc.manufacturer",
    "board_platform": "ro.board.platform",
    "hardware": "ro.hardware",
    "android_version": "ro.build.version.release",
    "sdk": "ro.build.version.sdk",
    "abi": "ro.product.cpu.abi",
}
# One shell script prints ``key=raw value`` for every readable sensor; unreadable ones are
# silently absent. Paths and units are documented in docs/device-sensors.md.
READINGS_SH = r"""
r() { v=$(cat "$2" 2>/dev/null) && [ -n "$v" ] && echo "$1=$v"; }
for z in /sys/class/thermal/thermal_zone*; do
  [ -d "$z" ] || continue; t=$(cat "$z/type" 2>/dev/null | tr -c 'A-Za-z0-9_\n-' _)
  r "thermal_mc.${z##*/}.${t:-unknown}" "$z/temp"
done
for c in /sys/devices/system/cpu/cpu[0-9]*; do r "cpufreq_khz.${c##*/}" "$c/cpufreq/scaling_cur_freq"; done
r adreno_clock_hz /sys/class/kgsl/kgsl-3d0/gpuclk
r adreno_busy_pct /sys/class/kgsl/kgsl-3d0/gpu_busy_percentage
r adreno_temp_mc /sys/class/kgsl/kgsl-3d0/temp
for d in /sys/class/misc/mali0/device/devfreq/*; do r mali_clock_hz "$d/cur_freq"; done
r mali_utilization /sys/class/misc/mali0/device/utilization
for d in /sys/class/devfreq/*gpu* /sys/class/devfreq/*mali*; do r "devfreq_hz.${d##*/}" "$d/cur_freq"; done
r battery_temp_dc /sys/class/power_supply/battery/temp
r battery_capacity_pct /sys/class/power_supply/battery/capacity
r battery_current_ua /sys/class/power_supply/battery/current_now
r battery_voltage_uv /sys/class/power_supply/battery/voltage_now
r battery_status /sys/class/power_supply/battery/status
for s in usb ac wireless dc; do r "charger_online.$s" "/sys/class/power_supply/$s/online"; done
true
"""


@dataclass
class Cooldown:
    """Wait before a measurement until the hottest sensor is at most ``threshold_c`` (deg C),
    polling every ``poll_s`` seconds, for at most ``limit_s`` seconds (then measure anyway and
    record that the limit was hit)."""

    threshold_c: float = 45.0
    limit_s: float = 120.0
    poll_s: float = 5.0


def default_port() -> int:
    """The default adb server's port: ``$ANDROID_ADB_SERVER_PORT`` (adb's own variable) when
    set, else :data:`DEFAULT_ADB_PORT`. Raises :class:`TransportError` naming the variable when
    it is set to something that is not a TCP port (1..65535, RFC 793), empty included: adb
    and adbutils would not start on it either."""
    raw = os.environ.get(ADB_PORT_ENV)
    if raw is None:
        return DEFAULT_ADB_PORT
    if raw.strip().isdigit() and 1 <= int(raw) <= 65535:
        return int(raw)
    raise TransportError(f"environment variable {ADB_PORT_ENV} is {raw!r}, not a TCP port "
                         "(1..65535)", f"set it to the port of your adb server, or unset it "
                         f"for the default server on port {DEFAULT_ADB_PORT}")


# adbutils makes its default client when imported, reading $ANDROID_ADB_SERVER_PORT with int():
# a junk value is named here first (TransportError) instead of a ValueError from the import.
default_port()
import adbutils  # noqa: E402


def server_client(host: str, port: int) -> adbutils.AdbClient:
    """adbutils' client of the adb server at ``host:port``."""
    return adbutils.AdbClient(host=host, port=port)


def _local_host(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1")


def ensure_server(host: str, port: int, may_start: bool = False) -> None:
    """Check that an adb server listens at ``host:port``; start adbutils' bundled server there
    only when ``may_start`` (the default local server: no ``adb_port`` configured) and nothing
    listens. A port a config names is never started: a stray empty server there would hide
    the user's own server (or take the port an SSH tunnel needs).

    Raises TransportError ("adb server unreachable at HOST:PORT: no adb server at ...") with
    what to do when nothing listens and the server may not be started."""
    try:
        socket.create_connection((host, port), timeout=2).close()
        return
    except OSError:
        pass
    at = f"{host}:{port}"
    if not (may_start and _local_host(host)):
        raise TransportError(f"adb server unreachable at {at}: no adb server at {at} "
                             "(nothing listens on that port)", server_hint(host, port))
    subprocess.run([adbutils.adb_path(), "-P", str(port), "start-server"], check=False,
                   capture_output=True, timeout=30)


def server_hint(host: str, port: int) -> str:
    """What to do when no adb server listens at ``host:port`` (a configured server)."""
    if not _local_host(host):
        return (f"start it on {host} with 'phonetrain adb kill-server; phonetrain adb -a -P "
                f"{port} server nodaemon' (listening on all interfaces), or fix "
                "device.adb_host/adb_port")
    return (f"start it ('phonetrain adb -P {port} start-server' for phones on this host), or "
            f"open the SSH tunnel to the phone's host first ('ssh -N -L {port}:127.0.0.1:5037 "
            "PHONE_HOST', docs/scaling.md \"Driving phones on several hosts\"), or fix "
            "device.adb_host/adb_port; phonetrain starts only the default local server")


def adb_command(host: str, port: int, *args: str) -> str:
    """A ``phonetrain adb`` command line that talks to the server at ``host:port`` (adb's own
    global options ``-H``/``-P``, before the command)."""
    server = ([] if _local_host(host) else ["-H", host]) + ["-P", str(port)]
    return shlex.join(["phonetrain", "adb", *server, *args])


def storage_full(reason: str) -> bool:
    """Whether a device's error text is ENOSPC ("No space left on device", as adbd and
    toybox spell strerror(ENOSPC))."""
    return "no space left on device" in reason.lower()


def parse_readings(raw: dict[str, str]) -> dict[str, float]:
    """Convert raw sysfs values to named readings with units in the names.

    thermal zones: millidegrees (or degrees when < 1000) -> ``temp_c.<zone>.<type>``; CPU
    kHz -> ``cpu_freq_mhz.<cpu>``; Adreno Hz -> ``gpu_freq_mhz``; ``gpu_busy_pct``; battery
    decidegrees -> ``battery_temp_c``; battery status text -> ``battery_discharging`` (1.0
    for ``Discharging``, else 0.0: charging, full or not charging, all on external power);
    a charger's ``online`` -> ``charger_online.<usb|ac|wireless|dc>``. Unparseable values are
    dropped."""
    out: dict[str, float] = {}
    for key, text in raw.items():
        if key == "battery_status":
            out["battery_discharging"] = float(text.strip() == "Discharging")
            continue
        m = re.search(r"-?\d+(\.\d+)?", text)
        if m is None:
            continue
        v = float(m.group())
        if key.startswith("thermal_mc."):
            c = v / 1000.0 if abs(v) >= 1000 else v
            if -40.0 <= c <= 150.0:  # drop sentinel values such as -273 or 0xffff
                out["temp_c." + key.split(".", 1)[1]] = c
        elif key.startswith("cpufreq_khz."):
            out["cpu_freq_mhz." + key.split(".", 1)[1]] = v / 1000.0
        elif key in ("adreno_clock_hz", "mali_clock_hz") or key.startswith("devfreq_hz."):
            name = "gpu_freq_mhz" if not key.startswith("devfreq_hz.") else \
                "devfreq_mhz." + key.split(".", 1)[1]
            out[name] = v / 1e6
        elif key in ("adreno_busy_pct", "mali_utilization"):
            out["gpu_busy_pct"] = v
        elif key == "adreno_temp_mc":
            out["gpu_temp_c"] = v / 1000.0 if abs(v) >= 1000 else v
        elif key == "battery_temp_dc":
            out["battery_temp_c"] = v / 10.0
        elif key in ("battery_capacity_pct", "battery_current_ua", "battery_voltage_uv") or \
                key.startswith("charger_online."):
            out[key] = v
    return out


def hottest_c(readings: dict[str, float]) -> float | None:
    """Highest temperature among thermal zones, GPU and battery (deg C), or None."""
    temps = [v for k, v in readings.items() if k.startswith("temp_c.") or k.endswith("temp_c")]
    return max(temps) if temps else None


class AdbTransport:
    """A device behind an adb server; implements :class:`phonetrain.devices.base.Transport`.

    name: device config name (used in messages); serial: adb serial (``phonetrain adb devices``);
    adb_host/adb_port: the adb server; root: staging root on the device.
    Every failure raises :class:`TransportError` naming the device and what to try.
    """

    streams_stderr = False  # run() returns stderr when the command ends

    def __init__(self, name: str, serial: str, adb_host: str = "127.0.0.1",
                 adb_port: int | None = None, root: str = DEVICE_ROOT,
                 cooldown: Cooldown | None = None):
        self.name, self.serial, self.root = name, serial, root.rstrip("/")
        self.adb_host = adb_host or "127.0.0.1"
        self.default_server = adb_port is None  # the one server phonetrain may start
        self.adb_port = int(adb_port) if adb_port else default_port()
        self.cooldown_policy = cooldown or Cooldown()
        self._client = adbutils.AdbClient(host=self.adb_host, port=self.adb_port)
        self._device: adbutils.AdbDevice | None = None
        self._features: set[str] | None = None
        self._identity: str | None = None

    @classmethod
    def from_config(cls, device: Mapping[str, Any], stage_root: Path, *,
                    echo_stderr: bool = True) -> "AdbTransport":
        """(:class:`~phonetrain.devices.base.Transport`) the phone of ``device``'s serial
        through the adb server at ``adb_host``:``adb_port``; ``stage_root`` is unused (the root
        is on the phone). Raises TransportError when the serial is empty."""
        if not device.get("serial"):
            raise TransportError(f"conf/device/{device['name']}.yaml: key 'serial' is empty",
                                 "set it to the phone's serial from 'phonetrain devices'")
        return cls(device["name"], device["serial"], adb_host=device.get("adb_host") or
                   "127.0.0.1", adb_port=device.get("adb_port"))

    @staticmethod
    def is_this_host(device: Mapping[str, Any]) -> bool:
        """Trait (:class:`~phonetrain.devices.base.Transport`): a phone is never this host,
        even a virtual one on it (its facts are the phone's)."""
        return False

    @staticmethod
    def shares_host_cpu(device: Mapping[str, Any]) -> bool:
        """Trait (:class:`~phonetrain.devices.base.Transport`): whether the device behind
        ``device``'s serial runs on this host's CPU -- an emulator (``emulator-<port>``) or a
        network device at this host's own address (``phonetrain virtual-device``:
        ``127.0.0.1:<port>``) of an adb server on this host. A phone on USB or at another
        address computes on its own CPU."""
        serial = str(device.get("serial") or "")
        if not on_this_host(device.get("adb_host")):
            return False   # that server's emulators and loopback devices are on its host
        if serial.startswith("emulator-"):
            return True
        host, sep, port = serial.rpartition(":")
        return bool(sep) and port.isdigit() and on_this_host(host)

    # -- connection ------------------------------------------------------------------------
    def _where(self) -> str:
        return f"device '{self.name}' (adb serial {self.serial} on {self.adb_host}:{self.adb_port})"

    def _fail(self, what: str, exc: BaseException | str, hint: str = "",
              cls: type[TransportError] = TransportError) -> TransportError:
        hint = hint or (f"check the cable and '{self.adb('devices')}'; for a network device "
                        f"run '{self.adb('connect', self.serial)}'")
        return cls(f"{self._where()}: {what}: {exc}", hint)

    def adb(self, *args: str) -> str:
        """``phonetrain adb ARGS`` on this device's own server (see :func:`adb_command`)."""
        return adb_command(self.adb_host, self.adb_port, *args)

    def device(self) -> adbutils.AdbDevice:
        """The adbutils device, after checking that it is online (state ``device``)."""
        if self._device is not None:
            return self._device
        try:
            ensure_server(self.adb_host, self.adb_port, may_start=self.default_server)
        except TransportError as exc:
            raise TransportError(f"{self._where()}: {exc.message}", exc.hint) from None
        try:
            states = {info.serial: info.state for info in self._client.list()}
        except (adbutils.AdbError, OSError) as exc:
            raise self._fail(f"adb server unreachable at {self.adb_host}:{self.adb_port}", exc,
                             server_hint(self.adb_host, self.adb_port)) from exc
        state = states.get(self.serial)
        if state != "device":
            raise self._fail("not available", f"state {state or 'absent'}",
                             state_hint(state, self.serial, self.adb_host, self.adb_port))
        self._device = self._client.device(self.serial)
        return self._device

    def features(self) -> set[str]:
        if self._features is None:
            try:
                self._features = set(self.device().get_features().split(","))
            except (adbutils.AdbError, OSError) as exc:
                raise self._fail("features query failed", exc) from exc
        return self._features

    def identity(self) -> str:
        """The phone's own identity, whatever server or serial spelling reaches it: its
        ``ro.serialno``, else (a phone that reports none) its adb serial on the server's
        resolved address. Raises TransportError when the phone cannot be asked."""
        if self._identity is None:
            got = self.shell("getprop ro.serialno", timeout_s=30).stdout.strip()
            if not got:
                try:
                    host = socket.gethostbyname(self.adb_host)
                except OSError:
                    host = self.adb_host
                got = f"{host}-{self.adb_port}-{self.serial}"
            self._identity = got
        return self._identity

    def lock(self) -> DeviceLock:
        """The locks serializing measurements on this phone (:mod:`phonetrain.devices.locks`):
        this host's, keyed by :meth:`identity`, in ``$PHONETRAIN_LOCK_DIR``, then the one held
        on the phone itself, which every workflow on every host that reaches it takes."""
        key = re.sub(r"[^A-Za-z0-9_.-]", "_", f"adb-{self.identity()}")
        return DeviceLock(self.name, HostLock(self.name, key), PhoneLock(self.name, self.shell))

    # -- run -------------------------------------------------------------------------------
    def run(self, argv: list[str], *, timeout_s: float,
            env: dict[str, str] | None = None) -> CommandResult:
        """Run ``argv`` in the staging root with ``env`` added; see :class:`Transport`. Raises
        TransportError on a timeout (the command is stopped) or a lost connection."""
        assign = [f"{k}={v}" for k, v in (env or {}).items()]
        command = shlex.join(["env", *assign, *argv]) if assign else shlex.join(argv)
        return self.shell(f"cd {shlex.quote(self.root)} && {command}", timeout_s)

    def shell(self, command: str, timeout_s: float) -> CommandResult:
        """Run a shell command line on the device (shell v2 when available)."""
        if "shell_v2" in self.features():
            return self._shell_v2(command, timeout_s)
        return self._shell_files(command, timeout_s)

    def _shell_v2(self, command: str, timeout_s: float) -> CommandResult:
        start = time.monotonic()
        deadline = start + timeout_s
        out, err, code = bytearray(), bytearray(), None
        try:
            conn = self.device().open_transport(timeout=max(timeout_s, 1.0))
        except (adbutils.AdbError, OSError) as exc:
            raise self._fail("cannot open a shell", exc) from exc
        try:
            conn.send_command("shell,v2:" + command)
            conn.check_okay()
            while code is None:
                ident, length = struct.unpack("<BI", _recv_until(conn.conn, 5, deadline))
                data = _recv_until(conn.conn, length, deadline)
                if ident == 1:
                    out += data
                elif ident == 2:
                    err += data
                elif ident == 3:
                    code = data[0] if data else 255
        except TimeoutError as exc:
            raise self._fail(f"command timed out after {timeout_s:g} s and was stopped",
                             command[:200], "raise the timeout or look for a hung runner "
                             "(cool the phone, check the OpenCL driver)",
                             TransportTimeout) from exc
        except (EOFError, adbutils.AdbError, OSError) as exc:
            raise self._fail("connection lost while running a command", exc) from exc
        finally:
            conn.close()
        return CommandResult(code, out.decode("utf-8", "replace"),
                             err.decode("utf-8", "replace"), time.monotonic() - start)

    def _shell_files(self, command: str, timeout_s: float) -> CommandResult:
        """Fallback for devices without shell_v2: outputs and exit status go to files."""
        start = time.monotonic()
        tag = f"{self.root}/.cmd/{uuid.uuid4().hex}"
        wrapped = (f"mkdir -p {self.root}/.cmd && ( {command} ) >{tag}.out 2>{tag}.err; "
                   f"echo $? >{tag}.rc.tmp && mv {tag}.rc.tmp {tag}.rc")
        try:
            self.device().shell(wrapped, timeout=timeout_s)
            sync = self.device().sync
            if self.stat(f"{tag}.rc")[1] == 0:
                raise self._fail("command did not finish", command[:200])
            code = int(sync.read_text(f"{tag}.rc").strip())
            out, err = sync.read_text(f"{tag}.out"), sync.read_text(f"{tag}.err")
            self.device().shell(f"rm -f {tag}.*", timeout=30)
        except adbutils.AdbTimeout as exc:
            raise self._fail(f"command timed out after {timeout_s:g} s", command[:200],
                             cls=TransportTimeout) from exc
        except (adbutils.AdbError, OSError, EOFError, ValueError) as exc:
            raise self._fail("connection lost while running a command", exc) from exc
        return CommandResult(code, out, err, time.monotonic() - start)

    # -- push ------------------------------------------------------------------------------
    def remote_hashes(self, remote_rel: str) -> dict[str, str]:
        """sha256 of every file under ``root/remote_rel`` on the device, keyed by path relative
        to the root, with ``+x`` appended for a file its owner may execute (a content match
        with another mode is not current: a runner that lost its execute bit is sent again);
        empty when the folder is absent or the device has no sha256sum."""
        target = shlex.quote(remote_rel)
        res = self.shell(f"cd {shlex.quote(self.root)} 2>/dev/null && [ -e {target} ] && "
                         f"find {target} -type f -exec sha256sum {{}} + && echo '--x--' && "
                         f"find {target} -type f -perm -100", timeout_s=120)
        hashes, executable, listing = {}, set(), True
        for line in res.stdout.splitlines():
            if line == "--x--":
                listing = False
                continue
            if listing:
                digest, _, path = line.partition("  ")
                if len(digest) == 64 and path:
                    hashes[os.path.normpath(path)] = digest
            elif line.strip():
                executable.add(os.path.normpath(line.strip()))
        return {k: v + ("+x" if k in executable else "") for k, v in hashes.items()}

    def push(self, local: Path, remote_rel: str) -> int:
        """Copy a file or folder to ``root/remote_rel``, skipping files whose sha256 and
        execute bit already match on the device; missing parent folders are created first.
        Returns the number of files sent. Raises TransportError naming the file and quoting
        the device's own reason when it refuses one."""
        local = Path(local)
        if not local.exists():
            raise TransportError(f"{self._where()}: nothing to push: {local} does not exist")
        files = {os.path.normpath(remote_rel): local} if local.is_file() else {
            os.path.normpath(f"{remote_rel}/{p.relative_to(local).as_posix()}"): p
            for p in sorted(local.rglob("*")) if p.is_file()}
        want = {rel: sha256_file(p) + ("+x" if os.access(p, os.X_OK) else "")
                for rel, p in files.items()}
        have = self.remote_hashes(remote_rel)
        todo = {rel: p for rel, p in files.items() if have.get(rel) != want[rel]}
        if todo:
            self._make_parents(todo)
        for rel, path in todo.items():
            self._send(path, f"{self.root}/{rel}", 0o755 if os.access(path, os.X_OK) else 0o644)
        if todo:
            got = self.remote_hashes(remote_rel)
            bad = [rel for rel in todo if got.get(rel) != want[rel]]
            if bad and got:  # devices without sha256sum report nothing: trust sync's OKAY
                raise self._fail("pushed files arrived damaged or without their mode",
                                 ", ".join(bad[:5]))
        return len(todo)

    def _make_parents(self, todo: dict[str, Path]) -> None:
        """``mkdir -p`` the device folders the files of ``todo`` go to (sync SEND does not
        create them on every device); the device's reason on failure."""
        parents = sorted({posixpath.dirname(f"{self.root}/{rel}") for rel in todo})
        res = self.shell(f"mkdir -p {' '.join(shlex.quote(d) for d in parents)}", timeout_s=60)
        if res.returncode != 0:
            reason = (res.stderr or res.stdout).strip() or f"exit {res.returncode}"
            if storage_full(reason):
                raise self._fail("device storage full: cannot create the folders to push into",
                                 reason, self._full_hint())
            raise self._fail("cannot create the folders to push into", reason,
                             "the device refused (its reason above): check that the staging "
                             f"root {self.root} is a writable folder (no file in its place)")

    def _full_hint(self) -> str:
        return (f"free space on the phone (e.g. remove old outputs: "
                f"'{self.adb('-s', self.serial, 'shell', 'rm', '-rf', self.root + '/out')}', "
                "or delete files of other apps), then rerun: files already sent are skipped")

    def _send(self, path: Path, remote: str, mode: int) -> None:
        """One file by sync SEND (SYNC.TXT: ``SEND`` path,mode; ``DATA`` chunks of at most
        64 KiB; ``DONE`` mtime; the device answers ``OKAY`` or ``FAIL`` with its reason)."""
        try:
            with self._sync(b"SEND", f"{remote},{stat.S_IFREG | mode}") as c:
                with open(path, "rb") as f:
                    while chunk := f.read(SYNC_CHUNK_BYTES):
                        c.conn.sendall(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
                c.conn.sendall(b"DONE" + struct.pack("<I", int(time.time())))
                status = c.read_exact(4)
                length = struct.unpack("<I", c.read_exact(4))[0]
                if status == b"FAIL":
                    reason = c.read_exact(length).decode("utf-8", "replace")
                    if storage_full(reason):
                        raise self._fail(f"device storage full: the device refused {path} "
                                         f"(as {remote})", reason, self._full_hint())
                    raise self._fail(f"the device refused {path} (as {remote})", reason,
                                     "see the device's reason: free space on the device, a "
                                     "read-only or missing folder, or permissions")
                if status != b"OKAY":
                    raise adbutils.AdbError(f"bad sync SEND reply {status!r}")
        except (adbutils.AdbError, OSError, EOFError, struct.error) as exc:
            raise self._fail(f"push of {path} failed",
                             str(exc) or "connection to the device lost mid-transfer",
                             "the connection dropped: check the cable; rerun to resume "
                             "(files already sent are skipped)") from exc

    # -- pull ------------------------------------------------------------------------------
    def pull(self, remote_rel: str, local: Path, expect: list[str]) -> None:
        """Copy the folder ``root/remote_rel`` into ``local`` atomically; see :class:`Transport`."""
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        remote = f"{self.root}/{remote_rel}".rstrip("/")
        tmp = make_temp_dir(local.parent, f".{local.name}.pull-")
        try:
            with self._sync_open() as c:
                if not stat.S_ISDIR(self._stat_on(c, remote)[0]):
                    raise self._fail("output folder missing", remote,
                                     "the runner did not write its outputs; see its stderr")
                self._pull_tree(c, remote, tmp)
            for name in expect:
                f = tmp / name
                if not f.is_file() or f.stat().st_size == 0:
                    raise self._fail("expected output missing or empty", f"{remote}/{name}",
                                     "the runner stopped early; see its stderr and exit code")
            if local.exists():
                shutil.rmtree(local)
            os.replace(tmp, local)
        except (adbutils.AdbError, OSError, EOFError, struct.error) as exc:
            raise self._fail(f"pull of {remote} failed", exc) from exc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _pull_tree(self, c, remote: str, dest: Path) -> None:
        """Every file under the device folder ``remote`` into ``dest`` over the one sync
        connection ``c``: the folders listed (one LIST each), then the files' RECV requests
        pipelined, :data:`RECV_WINDOW` ahead of the replies read. A request sent only after
        the previous reply arrived would wait for that reply's last small packet, which the
        adb server holds (Nagle) until the host acknowledges the packets before it (up to
        40 ms a file). Each file's size is checked against the listing (TransportError
        "pull incomplete" naming the file and both sizes)."""
        files = self._list_tree(c, remote, dest)
        pending = iter(files)
        self._send_recvs(c, pending, RECV_WINDOW)
        for src, target, expected in files:
            size = self._recv_on(c, src, target)
            if size != expected:
                raise self._fail("pull incomplete", f"{src}: {size} of {expected} bytes")
            self._send_recvs(c, pending, 1)

    def _list_tree(self, c, remote: str, dest: Path) -> list[tuple[str, Path, int]]:
        """(device path, local path, size_bytes) of every regular file under ``remote``,
        the local folders made under ``dest``."""
        dest.mkdir(exist_ok=True)
        files = []
        for name, mode, size in self._list_on(c, remote):
            if stat.S_ISDIR(mode):
                files += self._list_tree(c, f"{remote}/{name}", dest / name)
            elif stat.S_ISREG(mode):
                files.append((f"{remote}/{name}", dest / name, size))
        return files

    @staticmethod
    def _send_recvs(c, pending, n: int) -> None:
        """Send the RECV requests of the next ``n`` files of the iterator ``pending`` (of
        (device path, ...) tuples) in one write."""
        raws = [src.encode() for src, *_ in itertools.islice(pending, n)]
        if raws:
            c.conn.sendall(b"".join(b"RECV" + struct.pack("<I", len(r)) + r for r in raws))

    # -- sync v1 STAT, LIST and RECV, read exactly (adbutils' versions assume whole recv()s) -
    def _sync_open(self):
        """A new ``sync:`` connection; requests may follow one another on it (SYNC.TXT)."""
        conn = self.device().open_transport(timeout=60)
        conn.send_command("sync:")
        conn.check_okay()
        return conn

    @staticmethod
    def _request(c, request: bytes, path: str) -> None:
        raw = path.encode()
        c.conn.sendall(request + struct.pack("<I", len(raw)) + raw)

    def _sync(self, request: bytes, path: str):
        conn = self._sync_open()
        self._request(conn, request, path)
        return conn

    @staticmethod
    def _stat_on(c, path: str) -> tuple[int, int]:
        AdbTransport._request(c, b"STAT", path)
        if c.read_exact(4) != b"STAT":
            raise adbutils.AdbError(f"bad sync STAT reply for {path}")
        mode, size, _mtime = struct.unpack("<III", c.read_exact(12))
        return mode, size

    @staticmethod
    def _list_on(c, path: str) -> list[tuple[str, int, int]]:
        AdbTransport._request(c, b"LIST", path)
        out = []
        while True:
            ident = c.read_exact(4)
            mode, size, _mtime, namelen = struct.unpack("<IIII", c.read_exact(16))
            if ident == b"DONE":
                return out
            if ident != b"DENT":
                raise adbutils.AdbError(f"bad sync LIST reply {ident!r} for {path}")
            name = c.read_exact(namelen).decode("utf-8", "replace")
            if name not in (".", ".."):
                out.append((name, mode, size))

    @staticmethod
    def _recv_on(c, path: str, dest: Path) -> int:
        """Read the reply to a RECV request of ``path`` already sent, into the file ``dest``
        (SYNC.TXT: ``DATA`` chunks then ``DONE``, or ``FAIL`` with the device's reason,
        raised as AdbError naming the path); returns the bytes received."""
        size = 0
        with open(dest, "wb") as f:
            while True:
                ident = c.read_exact(4)
                length = struct.unpack("<I", c.read_exact(4))[0]
                if ident == b"DONE":
                    return size
                if ident == b"FAIL":
                    reason = c.read_exact(length).decode("utf-8", "replace")
                    raise adbutils.AdbError(f"{path}: {reason}")
                if ident != b"DATA":
                    raise adbutils.AdbError(f"bad sync RECV reply {ident!r} for {path}")
                f.write(c.read_exact(length))
                size += length

    def stat(self, path: str) -> tuple[int, int]:
        """(mode, size_bytes) of a device path; (0, 0) when it does not exist."""
        with self._sync_open() as c:
            return self._stat_on(c, path)

    def listdir(self, path: str) -> list[tuple[str, int, int]]:
        """(name, mode, size_bytes) of each entry of a device folder, without . and .."""
        with self._sync_open() as c:
            return self._list_on(c, path)

    # -- facts, readings, cool-down --------------------------------------------------------
    def facts(self) -> dict[str, str]:
        """getprop facts (see FACT_PROPS) plus ``serial``; missing ones omitted."""
        script = "; ".join(f"echo {k}=$(getprop {p})" for k, p in FACT_PROPS.items())
        res = self.shell(script, timeout_s=30)
        facts = {"serial": self.serial}
        for line in res.stdout.splitlines():
            key, _, value = line.partition("=")
            if key in FACT_PROPS and value.strip():
                facts[key] = value.strip()
        return facts

    def readings(self) -> dict[str, float]:
        """Clocks, GPU load, temperatures and battery now (see :func:`parse_readings`)."""
        res = self.shell(READINGS_SH, timeout_s=30)
        raw = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
        return parse_readings(raw)

    def cooldown(self, policy: Cooldown | None = None) -> dict[str, float]:
        """Wait until the device is cool (see :class:`Cooldown`); returns ``cooldown_wait_s``,
        ``cooldown_start_c``/``cooldown_end_c`` (when a sensor is readable) and
        ``cooldown_timed_out`` (1.0 when the limit was hit)."""
        p = policy or self.cooldown_policy
        start = time.monotonic()
        first = hot = hottest_c(self.readings())
        while hot is not None and hot > p.threshold_c and time.monotonic() - start < p.limit_s:
            time.sleep(min(p.poll_s, max(0.0, p.limit_s - (time.monotonic() - start))))
            hot = hottest_c(self.readings())
        out = {"cooldown_wait_s": time.monotonic() - start,
               "cooldown_timed_out": float(hot is not None and hot > p.threshold_c)}
        if first is not None:
            out |= {"cooldown_start_c": first, "cooldown_end_c": hot}
        return out


def state_hint(state: str | None, serial: str, host: str = "127.0.0.1",
               port: int | None = None) -> str:
    """What to try for a device in an adb state other than ``device``; the adb commands
    given talk to the device's own server ``host:port`` (None: the default one)."""
    def adb(*args: str) -> str:
        return adb_command(host, port, *args) if port else shlex.join(["phonetrain", "adb",
                                                                       *args])
    return {
        "unauthorized": "unlock the phone and accept the 'Allow USB debugging' prompt "
                        f"(or run '{adb('kill-server')}' and replug)",
        "offline": f"replug the cable or run '{adb('reconnect')}'; for a network "
                   f"device '{adb('disconnect', serial)}' then '{adb('connect', serial)}'",
        "no permissions": "add a udev rule for the phone's USB vendor id (see 'phonetrain adb "
                          "devices' help) and replug",
        None: f"plug the phone in and enable USB debugging, or '{adb('connect', serial)}'; "
              "check that the serial matches 'phonetrain devices'",
    }.get(state, f"check '{adb('devices')}' and replug the phone")


def _recv_until(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Read exactly ``n`` bytes before ``deadline`` (monotonic s); TimeoutError, EOFError."""
    buf = bytearray()
    while len(buf) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError()
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(n - len(buf))
        except socket.timeout as exc:
            raise TimeoutError() from exc
        if not chunk:
            raise EOFError("connection closed before the command's exit status arrived")
        buf += chunk
    return bytes(buf)
