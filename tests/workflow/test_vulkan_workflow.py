"""The workflow with backend vulkan on lavapipe: a shader that does not compile fails only its
own jobs, with glslc's message naming the shader file and line on the terminal and in the
deploy job's log (as a kernel version whose OpenCL source does not compile); a shader edit
reruns its run as a kernel edit does: a comment-only edit is "no change (identical build)"
without measuring, a change of the SPIR-V is measured in pairs beside the SPIR-V the previous
run kept."""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers.workflow import TINY, make_workspace, snakemake


SPIN = """float spin = 0.0;
    for (int r = 0; r < 16384; r++) spin += sin(spin + float(r));
    V[i] = spin == 1.0e30 ? 0.0 : v;"""


def test_a_broken_shader_fails_only_its_runs_and_an_edit_pairs_with_the_kept_spirv(
        lavapipe, runner, tmp_path: Path):
    """One workspace (the runner's compile is not the subject): a version whose shader does
    not compile beside ``baseline``, then edits of ``baseline``'s shader on the run that
    measured beside the failed one."""
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
    over = TINY + ["sweep.models=[mlp_16_16]", "sweep.backends=[vulkan]",
                   "sweep.kernels=[baseline,broken_vk]"]
    targets = [f"results/runs/host/mlp_16_16.vulkan.{k}/run.json"
               for k in ("baseline", "broken_vk")]
    p = snakemake(ws, *targets, "--keep-going", overrides=over)
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

    # the shader edits of baseline's run
    rdir = runs / "mlp_16_16.vulkan.baseline"
    target = targets[0]
    first = json.loads((rdir / "ran" / "ran.json").read_text())
    assert first["spirv"] is True and "sgd_update.spv" in first["sources"], first
    spv = (rdir / "ran" / "spirv" / "sgd_update.spv").read_bytes()
    measured = (rdir / "run.json").read_bytes()

    shader = ws / "src" / "kernels" / "baseline" / "vk" / "sgd_update.comp"
    text = shader.read_text()
    head, rest = text.split("\n", 1)     # after #version: a comment and a blank line
    shader.write_text(f"{head}\n// a comment-only edit\n\n" +
                      rest.replace("V[i] = v;", "V[i] = v;   /* the new velocity */"))
    p = snakemake(ws, target, overrides=over)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    doc = json.loads((rdir / "paired.json").read_text())
    assert doc["identical_build"] is True and doc["verdict"] == "no change", doc
    assert "SPIR-V" in doc["reason"], doc
    assert (rdir / "run.json").read_bytes() == measured          # nothing re-measured
    assert json.loads((rdir / "ran" / "ran.json").read_text())["build_key"] == \
        first["build_key"]

    # another SPIR-V with the same results, many times slower (so a few pairs decide)
    shader.write_text(shader.read_text().replace("V[i] = v;", SPIN))
    p = snakemake(ws, target, overrides=over)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    doc = json.loads((rdir / "paired.json").read_text())
    assert not doc.get("identical_build") and doc["pairs"] >= 2, doc
    assert doc["previous_verified"] is True and doc["verdict"] in ("slower", "cannot tell"), doc
    assert (rdir / "ran" / "spirv" / "sgd_update.spv").read_bytes() != spv
    prev = rdir / "previous"
    assert json.loads((prev / "ran.json").read_text())["build_key"] == first["build_key"]
    sources = [g["source"] for g in json.loads((prev / "plan.json").read_text())["programs"]]
    assert sources and all(s.startswith("spirv/baseline.previous/") for s in sources), sources
    assert len(list(prev.glob("process_*/run.json"))) == doc["pairs"]
    for f in prev.glob("process_*/run.json"):   # each pair: one process, both sides
        assert json.loads(f.read_text())["side_by_side"]["side"] == "previous"
