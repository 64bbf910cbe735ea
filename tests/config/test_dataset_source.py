"""The dataset folder: an explicit dataset.path must exist and hold the files (never another
folder is read instead), checked when the config is composed, before any job; the folder
actually read is recorded beside the batches; a gzip file damaged inside its compressed
stream is one message naming the file."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from phonetrain.config import ConfigError, compose_one, compose_sweep
from phonetrain.data import DatasetError, load, mnist, write_idx
from phonetrain.stages.job import main as stage_main
from phonetrain.stages.train import DATA_SOURCE, STAGES


def _idx_folder(folder: Path, n: int = 64, compress: bool = True) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    suffix = ".gz" if compress else ""
    write_idx(folder / f"train-images-idx3-ubyte{suffix}",
              rng.integers(0, 255, (n, 28, 28), dtype=np.uint8), compress)
    write_idx(folder / f"train-labels-idx1-ubyte{suffix}",
              rng.integers(0, 10, n, dtype=np.uint8), compress)
    return folder


@pytest.fixture
def debian(tmp_path, monkeypatch) -> Path:
    """A stand-in for Debian's Fashion-MNIST folder (a known install location)."""
    folder = _idx_folder(tmp_path / "usr-share-fashion-mnist")
    monkeypatch.setitem(mnist.KNOWN_FOLDERS, "fashion_mnist", [folder])
    return folder


def test_a_missing_path_fails_at_composition_naming_it(debian, tmp_path):
    missing = tmp_path / "nonexistent"
    for compose in (lambda o: compose_sweep(["sweep=test", "sweep.models=[lenet5]", *o]),
                    lambda o: compose_one(["model=lenet5", *o])):
        with pytest.raises(ConfigError) as e:
            compose(["dataset.name=fashion_mnist", f"dataset.path={missing}"])
        msg = str(e.value)
        assert f"override 'dataset.path={missing}'" in msg and "does not exist" in msg, msg


def test_an_explicit_folder_is_the_only_one_read(debian, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match=str(empty)):
        load("fashion_mnist", folder=empty)  # not Debian's folder instead
    x, y = load("fashion_mnist")  # no path: the known location
    assert x.shape == (64, 1, 28, 28) and len(y) == 64
    assert compose_sweep(["sweep=test", "sweep.models=[lenet5]",
                          "dataset.name=fashion_mnist"]).root["dataset"]["path"] is None


def test_a_path_for_a_dataset_that_reads_none_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="digits reads no folder"):
        compose_sweep(["sweep=test", f"dataset.path={tmp_path}"])


def _data_stage(tmp_path: Path, dataset: str, folder: Path | None, capsys) -> tuple[int, str]:
    p = {"batch_size": 8, "dataset": dataset, "dir": f"data/{dataset}/b8", "input_shape": None,
         "classes": None, "seed": 0, "heldout": None,
         "dataset_config": {"allow_download": False, "name": dataset, "num_batches": 2,
                            "path": str(folder) if folder else None}}
    rc = stage_main(STAGES, ["data", "--log", str(tmp_path / "data.log"), "--params",
                             json.dumps(p), "--output", f"dir={tmp_path / 'out'}"])
    return rc, capsys.readouterr().err


def test_the_folder_read_is_recorded(debian, tmp_path, capsys):
    own = _idx_folder(tmp_path / "mine", compress=False)
    rc, err = _data_stage(tmp_path, "fashion_mnist", own, capsys)
    assert rc == 0, err
    assert json.loads((tmp_path / "out" / DATA_SOURCE).read_text())["source_folder"] == str(own)


def test_a_gzip_damaged_inside_its_stream_is_one_message(tmp_path, capsys):
    folder = _idx_folder(tmp_path / "mnist", n=2000)
    f = folder / "train-images-idx3-ubyte.gz"
    raw = bytearray(f.read_bytes())
    raw[10] ^= 0x55  # the first byte after the gzip header: the deflate stream's first block
    f.write_bytes(bytes(raw))
    with pytest.raises(zlib.error):  # what reading it raised before: a raw zlib traceback
        gzip.decompress(bytes(raw))
    with pytest.raises(DatasetError, match=str(f)):
        load("mnist", folder=folder)
    rc, err = _data_stage(tmp_path, "mnist", folder, capsys)
    assert rc == 1 and str(f) in err and "damaged" in err, err
    assert "Traceback" not in err and "zlib.error" not in err
