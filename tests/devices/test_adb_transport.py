"""The adb transport against the real adb server and the virtual device."""

from __future__ import annotations

import threading
import time

import pytest

from helpers.adb import connect_vdev, disconnect_vdev, wait_for_pid, wait_until_stopped
from helpers.sysfs import ChangeAfterOpens
from phonetrain.devices.adb import AdbTransport, Cooldown, parse_readings
from phonetrain.devices.base import TransportError
from phonetrain.devices.virtual import Faults


def transport(client, vd, **kw) -> AdbTransport:
    return AdbTransport("vphone", vd.serial, adb_port=client.port, **kw)


def make_bundle(root):
    (root / "plans/p1/tensors").mkdir(parents=True)
    (root / "plans/p1/plan.json").write_text('{"version": 1}')
    (root / "plans/p1/tensors/w.f32").write_bytes(b"\0" * 70_000)
    (root / "runner").write_text("#!/bin/sh\necho runner \"$@\"\n")
    (root / "runner").chmod(0o755)
    return root


def test_push_is_incremental_by_content_hash(adb_server, vdev, tmp_path):
    t = transport(adb_server, vdev)
    bundle = make_bundle(tmp_path / "bundle")
    assert t.push(bundle / "plans/p1", "plans/p1") == 2
    assert t.push(bundle / "runner", "runner") == 1
    assert (vdev.root / "phonetrain/plans/p1/tensors/w.f32").stat().st_size == 70_000
    assert t.push(bundle / "plans/p1", "plans/p1") == 0  # nothing changed: nothing sent
    (bundle / "plans/p1/plan.json").write_text('{"version": 2}')
    assert t.push(bundle / "plans/p1", "plans/p1") == 1
    # a file damaged on the device is detected by its hash and sent again
    (vdev.root / "phonetrain/plans/p1/tensors/w.f32").write_bytes(b"\0" * 10)
    assert t.push(bundle / "plans/p1", "plans/p1") == 1
    res = t.run(["./runner", "info"], timeout_s=10)  # the exec bit survived the push
    assert (res.returncode, res.stdout) == (0, "runner info\n")


def test_run_keeps_stderr_and_exit_status_of_a_crash(adb_server, vdev, tmp_path):
    t = transport(adb_server, vdev)
    crash = tmp_path / "runner"
    crash.write_text("#!/bin/sh\necho 'bad plan: no tensors' >&2\nkill -SEGV $$\n")
    crash.chmod(0o755)
    t.push(crash, "runner")
    res = t.run(["./runner", "run"], timeout_s=10)
    assert res.returncode == 128 + 11
    assert "bad plan" in res.stderr and res.stdout == ""


def test_run_timeout_stops_the_command(adb_server, vdev):
    t = transport(adb_server, vdev)
    t.shell("mkdir -p /data/local/tmp/phonetrain", timeout_s=10)
    pid_file = vdev.root / "phonetrain/pid"
    # 5 s: ample for the shell to start and write its pid, however loaded the host is
    with pytest.raises(TransportError, match="timed out after 5 s"):
        t.run(["sh", "-c", "echo $$ > pid; while true; do echo tick; sleep 0.1; done"],
              timeout_s=5)
    wait_until_stopped(wait_for_pid(pid_file))


def test_pull_verifies_expected_files_before_writing(adb_server, vdev, tmp_path):
    t = transport(adb_server, vdev)
    out = vdev.root / "phonetrain/out/r1"
    (out / "dumps").mkdir(parents=True)
    (out / "run.json").write_text('{"status": "ok"}')
    (out / "trace.csv").write_text("")
    (out / "dumps/w.f32").write_bytes(b"\1" * 100_000)
    dest = tmp_path / "results/raw/r1"
    with pytest.raises(TransportError, match="trace.csv"):
        t.pull("out/r1", dest, expect=["run.json", "trace.csv"])
    with pytest.raises(TransportError, match="losses.csv"):
        t.pull("out/r1", dest, expect=["run.json", "losses.csv"])
    with pytest.raises(TransportError, match="output folder missing"):
        t.pull("out/nope", dest, expect=["run.json"])
    assert not dest.exists() and list(dest.parent.iterdir()) == []  # no temp dirs left
    t.pull("out/r1", dest, expect=["run.json", "dumps/w.f32"])
    assert (dest / "dumps/w.f32").read_bytes() == b"\1" * 100_000
    assert (dest / "trace.csv").exists()


