"""A virtual phone: the device side of the ADB protocol over TCP, for tests.

The real adb server registers it with ``phonetrain adb connect 127.0.0.1:PORT`` (a port outside
5555-5585: adb treats those as emulators). It then behaves like ``adbd`` on a phone with a
small feature set:

- transport: CNXN without AUTH (banner ``device::ro.product.name=...;ro.product.model=...;
  features=shell_v2,cmd``), streams with OPEN/OKAY/WRTE/CLSE, one WRTE in flight per direction
  and stream (no ``delayed_ack``);
- ``shell:`` (stdout and stderr merged, no exit status) and ``shell,v2:`` (packets: 1-byte id,
  u32 length; ids stdin 0, stdout 1, stderr 2, exit 3, close-stdin 4, window-size 5);
- ``sync:`` v1: STAT, LIST (DENT...DONE), SEND (DATA...DONE -> OKAY/FAIL), RECV (DATA...DONE
  or FAIL), QUIT.

Commands run with ``/bin/sh -c`` in the sandbox folder ``root``; the device path prefix
``/data/local/tmp`` is mapped into ``root`` (in command text and sync paths), ``/sys`` into an
optional fake sysfs folder, and ``getprop`` answers from the props. Fault injection
(:class:`Faults`): drop the TCP connection after N received bytes, fail pushes to matching
paths, hang matching commands, drop the connection once a matching command runs, a full
storage (writes meet ENOSPC), RECV of matching paths cut to half the file or refused.

Written from AOSP's ``protocol.txt``, ``SYNC.TXT`` and ``shell_protocol.h`` (packet layouts
and constants); the header's ``data_check`` is the byte sum those documents call a checksum.
"""

from __future__ import annotations

import fnmatch
import json
import os
import platform
import posixpath
import queue
import re
import shutil
import signal
import socket
import stat as stat_mod
import struct
import subprocess
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

A_SYNC, A_CNXN, A_OPEN, A_OKAY = 0x434E5953, 0x4E584E43, 0x4E45504F, 0x59414B4F
A_CLSE, A_WRTE, A_AUTH, A_STLS = 0x45534C43, 0x45545257, 0x48545541, 0x534C5453
A_VERSION = 0x01000001  # the version from which data_check may be skipped
MAX_PAYLOAD_BYTES = 256 * 1024
SYNC_DATA_MAX_BYTES = 64 * 1024  # SYNC.TXT: DATA chunks are at most 64 KiB
HEADER = struct.Struct("<6I")  # command, arg0, arg1, data_length, data_check, magic
SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN = 0, 1, 2, 3, 4
DEVICE_TMP = "/data/local/tmp"
FEATURES = "shell_v2,cmd"


