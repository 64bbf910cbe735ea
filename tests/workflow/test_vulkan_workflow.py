"""The workflow with backend vulkan on lavapipe: a shader that does not compile fails only its
own jobs, with glslc's message naming the shader file and line on the terminal and in the
deploy job's log (as a kernel version whose OpenCL source does not compile)."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.workflow import TINY, make_workspace, snakemake


def test_a_shader_that_does_not_compile_fails_only_its_runs(lavapipe, runner, tmp_path: Path):
    ws = make_workspace(tmp_path / "ws", runner)
    kdir = ws / "src" / "kernels" / "broken_vk"
    (kdir / "vk").mkdir(parents=True)
    (kdir / "version.yaml").write_text("inherits: baseline\n")
    lines = (ws / "src" / "kernels" / "baseline" / "vk" / "sgd_update.comp").read_text() \
        .splitlines(keepends=True)
    bad = next(i for i, ln in enumerate(lines) if "V[i] = v;" in ln)
    lines[bad] = lines[bad].replace(";", "")           # a missing semicolon
    (kdir / "vk" / "sgd_update.comp").write_text("".join(lines))
    (ws / "conf" / "kernel" / "broken_vk.yaml").write_text("name: broken_vk\n")
    runs = ws / "results" / "runs" / "host"
    targets = [f"results/runs/host/mlp_16_16.vulkan.{k}/run.json"
               for k in ("baseline", "broken_vk")]
    p = snakemake(ws, *targets, "--keep-going",
                  overrides=TINY + ["sweep.models=[mlp_16_16]", "sweep.backends=[vulkan]",
                                    "sweep.kernels=[baseline,broken_vk]"])
    msg = p.stdout + p.stderr
    assert p.returncode != 0
    # glslc reports the error on the line after the missing semicolon or on it
    where = re.escape("src/kernels/broken_vk/vk/sgd_update.comp:") + f"({bad + 1}|{bad + 2})" \
        + re.escape(": error")
    assert re.search(where, msg), msg[-4000:]
    logs = list((ws / "results" / "logs").glob("deploy/host/*broken_vk*"))
    assert logs and re.search(where, logs[0].read_text()), logs
    assert str(logs[0].relative_to(ws)) in msg          # the terminal names the log
    assert (runs / "mlp_16_16.vulkan.baseline" / "run.json").is_file()
    assert not (runs / "mlp_16_16.vulkan.broken_vk" / "run.json").exists()