def plant_tree(out):
    """A run's output folder: nested, 60 files of distinct contents, one of them empty."""
    files = {"run.json": b'{"status": "ok"}', "trace.csv": b""}
    for i in range(58):
        files[f"ckpt/step{i // 10}/part{i}.bin"] = bytes([i]) * (1000 * i + 7)
    files["ckpt/big.bin"] = bytes(range(256)) * 1000  # several 64 KiB DATA chunks
    for rel, data in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    return files


def test_pull_of_a_nested_folder_over_one_connection_checks_every_file(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "device", Faults(short_recv="*/part13.bin"))
    try:
        t = transport(adb_server, vd)
        files = plant_tree(vd.root / "phonetrain/out/r1")
        dest = tmp_path / "results/raw/r1"
        with pytest.raises(TransportError, match=r"pull incomplete: .*/out/r1/ckpt/step1/"
                           r"part13\.bin: 6503 of 13007 bytes"):
            t.pull("out/r1", dest, expect=["run.json"])
        assert not dest.exists() and list(dest.parent.iterdir()) == []  # no temp dirs left
        vd.faults.short_recv, vd.faults.fail_recv = None, "*/part5.bin"
        with pytest.raises(TransportError, match=r"pull of .*/out/r1 failed: .*/out/r1/ckpt/"
                           r"step0/part5\.bin: No such file or directory"):
            t.pull("out/r1", dest, expect=["run.json"])
        vd.faults.fail_recv = None
        with pytest.raises(TransportError, match=r"expected output missing or empty: "
                           r".*/out/r1/trace\.csv"):
            t.pull("out/r1", dest, expect=["run.json", "trace.csv"])
        t.pull("out/r1", dest, expect=["run.json", "ckpt/big.bin"])
        got = {p.relative_to(dest).as_posix(): p.read_bytes()
               for p in dest.rglob("*") if p.is_file()}
        assert got == files
    finally:
        disconnect_vdev(adb_server, vd)


def test_facts_come_from_getprop(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev",
                      props={"ro.product.model": "Pixel 7", "ro.soc.model": "GS201",
                             "ro.build.version.release": "14", "ro.product.cpu.abi": "arm64-v8a"})
    try:
        facts = transport(adb_server, vd).facts()
        assert facts == {"serial": vd.serial, "model": "Pixel 7", "soc_model": "GS201",
                         "android_version": "14", "abi": "arm64-v8a"}
    finally:
        disconnect_vdev(adb_server, vd)


def fake_sysfs(root, zone_mc: int):
    z = root / "class/thermal/thermal_zone0"
    z.mkdir(parents=True)
    (z / "type").write_text("cpu-0-0\n")
    (z / "temp").write_text(f"{zone_mc}\n")
    kgsl = root / "class/kgsl/kgsl-3d0"
    kgsl.mkdir(parents=True)
    (kgsl / "gpuclk").write_text("585000000\n")
    (kgsl / "gpu_busy_percentage").write_text("37 %\n")
    cpu = root / "devices/system/cpu/cpu0/cpufreq"
    cpu.mkdir(parents=True)
    (cpu / "scaling_cur_freq").write_text("1804800\n")
    (root / "class/power_supply/battery").mkdir(parents=True)
    (root / "class/power_supply/battery/temp").write_text("312\n")
    return z / "temp"


