"""The shares of host_load a job takes by its work and whether its device runs on this host's
CPU (the transport's trait), and the record a measuring job writes
(phonetrain.stages.schedule)."""

from __future__ import annotations

import json
import threading

from phonetrain.stages import schedule
from phonetrain.stages.schedule import DEVICE, HOST, MEASURE, TRAIN, host_share


def test_a_measurement_on_this_hosts_cpu_takes_every_share_and_a_phone_none():
    assert host_share(MEASURE, True, 4) == 4
    assert host_share(DEVICE, True, 4) == host_share(HOST, False, 4) == 1
    assert host_share(MEASURE, False, 4) == host_share(DEVICE, False, 4) == 0
    assert schedule.device_resource("pixel-7.a") == "device_pixel_7_a"


def test_a_phones_train_job_never_runs_beside_a_local_measurement():
    """A phone's train job verifies its runs and converts its trace on this host's CPU: with
    any total, it and a job measuring the local device together ask for more shares than
    there are, so Snakemake never runs them at once; phones still train beside each other
    (one share each) and their other measuring jobs take none."""
    for total in (1, 2, 4, 16):
        local = host_share(MEASURE, True, total)
        assert local == host_share(TRAIN, True, total) == total
        assert host_share(TRAIN, False, total) + local > total
        assert host_share(TRAIN, False, total) * total <= total   # `total` phones at once
        assert host_share(MEASURE, False, total) == 0


def test_a_virtual_phone_on_this_host_takes_the_host_like_the_local_device():
    """A virtual phone (or an emulator) behind this host's adb server runs its runner on this
    host's CPU: its measuring jobs take every share, as the local device's do; a phone on USB
    or at another address takes none."""
    from phonetrain.devices import shares_host_cpu
    local = {"name": "host", "transport": "local"}
    virtual = {"name": "vphone", "transport": "adb", "serial": "127.0.0.1:7100",
               "adb_host": None, "adb_port": 5037}
    usb = virtual | {"serial": "R58M1234ABC"}
    wifi = virtual | {"serial": "192.0.2.7:5555"}
    for dev, on_host in ((local, True), (virtual, True), (virtual | {"serial": "emulator-5554"},
                                                           True),
                         (virtual | {"serial": "localhost:7100", "adb_host": "localhost"}, True),
                         (usb, False), (wifi, False),
                         (virtual | {"adb_host": "192.0.2.9"}, False)):   # that host's loopback
        assert shares_host_cpu(dev) is on_host, dev
        assert host_share(MEASURE, shares_host_cpu(dev), 4) == (4 if on_host else 0), dev


def test_the_record_says_whether_the_job_held_the_host(monkeypatch):
    monkeypatch.delenv(schedule.SCHEDULE_ENV, raising=False)
    assert schedule.record(True) == {"scheduler": "none"}
    monkeypatch.setenv(schedule.SCHEDULE_ENV, json.dumps({"host_shares": 3, "cores": 3}))
    local, phone = schedule.record(True), schedule.record(False)
    assert local["alone_on_host"] and local["host_load"] == 3 and local["snakemake_cores"] == 3
    assert not phone["alone_on_host"] and phone["host_load"] == 1


def test_the_scheduler_keeps_one_daemon_reevaluation_timer(monkeypatch):
    """A hundred scheduling passes (as a study's job starts and ends make) leave one pending
    timer, a daemon, that releases the scheduler once; a sooner request gets its own; after
    it fires the next pass starts a new one. The installed Snakemake has the method patched,
    so a version that renames it fails here."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    monkeypatch.setattr(JobScheduler, "_schedule_reevalutation",
                        JobScheduler._schedule_reevalutation)   # undone after the test
    assert schedule.one_reevaluation_timer()

    class Scheduler:   # the attribute the method uses
        _open_jobs = threading.Semaphore(0)
        _schedule_reevalutation = JobScheduler._schedule_reevalutation

    s, before = Scheduler(), threading.active_count()
    for _ in range(100):
        s._schedule_reevalutation(0.3)
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    assert threading.active_count() - before == 1 and all(t.daemon for t in timers)
    assert s._open_jobs.acquire(timeout=5)
    assert not s._open_jobs.acquire(timeout=0.5)   # released once, not a hundred times
    s._schedule_reevalutation(0.05)                # the woken pass asks again: a new timer
    assert s._open_jobs.acquire(timeout=5)
    s._schedule_reevalutation(30)                  # a distant one pending ...
    s._schedule_reevalutation(0.05)                # ... does not swallow a sooner request
    assert s._open_jobs.acquire(timeout=5)
