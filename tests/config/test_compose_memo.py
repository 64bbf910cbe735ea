"""The tests' memo of Hydra compositions (helpers.compose_memo) answers only what Hydra would:
an edited file, another override or another value of a variable the config reads composes
anew, and every answer is a copy of its own."""

from __future__ import annotations

from pathlib import Path

from helpers import compose_memo
from phonetrain.config import compose


def test_the_memo_composes_anew_whatever_could_change_the_result(conf: Path, monkeypatch):
    calls: list[list[str]] = []

    def counted(conf_dir, overrides):
        calls.append(list(overrides))
        return compose._compose(conf_dir, overrides)

    memo = compose_memo.memoized(counted)
    monkeypatch.setenv("PHONETRAIN_MEMO_TITLE", "one")
    title = ["sweep=test", "report.title=${oc.env:PHONETRAIN_MEMO_TITLE}"]
    with compose._private_hydra(conf):
        first = memo(conf, title)
        again = memo(conf, title)
        assert len(calls) == 1 and again == first and again is not first
        again[0]["report"]["title"] = "changed by a test"
        assert memo(conf, title)[0]["report"]["title"] == "one" and len(calls) == 1

        monkeypatch.setenv("PHONETRAIN_MEMO_TITLE", "two")   # a variable the config reads
        assert memo(conf, title)[0]["report"]["title"] == "two" and len(calls) == 2

        assert memo(conf, ["sweep=test", "measure.iterations=7"])[0]["measure"][
            "iterations"] == 7 and len(calls) == 3                    # another override
        model = conf / "model" / "mlp_784_256_128_16.yaml"
        model.write_text(model.read_text().replace("lr: 0.05", "lr: 0.25"))
        assert "lr: 0.25" in model.read_text()
        assert memo(conf, ["sweep=test"])[0]["model"]["lr"] == 0.25 and len(calls) == 4
        assert memo(conf, ["sweep=test"])[0]["model"]["lr"] == 0.25 and len(calls) == 4
