"""One measurement at a time per device, wherever the workflows that measure it run.

Two locks, taken in this order by every job that talks to a device (``Transport.lock()``) and
held while it works:

- :class:`HostLock`: a :mod:`filelock` lock per device in :func:`lock_dir`
  (``$PHONETRAIN_LOCK_DIR``, default ``<tmp>/phonetrain-locks``), so jobs on one host queue on
  the host without polling the phone. The folder it creates is ``drwxrwxrwt`` (sticky,
  every user may add locks, as ``/tmp``) and lock files ``rw-rw-rw-``, so every user of a
  shared host can take them whatever their umask; the holder records itself beside the lock
  file (``<key>.holder``) and a waiter names it.
- :class:`PhoneLock` (adb phones): the lock held on the phone itself, a folder
  :data:`PHONE_LOCK` on its storage made with ``mkdir`` (atomic: exactly one caller creates
  it), holding the holder's token, its description (host, user, pid, workflow folder, job,
  since) and the phone-clock second its lease ends. Two workflows whose host lock folders
  differ (two submit hosts, two ``PHONETRAIN_LOCK_DIR``) thus still measure a phone one at a
  time. The holder renews its lease every :data:`RENEW_S` from a thread; a holder that stops
  renewing (killed, its host or cable gone) loses the lock :data:`LEASE_S` seconds later,
  when a waiter breaks it. Breaking, renewing and releasing happen under a second folder
  (``<lock>.break``) and only for the token they read, so no caller removes another's fresh
  lock; a holder that finds its lock gone (lease lost) fails its job rather than keep a
  measurement another workflow may have disturbed. Leases and expiry are read on the phone's
  own clock (``date +%s``), so hosts' clocks never meet.

A waiter prints who holds the lock (``phonetrain: waiting for device ...: held by ...``) when
it starts waiting and every :data:`REMIND_S` after. Each lock held is recorded in
:data:`HELD` (device, from, to: Unix seconds), which the job's log reports.
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import socket
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from phonetrain import spans
from phonetrain.devices.base import CommandResult, TransportError

LOCK_DIR_ENV = "PHONETRAIN_LOCK_DIR"
JOB_ENV = "PHONETRAIN_JOB"   # the job a process runs (set by phonetrain.stages.job), as words
PHONE_LOCK = "/data/local/tmp/phonetrain-lock"
LEASE_S = 60.0     # a lease not renewed for this long (phone clock) may be broken
RENEW_S = 15.0     # how often a holder renews its lease
POLL_S = 2.0       # how often a waiter asks the phone again
REMIND_S = 60.0    # how often a waiter says again whom it waits for
HELD: list[tuple[str, float, float]] = []   # (device, taken, released), Unix seconds


def default_lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / "phonetrain-locks"


def lock_dir() -> Path:
    """Where host-side device locks live: ``$PHONETRAIN_LOCK_DIR`` or :func:`default_lock_dir`,
    shared by every workflow and user of this host. A folder created here (or the default
    folder, when this user owns it) is made ``rwxrwxrwt``. Raises :class:`TransportError`
    naming the folder when it cannot be created or written."""
    given = os.environ.get(LOCK_DIR_ENV)
    path = Path(given) if given else default_lock_dir()
    try:
        existed = path.is_dir()
        path.mkdir(parents=True, exist_ok=True)
        if (not existed or not given) and path.stat().st_uid == os.getuid() and \
                path.stat().st_mode & 0o7777 != 0o1777:
            path.chmod(0o1777)
    except OSError as e:
        raise TransportError(f"device lock folder {path}: cannot create it ({e.strerror or e})",
                             f"set {LOCK_DIR_ENV} to a folder every user of this host may "
                             "write (chmod 1777)") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise TransportError(f"device lock folder {path} is not writable by user "
                             f"{getpass.getuser()} (mode {path.stat().st_mode & 0o7777:o}, "
                             f"owner uid {path.stat().st_uid})",
                             f"ask its owner to 'chmod 1777 {path}', or set {LOCK_DIR_ENV} to "
                             "a folder every user of this host who measures may write")
    return path


def holder() -> dict[str, Any]:
    """This process as a lock holder: host, user, pid, workflow (working folder), job, since."""
    return {"host": socket.gethostname(), "user": getpass.getuser(), "pid": os.getpid(),
            "workflow": os.getcwd(),
            "job": os.environ.get(JOB_ENV) or " ".join(Path(a).name for a in sys.argv[:3]),
            "since": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}


def describe(h: dict[str, Any] | None) -> str:
    """A holder as words: ``job ... (pid P of user U on host H, workflow in W, since T)``."""
    if not h:
        return "a holder that has not recorded itself (yet)"
    return (f"{h.get('job') or 'a job'} (pid {h.get('pid')} of user {h.get('user')} on host "
            f"{h.get('host')}, workflow in {h.get('workflow')}, since {h.get('since')})")


def _say(text: str) -> None:
    print(f"phonetrain: {text}", file=sys.stderr, flush=True)


class HostLock:
    """The lock of ``device`` on this host, ``lock_dir()/<key>.lock``. A context manager;
    waits (saying whom for) until it is free."""

    def __init__(self, device: str, key: str):
        self.device = device
        self.lock_file = str(lock_dir() / f"{key}.lock")
        self.holder_file = Path(self.lock_file).with_suffix(".holder")
        from filelock import FileLock   # here: a job that locks no device skips it

        self._lock = FileLock(self.lock_file, mode=0o666)

    def __enter__(self) -> HostLock:
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            _say(f"waiting for device '{self.device}': held by {describe(self._holder())} "
                 f"(host lock {self.lock_file})")
            while True:
                try:
                    self._lock.acquire(timeout=REMIND_S)
                    break
                except Timeout:
                    _say(f"still waiting for device '{self.device}': held by "
                         f"{describe(self._holder())}")
        self._record()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()

    def _holder(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.holder_file.read_text())
        except (OSError, ValueError):
            return None

    def _record(self) -> None:
        """Write this holder over the last one's, in place (another user's file in a sticky
        folder can be written, not replaced)."""
        try:
            fd = os.open(self.holder_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        except OSError:
            return   # the lock holds without its note; a waiter says the holder is unknown
        try:
            try:
                os.fchmod(fd, 0o666)
            except OSError:
                pass   # another user's note: writable, not ours to chmod
            os.write(fd, json.dumps(holder()).encode())
        finally:
            os.close(fd)


# One script per step, run on the phone by its shell (toybox sh and tools: mkdir, cat, date,
# stat, rm, mv). Each prints one word first: taken | held | busy | renewed | lost | released.
# @LOCK@, @TOKEN@, @LEASE@ and @HOLDER@ are replaced (quoted) before it is sent.
_GUARD = r"""
L=@LOCK@; B="$L.break"; now=$(date +%s)
b=$(stat -c %Y "$B" 2>/dev/null) && [ $((now - b)) -gt 30 ] && rmdir "$B" 2>/dev/null
expired() { e=$(cat "$L/expires" 2>/dev/null)
  [ -n "$e" ] || e=$(( $(stat -c %Y "$L" 2>/dev/null || echo $now) + @LEASE@ ))
  [ "$now" -gt "$e" ]; }
