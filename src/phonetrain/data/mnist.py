"""MNIST and Fashion-MNIST from IDX files in a folder (raw or ``.gz``).

Folder search order: the ``folder`` argument, then the known locations below. Downloading
happens only with ``download=True``, into ``folder``, and every file's MD5 is checked against
the published checksums (the ones torchvision pins) before it is used.
"""

from __future__ import annotations

import hashlib
import urllib.request
from pathlib import Path

import numpy as np

from phonetrain.io import write_bytes

from .errors import DatasetError
from .idx import read_idx

FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
TEST_FILES = ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")  # the held-out split

# Known install locations. Debian's dataset-fashion-mnist package puts the four .gz files in
# /usr/share/datasets/fashion-mnist/ (checked with dpkg -c, version 0.0~git20200523.55506a9-1;
# its .gz files are recompressed, so their MD5s differ from the published ones below). Debian
# has no MNIST package.
KNOWN_FOLDERS = {
    "mnist": [],
    "fashion_mnist": [Path("/usr/share/datasets/fashion-mnist")],
}

MIRRORS = {
    "mnist": "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "fashion_mnist": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
}

MD5 = {
    "mnist": {"train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
              "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
              "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
              "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c"},
    "fashion_mnist": {"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                      "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
                      "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
                      "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"},
}

# Per-pixel mean and std of the training set in [0, 1] (the usual published constants).
NORMALIZE = {"mnist": (0.1307, 0.3081), "fashion_mnist": (0.2860, 0.3530)}


def _find(folder: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
        if (folder / name).is_file():
            return folder / name
    return None


def _download(name: str, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for fname, md5 in MD5[name].items():
        dest = folder / fname
        if dest.exists() and hashlib.md5(dest.read_bytes()).hexdigest() == md5:
            continue
        url = MIRRORS[name] + fname
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                body = r.read()
        except OSError as e:
            raise DatasetError(f"{name}: download of {url} failed ({e}); put the IDX files in "
                               f"{folder} by hand") from None
        got = hashlib.md5(body).hexdigest()
        if got != md5:
            raise DatasetError(f"{name}: {url} has MD5 {got}, expected {md5}; not used")
        write_bytes(dest, body)


def find_files(name: str, folder: str | Path | None = None, test: bool = False
               ) -> tuple[Path, list[Path]]:
    """The folder ``mnist``/``fashion_mnist`` is read from and its two IDX files
    (:data:`FILES`; :data:`TEST_FILES` with ``test``): an explicit ``folder`` only (never
    another), else the first of :data:`KNOWN_FOLDERS` holding them. Raises
    :class:`DatasetError` naming the folders searched when the files are missing."""
    candidates = [Path(folder)] if folder else KNOWN_FOLDERS[name]
    stems = TEST_FILES if test else FILES
    for cand in candidates:
        paths = [_find(cand, stem) for stem in stems]
        if all(paths):
            return cand, paths  # type: ignore[return-value]
    if folder and not Path(folder).is_dir():
        raise DatasetError(f"{name}: dataset.path {folder} does not exist; set dataset.path to "
                           f"the folder holding {stems[0]}[.gz] and {stems[1]}[.gz], or allow "
                           "download into it (dataset.allow_download=true)")
    searched = ", ".join(map(str, candidates)) or "no folder (dataset.path is not set)"
    raise DatasetError(f"{name}: no {stems[0]}[.gz] and {stems[1]}[.gz] in "
                       f"{searched}; set the dataset folder (dataset.path), "
                       f"install Debian's dataset-fashion-mnist (fashion_mnist), or allow "
                       "download")


def load_mnist_like(name: str, folder: str | Path | None = None, download: bool = False,
                    test: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Training split of ``mnist`` or ``fashion_mnist`` (the ``t10k`` test split with
    ``test``: the held-out split): ``(images float32 [N,1,28,28], labels int32 [N])``, pixels
    scaled to [0, 1] then standardized with :data:`NORMALIZE` (the training set's).
    Read from :func:`find_files`'s folder.

    Raises :class:`DatasetError` naming the folders searched when the files are missing (and
    ``download`` is off), or naming the file when one is malformed.
    """
    if download:
        if not folder:
            raise DatasetError(f"{name}: download=True needs a folder= to download into")
        _download(name, Path(folder))
    _, paths = find_files(name, folder, test)
    images = read_idx(paths[0], expect_ndim=3)
    labels = read_idx(paths[1], expect_ndim=1)
    if images.shape[1:] != (28, 28):
        raise DatasetError(f"{paths[0]}: images are {images.shape[1:]}, expected 28x28")
    if len(labels) != len(images):
        raise DatasetError(f"{paths[1]}: {len(labels)} labels for {len(images)} images in "
                           f"{paths[0]}")
    if labels.max(initial=0) > 9:
        raise DatasetError(f"{paths[1]}: label {labels.max()} outside 0..9")
    mean, std = NORMALIZE[name]
    x = (images.astype(np.float32) / 255.0 - mean) / std
    return x[:, None].astype(np.float32), labels.astype(np.int32)
