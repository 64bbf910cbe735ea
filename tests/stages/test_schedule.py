"""The shares of host_load a job takes by its work and its device's transport, and the record
a measuring job writes (phonetrain.stages.schedule)."""

from __future__ import annotations

import json

from phonetrain.stages import schedule
from phonetrain.stages.schedule import DEVICE, HOST, MEASURE, host_share


def test_a_local_measurement_takes_every_share_and_a_phone_none():
    assert host_share(MEASURE, "local", 4) == 4
    assert host_share(DEVICE, "local", 4) == host_share(HOST, "adb", 4) == 1
    assert host_share(MEASURE, "adb", 4) == host_share(DEVICE, "adb", 4) == 0
    assert schedule.device_resource("pixel-7.a") == "device_pixel_7_a"


def test_the_record_says_whether_the_job_held_the_host(monkeypatch):
    monkeypatch.delenv(schedule.SCHEDULE_ENV, raising=False)
    assert schedule.record("local") == {"scheduler": "none"}
    monkeypatch.setenv(schedule.SCHEDULE_ENV, json.dumps({"host_shares": 3, "cores": 3}))
    local, phone = schedule.record("local"), schedule.record("adb")
    assert local["alone_on_host"] and local["host_load"] == 3 and local["snakemake_cores"] == 3
    assert not phone["alone_on_host"] and phone["host_load"] == 0