def test_readings_and_cooldown_come_from_sysfs(adb_server, tmp_path):
    temp = fake_sysfs(tmp_path / "sys", 61_000)
    vd = connect_vdev(adb_server, tmp_path / "dev", sysfs_root=tmp_path / "sys")
    try:
        t = transport(adb_server, vd)
        r = t.readings()
        assert r == {"temp_c.thermal_zone0.cpu-0-0": 61.0, "gpu_freq_mhz": 585.0,
                     "gpu_busy_pct": 37.0, "cpu_freq_mhz.cpu0": 1804.8, "battery_temp_c": 31.2}
        hot = t.cooldown(Cooldown(threshold_c=45.0, limit_s=0.6, poll_s=0.2))
        assert hot["cooldown_timed_out"] == 1.0 and hot["cooldown_wait_s"] >= 0.6
        # the zone cools right after the cool-down's second read: its first read (and the
        # second) see 61 C, so it polls until a later read sees 40 C
        with ChangeAfterOpens(temp, opens=2, value=40_000) as cool:
            cooled = t.cooldown(Cooldown(threshold_c=45.0, limit_s=120, poll_s=0.1))
        assert cool.changed.is_set()
        assert cooled["cooldown_timed_out"] == 0.0
        assert (cooled["cooldown_start_c"], cooled["cooldown_end_c"]) == (61.0, 40.0)
        assert cooled["cooldown_wait_s"] >= 0.1  # at least one poll
    finally:
        disconnect_vdev(adb_server, vd)


def test_parse_readings_drops_sentinels_and_garbage():
    r = parse_readings({"thermal_mc.thermal_zone3.bms": "-273000", "thermal_mc.z.t": "45",
                        "adreno_busy_pct": "n/a", "battery_temp_dc": "250"})
    assert r == {"temp_c.z.t": 45.0, "battery_temp_c": 25.0}


def test_dropped_connection_mid_push_fails_then_resumes(adb_server, tmp_path):
    bundle = make_bundle(tmp_path / "bundle")
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(drop_after_bytes=20_000))
    try:
        with pytest.raises(TransportError, match="push of .* failed|connection lost"):
            transport(adb_server, vd).push(bundle / "plans/p1", "plans/p1")
    finally:
        disconnect_vdev(adb_server, vd)
    vd = connect_vdev(adb_server, vd.root)  # the cable is back: the rerun completes
    try:
        assert transport(adb_server, vd).push(bundle / "plans/p1", "plans/p1") >= 1
        assert transport(adb_server, vd).push(bundle / "plans/p1", "plans/p1") == 0
    finally:
        disconnect_vdev(adb_server, vd)


def test_failed_push_names_the_file(adb_server, tmp_path):
    bundle = make_bundle(tmp_path / "bundle")
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(fail_push="*.json"))
    try:
        with pytest.raises(TransportError, match="plan.json"):
            transport(adb_server, vd).push(bundle / "plans/p1", "plans/p1")
    finally:
        disconnect_vdev(adb_server, vd)


def test_offline_and_absent_devices_fail_with_a_hint(adb_server, tmp_path):
    absent = AdbTransport("ghost", "127.0.0.1:1", adb_port=adb_server.port)
    with pytest.raises(TransportError,
                       match=f"ghost.*state absent.*adb -P {adb_server.port} connect"):
        absent.run(["true"], timeout_s=5)
    vd = connect_vdev(adb_server, tmp_path / "dev")
    t = transport(adb_server, vd)
    vd.stop()
    time.sleep(0.5)
    with pytest.raises(TransportError, match="vphone"):
        t.run(["true"], timeout_s=5)
    adb_server.disconnect(vd.serial)


def test_measurements_on_one_device_are_serialized(adb_server, vdev, tmp_path, monkeypatch):
    monkeypatch.setenv("PHONETRAIN_LOCK_DIR", str(tmp_path / "locks"))
    spans = []

    def measure():
        t = transport(adb_server, vdev)
        with t.lock():
            start = time.monotonic()
            t.shell("sleep 0.4", timeout_s=10)
            spans.append((start, time.monotonic()))

    threads = [threading.Thread(target=measure) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0  # the second measurement started after the first ended


def test_device_without_shell_v2_gets_exit_status_and_stderr_from_files(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev", features="")
    try:
        t = transport(adb_server, vd)
        assert "shell_v2" not in t.features()
        t.shell("mkdir -p /data/local/tmp/phonetrain", timeout_s=10)
        res = t.run(["sh", "-c", "echo out; echo err >&2; exit 4"], timeout_s=10)
        assert (res.returncode, res.stdout, res.stderr) == (4, "out\n", "err\n")
        with pytest.raises(TransportError, match="timed out"):
            t.run(["sleep", "30"], timeout_s=0.5)
        assert not list((vd.root / "phonetrain/.cmd").glob("*.rc"))  # tidied after use
    finally:
        disconnect_vdev(adb_server, vd)
