"""This machine's tuning records ($PHONETRAIN_TUNING_DIR): a damaged record is named and
tuned again, never used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phonetrain.stages import tuning_records


@pytest.mark.parametrize("text, problem", [
    ('{"classes": {"gemm_nn_8x8x8": {"defines": {"TSM": 6', "line 1 column"),
    (json.dumps({"class": {}, "default": None}), "no key 'classes'"),
    (json.dumps({"classes": {"c": {"defines": {"TSM": "64"}}}, "default": "c"}),
     "defines that are not integers"),
    (json.dumps({"classes": {}, "default": ["c"]}), "default ['c'] is not one of its classes"),
], ids=["truncated", "wrong-key", "string-define", "list-default"])
def test_a_damaged_record_is_named_and_tuned_again(tmp_path: Path, monkeypatch, capsys,
                                                   text, problem):
    monkeypatch.setenv("PHONETRAIN_TUNING_DIR", str(tmp_path))
    record = tuning_records.tuning_dir() / "abc.json"
    record.write_text(text)
    assert tuning_records.recall(record) is None
    err = capsys.readouterr().err
    assert err.startswith(f"phonetrain: {record}: not a tuning document (") and problem in err
    assert err.rstrip().endswith("tuning again (the new tuning replaces it)")
    assert len(err.splitlines()) == 1
