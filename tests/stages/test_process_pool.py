"""An attempt that is unstable or wider than measure.ci_target is followed by more runner
processes, not a fresh pair: the processes of every uncontended attempt are pooled and judged
together, and an attempt on a contended host is set aside. Real runner, one-off `phonetrain
run`; the wide interval is planted by a target no measurement meets, contention by a quiet
figure no host reaches or by the verdict of one attempt."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from phonetrain import layout
from phonetrain.cli import main
from phonetrain.results import runs
from phonetrain.stages import train

MODEL = "mlp_16_16"
RUN = ["run", f"model={MODEL}", "device=host", "backend=cpu", "measure.warmup=1",
       "measure.iterations=3", "measure.max_iterations=4", "measure.threads=1",
       "measure.max_other_cpu_share=1", "measure.max_attempts=3", "measure.progress=false"]


def _run(R: Path, *extra: str) -> tuple[dict, Path]:
    res = CliRunner().invoke(main, RUN + [f"results_dir={R}", *extra])
    assert res.exit_code == 0, (res.output, res.exception)
    run_dir = R / "runs/host" / f"{MODEL}.cpu.none"
    return json.loads((run_dir / layout.MEASUREMENT).read_text()), run_dir


def _repeats(run_dir: Path) -> list[str]:
    return sorted(d.name for d in run_dir.glob("repeat_*"))


def test_wide_attempts_pool_their_processes(seeded_results: Path):
    m, run_dir = _run(seeded_results, "measure.ci_target=1e-9",
                      "measure.max_probe_slowdown=0")
    assert not m["unstable"] and m["wide_interval"] and "usable" in m["notes"][0]
    assert m["attempts"] == 3 and len(m["earlier_reasons"]) == 2
    assert m["process_attempts"] == [1, 1, 2, 2, 3, 3] and m["processes"] == 6
    assert _repeats(run_dir) == [f"repeat_{k}" for k in range(1, 6)]
    assert not list(run_dir.glob("attempt_*")) and not list(run_dir.glob(".train-*"))
    it = runs.read_run(run_dir)["iterations"]
    assert sorted(it["repeat"].unique()) == list(range(6))
    # the verdict is over all six processes: the estimate lies in the pooled iterations' range
    walls = it.loc[it["measured"], "wall_ms"]
    assert walls.min() <= m["estimate_ms"] <= walls.max()


def test_a_host_contended_to_the_end_of_an_attempt_is_not_measured_again(
        seeded_results: Path):
    """Every probe reads far slower than a planted quiet figure, the first attempt's closing
    probe too: a second attempt would be set aside as well, so none runs, and the first
    attempt's processes are kept with the reason and why it stopped."""
    R = seeded_results
    (R / "probe").mkdir(parents=True)
    (R / "probe/host.json").write_text(json.dumps({"quiet_ms": {"1": 1e-6}}))
    m, run_dir = _run(R, "measure.ci_target=0")
    assert m["unstable"] and m["attempts"] == 1 and m["max_attempts"] == 3
    assert "slower than its quiet figure" in m["reasons"][0]
    assert "attempt 1 ended with the host still contended" in m["stopped_contended"]
    assert "measure.max_probe_slowdown 1.5" in m["stopped_contended"]
    assert m["process_attempts"] == [1, 1] and _repeats(run_dir) == ["repeat_1"]


def test_a_contended_attempt_that_ends_quiet_is_measured_again(seeded_results: Path,
                                                               monkeypatch):
    """The first attempt's verdict says the host was contended, but against its planted quiet
    figure (far above any probe) its closing probe reads quiet: the contention passed, so the
    next attempt runs and the pooled verdict is the later attempts'."""
    real = train.judge_measurement

    def judged(dirs, ms, records=()):
        v = real(dirs, ms, records)
        if any(d.parent.name == "attempt_1" for d in dirs):
            v |= {"unstable": True, "reasons": ["planted contention"], "quiet_probe_ms": 1e9}
        return v

    monkeypatch.setattr(train, "judge_measurement", judged)
    m, _ = _run(seeded_results, "measure.ci_target=0", "measure.max_probe_slowdown=1e12")
    assert m["attempts"] == 2 and m["process_attempts"] == [2, 2]
    assert m["earlier_reasons"] == [["planted contention"]]
    assert "stopped_contended" not in m and not m["unstable"]


def test_a_contended_first_attempt_is_left_out_of_the_pool(seeded_results: Path, monkeypatch):
    """The first attempt's verdict says the host was contended (planted); the pool holds the
    later attempts' processes only, and the verdict is theirs."""
    real = train.judge_measurement

    def judged(dirs, ms, records=()):
        v = real(dirs, ms, records)
        if any(d.parent.name == "attempt_1" for d in dirs):
            v |= {"unstable": True, "reasons": ["planted contention"]}
        return v

    monkeypatch.setattr(train, "judge_measurement", judged)
    m, run_dir = _run(seeded_results, "measure.ci_target=1e-9",
                      "measure.max_probe_slowdown=0")
    assert m["process_attempts"] == [2, 2, 3, 3] and m["processes"] == 4
    assert m["earlier_reasons"][0][0] == "planted contention"
    assert not m["unstable"] and m["wide_interval"] and "wider than" in m["notes"][0]
    assert _repeats(run_dir) == ["repeat_1", "repeat_2", "repeat_3"]
    # the verified process is an attempt's first, the only one of each attempt that keeps
    # the plan's checkpoints (repeat_2 is attempt 3's first)
    ckpt = lambda d: json.loads((d / layout.RUN).read_text())["checkpoints"]  # noqa: E731
    assert ckpt(run_dir) and (run_dir / "checkpoints").is_dir()
    assert json.loads((run_dir / layout.VERIFY).read_text())["ok"]
    assert ckpt(run_dir / "repeat_1") == ckpt(run_dir / "repeat_3") == []
    assert ckpt(run_dir / "repeat_2")