"""
_TAKE = _GUARD + r"""
if mkdir "$L" 2>/dev/null; then
  echo @TOKEN@ > "$L/token"; echo $((now + @LEASE@)) > "$L/expires"; echo @HOLDER@ > "$L/holder"
  echo taken; exit 0
fi
if expired; then
  mkdir "$B" 2>/dev/null || { echo busy; exit 0; }
  expired && rm -rf "$L"   # again under $B: a renewal or a new holder since is kept
  rmdir "$B"; echo busy; exit 0
fi
echo held; cat "$L/holder" 2>/dev/null; true
"""
_RENEW = _GUARD + r"""
mkdir "$B" 2>/dev/null || { echo busy; exit 0; }
if [ "$(cat "$L/token" 2>/dev/null)" = @TOKEN@ ]; then
  echo $((now + @LEASE@)) > "$L/expires.new" && mv "$L/expires.new" "$L/expires"; echo renewed
else echo lost; fi
rmdir "$B"
"""
_RELEASE = _GUARD + r"""
mkdir "$B" 2>/dev/null || { echo busy; exit 0; }
if [ "$(cat "$L/token" 2>/dev/null)" = @TOKEN@ ]; then rm -rf "$L"; echo released
else echo lost; fi
rmdir "$B"
"""

Shell = Callable[[str, float], CommandResult]


class PhoneLock:
    """The lock of a phone held on the phone (module docstring). ``shell``: runs a command on
    the phone (``AdbTransport.shell``); ``device``: its name in messages; ``lease_s``,
    ``renew_s``: :data:`LEASE_S`, :data:`RENEW_S`. A context manager."""

    def __init__(self, device: str, shell: Shell, *, lease_s: float = LEASE_S,
                 renew_s: float = RENEW_S, path: str = PHONE_LOCK):
        self.device, self._shell, self.path = device, shell, path
        self.lease_s, self.renew_s = lease_s, renew_s
        self.token = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._stop = threading.Event()
        self._lost: str | None = None
        self._thread: threading.Thread | None = None

    def _run(self, script: str) -> list[str]:
        words = {"@LOCK@": shlex.quote(self.path), "@TOKEN@": shlex.quote(self.token),
                 "@LEASE@": str(int(self.lease_s)), "@HOLDER@": shlex.quote(json.dumps(holder()))}
        cmd = script
        for k, v in words.items():
            cmd = cmd.replace(k, v)
        res = self._shell(cmd, 60.0)
        lines = res.stdout.strip().splitlines()
        if res.returncode != 0 or not lines:
            raise TransportError(f"device '{self.device}': cannot use its lock {self.path} "
                                 f"on the phone (exit {res.returncode}: "
                                 f"{(res.stderr or res.stdout).strip()[:200]})")
        return lines

    def acquire(self) -> None:
        said = 0.0
        while True:
            lines = self._run(_TAKE)
            if lines[0] == "taken":
                break
            if lines[0] == "held":
                try:
                    h = json.loads(lines[1]) if len(lines) > 1 else None
                except ValueError:
                    h = None
                if time.monotonic() - said >= REMIND_S:
                    _say(f"{'still ' if said else ''}waiting for device '{self.device}': "
                         f"held by {describe(h)} (lock {self.path} on the phone)")
                    said = time.monotonic()
                time.sleep(POLL_S)
        self._thread = threading.Thread(target=self._renew, daemon=True,
                                        name=f"phonetrain-lease-{self.device}")
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.renew_s):
            try:
                word = self._run(_RENEW)[0]
            except TransportError:
                continue   # the next renewal tries again; the lease covers several misses
            if word == "lost":
                self._lost = "its lease ran out and another holder took the phone"
                return

    def release(self) -> None:
        """Stop renewing and remove the lock if it is still ours. Raises
        :class:`TransportError` when the lock was lost while held (the measurement may have
        shared the phone); a phone that cannot be reached keeps the lock until its lease
        ends."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        word = "busy"
        for _ in range(20):
            try:
                word = self._run(_RELEASE)[0]
            except TransportError:
                return   # unreachable: the lease ends it
            if word != "busy":
                break
            time.sleep(0.2)
        lost = self._lost or ("another holder had taken it" if word == "lost" else None)
        if lost:
            raise TransportError(f"device '{self.device}': lost its lock on the phone while "
                                 f"measuring ({lost}): another workflow may have used the "
                                 "phone meanwhile", "measure again; keep the host awake and "
                                 "the phone connected while a job holds it")

    def __enter__(self) -> PhoneLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.release()
        except TransportError:
            if exc[0] is None:
                raise


class DeviceLock:
    """The locks of one device, taken in order (host, then phone) and released in reverse;
    ``lock_file`` is the host lock's file. Records the span it was held in :data:`HELD`."""

    def __init__(self, device: str, host: HostLock, phone: PhoneLock | None = None):
        self.device, self.host, self.phone = device, host, phone
        self.lock_file = host.lock_file
        self._taken = 0.0

    def __enter__(self) -> DeviceLock:
        with spans.span(spans.WAIT, f"device '{self.device}' lock"):   # the job's waiting
            self.host.__enter__()
            try:
                if self.phone is not None:
                    self.phone.__enter__()
            except BaseException:
                self.host.__exit__(None, None, None)
                raise
        self._taken = time.time()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.phone is not None:
                self.phone.__exit__(*exc)
        finally:
            HELD.append((self.device, self._taken, time.time()))
            self.host.__exit__(*exc)
