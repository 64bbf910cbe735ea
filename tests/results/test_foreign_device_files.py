"""A per-device raw file that is a JSON object of the wrong shape (hand-edited, or another
tool's) is one message naming it, from the reader of its table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phonetrain.errors import ResultsFileError
from phonetrain.results import readers


@pytest.mark.parametrize("read, doc, needle", [
    (readers.read_gemm, {"device": "host", "version": "tiled"}, "no key 'rows'"),
    (readers.read_gemm, {"device": "host", "version": "tiled", "rows": [1]}, "not subscriptable"),
    (lambda p: readers.gemm_not_current(p, "older sources"), {"rows": []}, "no key 'device'"),
    (readers.read_peaks, {"compute": {"float": 1}}, "string indices"),
    (readers.read_peaks, {"bandwidth": [{"gbps": 1}]}, "no key 'kernel'"),
    (readers.read_build, {"programs": ["gemm"]}, "has no attribute 'get'"),
], ids=["gemm-no-rows", "gemm-row-int", "gemm-stale-no-device", "peaks-map", "peaks-no-kernel",
        "build-program-str"])
def test_a_file_of_the_wrong_shape_names_itself(tmp_path: Path, read, doc, needle):
    path = tmp_path / "build" / "host" / "kernels" / "tiled" / "build.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError) as e:   # was: KeyError / TypeError / AttributeError
        read(path)
    assert e.value.message.startswith(f"{path}: not a ") and needle in e.value.message
    assert e.value.hint == "delete it: the next snakemake all makes it again"
