"""backend=vulkan on the virtual phone over the real adb server: the deploy pushes the SPIR-V
its host compiled, the phone's runner trains on its Vulkan device (the host's lavapipe behind
the sandbox) and every step verifies; a shader edit then reruns exactly that run's deploy and
train (and what reads them), as an OpenCL kernel edit does."""

from __future__ import annotations

import json

import yaml

from helpers import REPO
from helpers.adb import connect_vdev, disconnect_vdev
from helpers.workflow import TINY, make_workspace, planned, snakemake


def test_vulkan_runs_on_the_virtual_phone_and_a_shader_edit_reruns_it(adb_server, lavapipe,
                                                                      tmp_path, runner):
    vd = connect_vdev(adb_server, tmp_path / "phone")
    try:
        ws = make_workspace(tmp_path / "ws", runner)
        host = yaml.safe_load((REPO / "conf/device/host.yaml").read_text())
        (ws / "conf/device/vphone.yaml").write_text(yaml.safe_dump(
            dict(host, name="vphone", transport="adb", serial=vd.serial, toolchain="host")))
        over = TINY + ["sweep.models=[mlp_16_16]", "sweep.devices=[vphone]",
                       "sweep.backends=[vulkan]", "measure.tune=false"]
        rdir = "results/runs/vphone/mlp_16_16.vulkan.baseline"
        target = f"{rdir}/trace.perfetto.json"
        p = snakemake(ws, target, overrides=over)
        assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
        run = json.loads((ws / rdir / "run.json").read_text())
        assert run["status"] == "ok" and run["device"]["api"] == "vulkan"
        assert json.loads((ws / rdir / "verify.json").read_text())["ok"] is True
        pushed = sorted(p.name for p in vd.root.rglob("spirv/baseline/*.spv"))
        assert "sgd_update.spv" in pushed and "gemm_nt.spv" in pushed, pushed
        assert planned(ws, over, targets=(target,)) == {}
        shader = ws / "src/kernels/baseline/vk/sgd_update.comp"
        shader.write_text(shader.read_text().replace("V[i] = v;", "V[i] = v + 0.0;"))
        jobs = planned(ws, over, targets=(target,))
        assert jobs.get("deploy") == 1 and jobs.get("train") == 1, jobs
        assert not jobs.keys() - {"deploy", "train", "perfetto"}, jobs
    finally:
        disconnect_vdev(adb_server, vd)
