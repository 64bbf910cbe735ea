"""Scheduling around the devices (phonetrain.stages.schedule): with ``--cores 2`` a job
measuring the local device runs alone on the host (no other job's span overlaps it), and so
does one measuring a virtual phone served from this host (its runner runs on this host's
CPU: the transport's trait), while each phone runs one job at a time; with an executor
plugin the build jobs go through the executor while every job that talks to a phone stays
on the submitting host. Phones with their own CPUs measuring in parallel is the schedule's
unit test (tests/stages/test_schedule.py): every phone here is virtual. Real Snakemake runs;
job spans from the job logs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers.adb import connect_vdev, disconnect_vdev
from helpers.jobs import MEASURING, overlapping, spans
from helpers.workflow import SNAKEMAKE, TINY, env, make_workspace
from phonetrain import layout
from phonetrain.layout import Layout
from phonetrain.stages import schedule
from workflow.test_adb_workflow import SMALL, snakemake as adb_snakemake, workspace

# how often Snakemake looks whether an executor's jobs ended (its default, 10 s, suits a
# cluster's queue; these jobs run on this host and end within seconds)
STATUS_EVERY_S = ("--seconds-between-status-checks", "1")
PHONE_RULES = {"build_kernels", "deploy", "train", "gemm", "tune", "tune_squares",
               "bandwidth", "peaks"}


def test_a_local_measurement_runs_alone_on_the_host(completed_workspace: Path):
    R = completed_workspace / "results"
    jobs = spans(R)
    measuring = [j for j in jobs if j.rule in MEASURING and j.device == "host"]
    assert {j.rule for j in measuring} >= {"train", "gemm", "bandwidth", "peaks"}, jobs
    assert len(jobs) > len(measuring) > 4
    assert overlapping(measuring, jobs) == []
    for run in (R / "runs" / "host").iterdir():
        doc = json.loads((run / "schedule.json").read_text())
        assert doc["alone_on_host"] and doc["host_load"] == doc["host_shares"] == 2, doc
        assert doc["snakemake_cores"] == 2 and doc["measured_from_s"] <= doc["measured_to_s"]


@pytest.fixture(scope="module")
def two_phones(adb_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two-phones")
    vds = [connect_vdev(adb_server, tmp / f"phone{i}") for i in (1, 2)]
    try:
        yield tmp, {f"vphone{i}": vd.serial for i, vd in enumerate(vds, 1)}
    finally:
        for vd in vds:
            disconnect_vdev(adb_server, vd)


def test_two_virtual_phones_on_this_host_measure_alone_one_job_each(two_phones, runner):
    """Two virtual phones run their runners on this host's CPU: their measuring jobs take the
    whole host (never at once, and beside no other job), as the local device's do, and each
    phone runs one job at a time."""
    tmp, phones = two_phones
    (tmp / "cores").mkdir()
    ws = workspace(tmp / "cores", phones, runner)
    # two CPU runs per phone (two models), each sleeping 2 s under its phone's lock
    # (cool-down): measuring spans long enough to meet whenever two phones' jobs were started
    # together; each phone's kernel build is asked for by name (no OpenCL run needs it), so
    # every rule that talks to a phone but tuning runs on both
    over = SMALL + ["sweep.devices=[vphone1,vphone2]", "sweep.backends=[cpu]",
                    "sweep.models=[mlp_16_16,mlp_16_16_16_16]", "measure.cooldown_s=2"]
    builds = [Layout("results").kernel_build(p, "baseline") for p in phones]
    # one invocation: the build, deploy and measuring jobs are scheduled together
    res = adb_snakemake(ws, over, "results/summary/runs.parquet", *builds)
    assert res.returncode == 0, res.stderr[-4000:]
    jobs = spans(ws / "results")
    by_phone = {p: [j for j in jobs if j.device == p and j.rule in PHONE_RULES] for p in phones}
    for p, own in by_phone.items():
        assert {j.rule for j in own} == PHONE_RULES - {"tune", "tune_squares"}, own
        assert sum(j.rule == "train" for j in own) == 2, own
        assert overlapping(own, own) == [], p   # one job at a time on a phone
    measuring = [j for j in jobs if j.rule in MEASURING]
    assert {j.device for j in measuring} == set(phones), measuring
    assert overlapping(measuring, jobs) == [], "a virtual phone measured beside another job"
    for p in phones:
        doc = json.loads((ws / f"results/runs/{p}/mlp_16_16.cpu.none/schedule.json").read_text())
        assert doc["alone_on_host"] and doc["host_load"] == doc["host_shares"] == 2, doc


SUBMIT = """#!/bin/sh
# cluster-generic submit command: note the job's rule, run its job script in the background
grep -o '"rule": *"[a-z_]*"' "$1" | head -1 >> "{seen}"
bash "$1" > "$1.out" 2>&1 &
echo $!
"""


def test_builds_go_through_an_executor_while_phone_jobs_stay_local(two_phones, runner):
    if importlib.util.find_spec("snakemake_executor_plugin_cluster_generic") is None:
        pytest.skip("snakemake-executor-plugin-cluster-generic is not installed "
                    "(pip install -e '.[test]')")
    tmp, phones = two_phones
    one = dict([next(iter(phones.items()))])
    (tmp / "executor").mkdir()
    ws = workspace(tmp / "executor", one, runner)
    seen = tmp / "submitted.txt"
    submit = tmp / "submit.sh"
    submit.write_text(SUBMIT.format(seen=seen))
    submit.chmod(0o755)
    [phone] = one
    over = SMALL + [f"sweep.devices=[{phone}]"]
    # a job of each rule that talks to the phone (the OpenCL run brings its kernel build and
    # deploy), with the build jobs they need (runner, data, lowering, GEMM shapes); the
    # summary's aggregate is neither kind
    L = Layout("results")
    targets = [L.run_file(phone, "mlp_16_16.opencl.baseline", layout.RUN),
               L.gemm(phone, "baseline"), L.bandwidth(phone), L.peaks(phone)]
    res = adb_snakemake(ws, over, "--executor", "cluster-generic",
                        "--cluster-generic-submit-cmd", str(submit), "--jobs", "2",
                        *STATUS_EVERY_S, *targets)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-4000:]
    remote = {line.split('"')[-2] for line in seen.read_text().splitlines()}
    assert "build_runner" in remote and "lower" in remote, remote
    assert remote.isdisjoint(PHONE_RULES), remote
    jobs = spans(ws / "results")
    assert {j.rule for j in jobs} >= PHONE_RULES - {"tune", "tune_squares"}


BARRIER = """#!/bin/sh
# cluster-generic submit command, given the job's runtime and mem_mb, then its job script:
# note them and run the script in the background once 4 jobs were submitted (at most 60 s
# later; a job that had to start without the others says so)
for script; do :; done
echo "$1 $2" >> "{seen}"
( n=0
  while [ "$(wc -l < "{seen}")" -lt 4 ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
  [ "$(wc -l < "{seen}")" -ge 4 ] || echo "$script" >> "{alone}"
  bash "$script" ) > "$script.out" 2>&1 &
echo $!
"""


def test_an_executor_runs_its_jobs_beside_the_hosts_limit(tmp_path: Path):
    """Four lowering jobs through the cluster-generic executor with --jobs 4 on a host the
    workflow may use 2 CPUs of: all four are submitted at once (no --resources), each with
    the rule's runtime and mem_mb."""
    if importlib.util.find_spec("snakemake_executor_plugin_cluster_generic") is None:
        pytest.skip("snakemake-executor-plugin-cluster-generic is not installed "
                    "(pip install -e '.[test]')")
    ws = make_workspace(tmp_path / "ws")
    seen, alone = tmp_path / "submitted.txt", tmp_path / "alone.txt"
    submit = tmp_path / "submit.sh"
    submit.write_text(BARRIER.format(seen=seen, alone=alone))
    submit.chmod(0o755)
    exps = ["mlp_16_16.cpu.none", "mlp_16_16.opencl.baseline", "mlp_784_256_128_16.cpu.none",
            "mlp_784_256_128_16.opencl.baseline"]
    two = sorted(os.sched_getaffinity(0))[:2]   # the host's limit: 2 (or 1) CPUs
    p = subprocess.run(
        [str(SNAKEMAKE), "--executor", "cluster-generic", "--cluster-generic-submit-cmd",
         f"{submit} {{resources.runtime}} {{resources.mem_mb}}", "--jobs", "4", *STATUS_EVERY_S,
         *[f"results/plans/{e}" for e in exps], "--config", f"overrides={json.dumps(TINY)}"],
        cwd=ws, env=env(ws), capture_output=True, text=True, timeout=900,
        preexec_fn=lambda: os.sched_setaffinity(0, two))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-4000:]
    assert not alone.exists(), alone.read_text()   # all four ran at once
    limits = [tuple(int(x) for x in line.split()) for line in seen.read_text().splitlines()]
    assert limits == [(schedule.limits("lower")["runtime"],
                       schedule.limits("lower")["mem_mb"])] * 4, limits
    assert "host_load=0" in p.stderr and "warn" not in p.stderr.lower(), p.stderr[-3000:]