def shut(sock: socket.socket) -> None:
    """Shut ``sock`` down both ways (an OSError of a peer already gone ignored) and close it."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@dataclass
class Faults:
    """Fault injection knobs; ``None`` disables each one.

    drop_after_bytes: close the TCP connection once this many WRTE payload bytes have been
        received from the host on one connection (a cable pulled mid-push).
    fail_push: fnmatch pattern of device paths whose sync SEND answers FAIL.
    hang: regular expression; a shell command matching it sleeps until its stream is closed.
    crash: regular expression; a shell command matching it dies of SIGSEGV (exit 139).
    hide: fnmatch pattern of device paths that sync STAT/LIST/RECV treat as absent (an
        output file the runner never wrote).
    no_parent_dirs: sync SEND into a folder that does not exist fails ("couldn't create
        file: No such file or directory") instead of creating it, as on a device whose adbd
        may not create that folder.
    drop_on: regular expression; when a shell command matching it has started, the phone
        drops its TCP connection (a cable pulled mid-run; the command is killed as adbd
        kills a shell whose stream is gone).
    storage_full: the phone's storage is full: every byte sync SEND writes goes to
        ``/dev/full``, so the kernel itself answers ENOSPC, and SEND replies FAIL "write
        failed: No space left on device" as adbd does.
    short_recv: fnmatch pattern of device paths whose sync RECV sends only the first half of
        the file, then DONE (a file that shrank after it was listed).
    fail_recv: fnmatch pattern of device paths whose sync RECV answers FAIL "No such file
        or directory" (a file removed after it was listed).
    """

    drop_after_bytes: int | None = None
    fail_push: str | None = None
    hang: str | None = None
    crash: str | None = None
    hide: str | None = None
    no_parent_dirs: bool = False
    storage_full: bool = False
    drop_on: str | None = None
    short_recv: str | None = None
    fail_recv: str | None = None


def default_props() -> dict[str, str]:
    """getprop values of a virtual phone running this host's binaries."""
    abi = {"x86_64": "x86_64", "aarch64": "arm64-v8a"}.get(platform.machine(), platform.machine())
    return {
        "ro.product.name": "phonetrain_virtual",
        "ro.product.model": "Phonetrain Virtual",
        "ro.product.device": "virtual",
        "ro.product.manufacturer": "phonetrain",
        "ro.soc.model": "VIRT-1",
        "ro.board.platform": "virtual",
        "ro.build.version.release": "14",
        "ro.build.version.sdk": "34",
        "ro.product.cpu.abi": abi,
    }


def load_props(path: Path | None) -> dict[str, str]:
    """Props from a JSON or YAML mapping file over :func:`default_props`.

    Raises ValueError naming the file when it is not JSON or YAML (as its suffix says) or
    not a mapping of names to scalars."""
    import yaml

    props = default_props()
    if path is None:
        return props
    try:
        text = Path(path).read_text()
        data = (yaml.safe_load(text) if str(path).endswith((".yaml", ".yml"))
                else json.loads(text))
    except (yaml.YAMLError, ValueError) as e:
        kind = ("YAML" if str(path).endswith((".yaml", ".yml"))
                else "JSON (a YAML file's name ends in .yaml or .yml)")
        raise ValueError(f"{path}: not valid {kind}: {' '.join(str(e).split())}; give a flat "
                         "mapping of property name to value, e.g. "
                         '{"ro.product.model": "Pixel 7"}') from None
    if not isinstance(data, dict) or any(isinstance(v, (dict, list)) for v in data.values()):
        raise ValueError(f"{path}: props must be a flat mapping of property name to value")
    props.update({str(k): str(v) for k, v in data.items()})
    return props


def _packet(command: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    return HEADER.pack(command, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF,
                       command ^ 0xFFFFFFFF) + data


_GETPROP_SH = """#!/bin/sh
# getprop of the phonetrain virtual device: answers from a key=value file
f='{props}'
if [ $# -eq 0 ]; then sed 's/^\\([^=]*\\)=\\(.*\\)$/[\\1]: [\\2]/' "$f"; exit 0; fi
v=$(grep -m1 "^$1=" "$f" | cut -d= -f2-)
printf '%s\\n' "${{v:-$2}}"
"""


class VirtualDevice:
    """A TCP server speaking the device side of ADB; see the module docstring.

    root: sandbox folder that stands for ``/data/local/tmp``; port: TCP port (0 = any free);
    sysfs_root: optional folder that stands for ``/sys`` (fake thermal zones, clocks);
    features: the banner's feature list (``""`` plays an old phone without shell v2).
    """

    def __init__(self, root: Path, port: int = 0, props: dict[str, str] | None = None,
                 faults: Faults | None = None, host: str = "127.0.0.1",
                 sysfs_root: Path | None = None, features: str = FEATURES):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.props = props or default_props()
        self.faults = faults or Faults()
        self.sysfs_root = Path(sysfs_root).resolve() if sysfs_root else None
        self.features = features
        self._listener = socket.create_server((host, port))
        self.host, self.port = self._listener.getsockname()[:2]
        self.props = {"ro.serialno": f"VIRT{self.port}", **self.props}  # one per phone
        self._bin = Path(tempfile.mkdtemp(prefix="phonetrain-vdev-"))
        # removed by stop(), or when the device is collected or the interpreter exits
        self._remove_bin = weakref.finalize(self, shutil.rmtree, self._bin, True)
        (self._bin / "props.txt").write_text(
            "".join(f"{k}={v}\n" for k, v in self.props.items()))
        getprop = self._bin / "getprop"
        getprop.write_text(_GETPROP_SH.format(props=self._bin / "props.txt"))
        getprop.chmod(0o755)
        self._conns: list[_Connection] = []
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def serial(self) -> str:
        """The serial adb gives this device after ``phonetrain adb connect``."""
        return f"{self.host}:{self.port}"

    def start(self) -> "VirtualDevice":
        """Serve in a background thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        name=f"vdev-{self.port}")
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Accept adb server connections until :meth:`stop`."""
        while not self._stopped.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                break
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small packets: no Nagle wait
            conn = _Connection(self, sock)
            self._conns.append(conn)
            threading.Thread(target=conn.serve, daemon=True).start()

    def stop(self) -> None:
        """Close the listener and every connection (the phone is unplugged)."""
        self._stopped.set()
        shut(self._listener)
        for conn in list(self._conns):
            conn.close()
        self._remove_bin()

    # -- mapping device paths and commands into the sandbox --------------------------------
    def map_path(self, device_path: str) -> Path | None:
        """Host path for a device path, or None when it lies outside the mapped folders."""
        norm = posixpath.normpath(device_path)
        if self.faults.hide and fnmatch.fnmatch(norm, self.faults.hide):
            return None
        for prefix, base in ((DEVICE_TMP, self.root), ("/sys", self.sysfs_root)):
            if base is None:
                continue
            if norm == prefix or norm.startswith(prefix + "/"):
                return base / norm[len(prefix):].lstrip("/")
        return None

    def map_command(self, command: str) -> str:
        """Rewrite device path prefixes in a shell command to their sandbox folders."""
        command = re.sub(r"(?<![\w./-])/data/local/tmp(?=/|\b|$)", str(self.root), command)
        if self.sysfs_root is not None:
            command = re.sub(r"(?<![\w./-])/sys(?=/)", str(self.sysfs_root), command)
        return command

    def spawn(self, command: str, merge_stderr: bool) -> subprocess.Popen:
        """Start ``/bin/sh -c command`` in the sandbox, in its own process group."""
        if self.faults.hang and re.search(self.faults.hang, command):
            command = "exec sleep 86400"
        elif self.faults.crash and re.search(self.faults.crash, command):
            command = "echo 'Segmentation fault' >&2; kill -SEGV $$"
        env = dict(os.environ, PATH=f"{self._bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                   HOME=str(self.root), TMPDIR=str(self.root))
        if self.sysfs_root is not None:  # the runner's own sysfs reads (src/runner/conditions.h)
            env["PHONETRAIN_SYSFS_ROOT"] = str(self.sysfs_root)
        return subprocess.Popen(
            ["/bin/sh", "-c", self.map_command(command)], cwd=self.root, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True)

    def banner(self) -> bytes:
        p = self.props
        return (f"device::ro.product.name={p.get('ro.product.name', '')};"
                f"ro.product.model={p.get('ro.product.model', '')};"
                f"ro.product.device={p.get('ro.product.device', '')};"
                f"features={self.features}").encode()


class _Connection:
    """One TCP connection from an adb server: reads packets, dispatches them to streams."""

    def __init__(self, device: VirtualDevice, sock: socket.socket):
        self.device = device
        self.sock = sock
        self.max_payload = MAX_PAYLOAD_BYTES
        self.streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._send_lock = threading.Lock()
        self._received_bytes = 0
        self.closed = threading.Event()

    def send(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        with self._send_lock:
            self.sock.sendall(_packet(command, arg0, arg1, data))

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("adb server closed the connection")
            buf += chunk
        return bytes(buf)

    def serve(self) -> None:
        try:
            while True:
                command, arg0, arg1, length, _check, magic = HEADER.unpack(self._recv_exact(24))
                if magic != command ^ 0xFFFFFFFF:
                    raise ConnectionError(f"bad packet magic {magic:#x}")
                data = self._recv_exact(length) if length else b""
                self._dispatch(command, arg0, arg1, data)
        except (ConnectionError, OSError):
            pass
        finally:
            self.close()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        shut(self.sock)
        for stream in list(self.streams.values()):
            stream.on_close()

    def _dispatch(self, command: int, arg0: int, arg1: int, data: bytes) -> None:
        if command == A_CNXN:
            self.max_payload = min(arg1 or MAX_PAYLOAD_BYTES, MAX_PAYLOAD_BYTES)
            self.send(A_CNXN, min(arg0, A_VERSION), self.max_payload, self.device.banner())
        elif command == A_OPEN:
            self._open(arg0, data.rstrip(b"\0").decode("utf-8", "replace"))
        elif command == A_WRTE:
            self._received_bytes += len(data)
            limit = self.device.faults.drop_after_bytes
            if limit is not None and self._received_bytes > limit:
                raise ConnectionError("fault injection: connection dropped")
            stream = self.streams.get(arg1)
            if stream is None:
                self.send(A_CLSE, 0, arg0)
                return
            self.send(A_OKAY, stream.local_id, stream.remote_id)
            stream.on_data(data)
        elif command == A_OKAY:
            stream = self.streams.get(arg1)
            if stream is not None:
                stream.can_send.set()
        elif command == A_CLSE:
            stream = self.streams.pop(arg1, None)
            if stream is not None:
                stream.on_close()
        # A_SYNC, A_AUTH, A_STLS: not used by a device that never asks for AUTH or TLS.

    def _open(self, remote_id: int, service: str) -> None:
        local_id, self._next_id = self._next_id, self._next_id + 1
        if service.startswith("shell"):
            head, _, command = service.partition(":")
            handler = _ShellService(command, v2="v2" in head.split(",")[1:])
        elif service == "sync:":
            handler = _SyncService()
        else:
            self.send(A_CLSE, 0, remote_id)  # unknown service: refuse the OPEN
            return
        stream = _Stream(self, local_id, remote_id)
        self.streams[local_id] = stream
        self.send(A_OKAY, local_id, remote_id)
        threading.Thread(target=handler.run, args=(stream, self.device), daemon=True).start()


class StreamClosed(Exception):
    """The host closed the stream (or the connection) while a service was using it."""


class _Stream:
    """A byte stream over WRTE packets, with one WRTE in flight at a time."""

    def __init__(self, conn: _Connection, local_id: int, remote_id: int):
        self.conn, self.local_id, self.remote_id = conn, local_id, remote_id
        self.can_send = threading.Event()
        self.can_send.set()
        self.closed = threading.Event()
        self._inbox: queue.Queue[bytes | None] = queue.Queue()
        self._buf = bytearray()
        self._on_close_hooks: list = []

    def on_data(self, data: bytes) -> None:
        self._inbox.put(data)

    def on_close(self) -> None:
        self.closed.set()
        self.can_send.set()
        self._inbox.put(None)
        for hook in self._on_close_hooks:
            hook()

    def add_close_hook(self, hook) -> None:
        self._on_close_hooks.append(hook)

    def read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._inbox.get()
            if chunk is None:
                self._inbox.put(None)   # closed for every later read too
                raise StreamClosed()
            self._buf += chunk
        out, self._buf = bytes(self._buf[:n]), self._buf[n:]
        return out

    def write(self, data: bytes) -> None:
        for i in range(0, len(data), self.conn.max_payload):
            self.can_send.wait()
            if self.closed.is_set() or self.conn.closed.is_set():
                raise StreamClosed()
            self.can_send.clear()
            try:
                self.conn.send(A_WRTE, self.local_id, self.remote_id,
                               data[i:i + self.conn.max_payload])
            except OSError as exc:
                raise StreamClosed() from exc

    def close(self) -> None:
        """Close this side: CLSE to the host, and any reader of the stream woken (its
        ``read_exact`` raises :class:`StreamClosed`). The host's own CLSE that may follow
        finds the stream gone, so a reader left waiting here would wait, and keep what it
        holds (a shell command's process and its pipes), for the life of the process."""
        if self.conn.streams.pop(self.local_id, None) is not None:
            try:
                self.conn.send(A_CLSE, self.local_id, self.remote_id)
            except OSError:
                pass
        self.closed.set()
        self._inbox.put(None)


class _ShellService:
    """``shell:`` / ``shell,v2:``: run the command; v2 frames stdout/stderr and the exit code."""

    def __init__(self, command: str, v2: bool):
        self.command, self.v2 = command, v2

    def run(self, stream: _Stream, device: VirtualDevice) -> None:
        proc = device.spawn(self.command or "exit 0", merge_stderr=not self.v2)
        stream.add_close_hook(lambda: _kill_group(proc))
        if device.faults.drop_on and re.search(device.faults.drop_on, self.command):
            stream.conn.close()  # fault injection: the cable pulled while it runs
        out: queue.Queue[tuple[int, bytes | None]] = queue.Queue()
        pipes = [(SHELL_STDOUT, proc.stdout)] + ([(SHELL_STDERR, proc.stderr)] if self.v2 else [])
        for ident, pipe in pipes:
            threading.Thread(target=_pump, args=(ident, pipe, out), daemon=True).start()
        if self.v2:
            threading.Thread(target=self._feed_stdin, args=(stream, proc), daemon=True).start()
        else:
            proc.stdin.close()
        try:
            open_pipes = len(pipes)
            while open_pipes:
                ident, chunk = out.get()
                if chunk is None:
                    open_pipes -= 1
                    continue
                stream.write(_shell_packet(ident, chunk) if self.v2 else chunk)
            code = proc.wait()
            code = 128 - code if code < 0 else code  # killed by a signal: 128 + signal number
            if self.v2:
                stream.write(_shell_packet(SHELL_EXIT, bytes([code & 0xFF])))
        except StreamClosed:
            _kill_group(proc)
        finally:
            stream.close()

    @staticmethod
    def _feed_stdin(stream: _Stream, proc: subprocess.Popen) -> None:
        try:
            while True:
                ident = stream.read_exact(1)[0]
                data = stream.read_exact(struct.unpack("<I", stream.read_exact(4))[0])
                if ident == SHELL_STDIN:
                    proc.stdin.write(data)
                    proc.stdin.flush()
                elif ident == SHELL_CLOSE_STDIN:
                    break
        except (StreamClosed, OSError):
            pass
        try:
            proc.stdin.close()
        except OSError:
            pass


def _shell_packet(ident: int, data: bytes) -> bytes:
    return struct.pack("<BI", ident, len(data)) + data


def _pump(ident: int, pipe, out: queue.Queue) -> None:
    while chunk := pipe.read1(65536):
        out.put((ident, chunk))
    out.put((ident, None))


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the command's whole process group (adbd does the same when a shell stream closes)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=5)  # reap it: no zombie left behind
        except subprocess.TimeoutExpired:
            pass


class _SyncService:
    """``sync:`` v1 requests: 4-byte id, u32 length, then a path (or data)."""

    def run(self, stream: _Stream, device: VirtualDevice) -> None:
        try:
            while True:
                ident = stream.read_exact(4)
                arg = stream.read_exact(struct.unpack("<I", stream.read_exact(4))[0])
                if ident == b"QUIT":
                    break
                handler = {b"STAT": self._stat, b"LIST": self._list, b"SEND": self._send,
                           b"RECV": self._recv}.get(ident)
                if handler is None:
                    _sync_fail(stream, f"unknown sync request {ident!r}")
                    break
                handler(stream, device, arg.decode("utf-8", "replace"))
        except StreamClosed:
            pass
        finally:
            stream.close()

    @staticmethod
    def _stat(stream: _Stream, device: VirtualDevice, path: str) -> None:
        host = device.map_path(path)
        try:
            st = os.stat(host) if host is not None else None
        except OSError:
            st = None
        fields = (st.st_mode, st.st_size, int(st.st_mtime)) if st else (0, 0, 0)
        stream.write(b"STAT" + struct.pack("<III", *(f & 0xFFFFFFFF for f in fields)))

    @staticmethod
    def _list(stream: _Stream, device: VirtualDevice, path: str) -> None:
        host = device.map_path(path)
        entries = []
        if host is not None and host.is_dir():
            for name in [".", ".."] + sorted(os.listdir(host)):
                if name not in (".", "..") and \
                        device.map_path(posixpath.join(path, name)) is None:
                    continue  # hidden by fault injection
                try:
                    st = os.lstat(host / name)
                except OSError:
                    continue
                raw = name.encode()
                entries.append(b"DENT" + struct.pack("<IIII", st.st_mode, st.st_size & 0xFFFFFFFF,
                                                     int(st.st_mtime), len(raw)) + raw)
        stream.write(b"".join(entries) + b"DONE" + bytes(16))

    @staticmethod
    def _send(stream: _Stream, device: VirtualDevice, spec: str) -> None:
        """SEND as adbd answers it: a file that cannot be created or written (ENOSPC, EACCES,
        ...) is a FAIL with adbd's wording ("couldn't create file: <strerror>", "write
        failed: <strerror>"), after the DATA...DONE that follow have been drained."""
        path, _, mode_text = spec.rpartition(",")
        host = device.map_path(path)
        failure = None
        if host is None:
            failure = f"{path}: Permission denied (outside {DEVICE_TMP})"
        elif device.faults.fail_push and fnmatch.fnmatch(path, device.faults.fail_push):
            failure = f"{path}: No space left on device (fault injection)"
        elif not host.parent.is_dir() and (device.faults.no_parent_dirs or
                                            host.parent.exists()):
            why = "Not a directory" if host.parent.exists() else "No such file or directory"
            failure = f"couldn't create file: {why}"
        fd, tmp = None, None
        if failure is None:
            try:
                host.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=host.parent, prefix=".sync-")
                if device.faults.storage_full:  # every write meets the kernel's own ENOSPC
                    full = os.open("/dev/full", os.O_WRONLY)
                    os.dup2(full, fd)
                    os.close(full)
            except OSError as exc:
                failure = f"couldn't create file: {exc.strerror or exc}"
        while True:  # always drain DATA...DONE so the stream stays in step
            ident = stream.read_exact(4)
            value = struct.unpack("<I", stream.read_exact(4))[0]
            if ident == b"DONE":
                break
            if ident != b"DATA":
                failure = failure or f"unexpected {ident!r} during SEND"
                break
            chunk = stream.read_exact(value)
            if fd is not None and failure is None:
                try:
                    _write_all(fd, chunk)
                except OSError as exc:
                    failure = f"write failed: {exc.strerror or exc}"
        if fd is not None:
            os.close(fd)
            try:
                if failure is None:
                    mode = stat_mod.S_IMODE(int(mode_text)) if mode_text.isdigit() else 0o644
                    os.chmod(tmp, mode or 0o644)
                    os.replace(tmp, host)
                else:
                    os.unlink(tmp)
            except OSError as exc:
                failure = failure or f"couldn't create file: {exc.strerror or exc}"
        if failure is None:
            stream.write(b"OKAY" + bytes(4))
        else:
            _sync_fail(stream, failure)

    @staticmethod
    def _recv(stream: _Stream, device: VirtualDevice, path: str) -> None:
        host = device.map_path(path)
        try:
            if host is None:
                raise PermissionError(f"{path}: Permission denied")
            if device.faults.fail_recv and \
                    fnmatch.fnmatch(posixpath.normpath(path), device.faults.fail_recv):
                raise FileNotFoundError(2, "No such file or directory")
            short = device.faults.short_recv
            with open(host, "rb") as f:
                left = os.fstat(f.fileno()).st_size // 2 if short and \
                    fnmatch.fnmatch(posixpath.normpath(path), short) else None
                while chunk := f.read(SYNC_DATA_MAX_BYTES if left is None else
                                      min(left, SYNC_DATA_MAX_BYTES)):
                    stream.write(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
                    left = None if left is None else left - len(chunk)
        except OSError as exc:
            _sync_fail(stream, f"{path}: {exc.strerror or exc}")
            return
        stream.write(b"DONE" + bytes(4))


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte of ``data`` is written; raises the OSError of a failed write."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _sync_fail(stream: _Stream, message: str) -> None:
    raw = message.encode()
    stream.write(b"FAIL" + struct.pack("<I", len(raw)) + raw)
