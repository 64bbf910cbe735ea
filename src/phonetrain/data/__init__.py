"""Datasets split into per-iteration batch files for the staging root.

``write_batches(dataset, batch_size, num_batches, root, seed)`` writes
``root/data/<dataset dir>/b<batch>/images.f32`` (``num_batches`` consecutive batches, float32
little-endian, NCHW) and ``labels.i32`` (int32 little-endian), each atomically. Batches are
drawn without replacement from a seeded permutation of the training split (never the
held-out split below), reshuffled each
epoch. ``<dataset dir>`` is the dataset name, except ``synthetic``, whose shape is part of it
(``synthetic-16-c16``) because it takes the model's shape.

Datasets (:data:`DATASETS`): ``digits`` (default, offline), ``mnist``, ``fashion_mnist``,
``cifar10``, ``synthetic``.

Held-out split (:func:`load` with ``split="heldout"``), never drawn into training batches:
the dataset's own test files where it has them (MNIST/Fashion-MNIST ``t10k-*``, CIFAR-10
``test_batch.bin``); for ``digits`` and ``synthetic`` a fixed :data:`HELDOUT_FRACTION` of the
samples, chosen by a permutation seeded with :data:`HELDOUT_SEED` (independent of
``measure.seed``), and the training split is the rest (:func:`heldout_mask`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from phonetrain.io import write_bytes
from phonetrain.layout import batch_dir_rel

from .errors import DatasetError
from .idx import read_idx, write_idx


@dataclass(frozen=True)
class DatasetInfo:
    """Input shape (without batch; ``None`` = takes the model's) and number of classes
    (``None`` = takes the model's)."""

    name: str
    input_shape: tuple[int, ...] | None
    classes: int | None


DATASETS: dict[str, DatasetInfo] = {
    "digits": DatasetInfo("digits", (1, 28, 28), 10),
    "mnist": DatasetInfo("mnist", (1, 28, 28), 10),
    "fashion_mnist": DatasetInfo("fashion_mnist", (1, 28, 28), 10),
    "cifar10": DatasetInfo("cifar10", (3, 32, 32), 10),
    "synthetic": DatasetInfo("synthetic", None, None),
}


def dataset_info(name: str) -> DatasetInfo:
    """Shape and classes of a dataset; :class:`DatasetError` lists the known names."""
    try:
        return DATASETS[name]
    except KeyError:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}") from None


def check_compatible(dataset: str, input_shape: tuple[int, ...], classes: int,
                     model_name: str = "model") -> None:
    """Raise :class:`DatasetError` unless the dataset's samples have ``input_shape`` and its
    labels fit in ``classes`` logits (fewer classes than logits is allowed: the paper's MLP
    has 16 outputs for MNIST's 10 classes)."""
    info = dataset_info(dataset)
    if info.input_shape is not None and tuple(info.input_shape) != tuple(input_shape):
        raise DatasetError(f"model {model_name} takes input {tuple(input_shape)} but dataset "
                           f"{dataset} has {info.input_shape}; pick a dataset of that shape "
                           "(synthetic fits any model)")
    if info.classes is not None and info.classes > classes:
        raise DatasetError(f"dataset {dataset} has {info.classes} classes but model "
                           f"{model_name} has only {classes} outputs")


def batch_dir(dataset: str, batch_size: int, input_shape: tuple[int, ...], classes: int) -> str:
    """Folder of a dataset's batches relative to the staging root, e.g. ``data/digits/b32``."""
    name = dataset
    if dataset_info(dataset).input_shape is None:
        name = f"{dataset}-{'x'.join(map(str, input_shape))}-c{classes}"
    return batch_dir_rel(name, batch_size)


FILE_DATASETS = ("mnist", "fashion_mnist", "cifar10")  # the datasets read from a folder
SPLITS = ("train", "heldout")
HELDOUT_FRACTION = 0.2  # digits, synthetic: share of the samples held out of training
HELDOUT_SEED = 20220314  # seeds the held-out choice; fixed so every run holds out the same


def heldout_mask(n: int) -> np.ndarray:
    """bool [n]: True for the samples of a dataset without test files (``digits``,
    ``synthetic``) that form its held-out split: ``round(HELDOUT_FRACTION * n)`` of them (at
    least 1), the first of a permutation of ``0..n-1`` by numpy's PCG64 seeded with
    :data:`HELDOUT_SEED`."""
    k = max(1, round(HELDOUT_FRACTION * n))
    mask = np.zeros(n, bool)
    mask[np.random.default_rng(HELDOUT_SEED).permutation(n)[:k]] = True
    return mask


def source_folder(dataset: str, folder: str | Path | None = None,
                  download: bool = False) -> str | None:
    """The folder a dataset is read from: ``folder`` when given (and only it), else a known
    install location (Debian's Fashion-MNIST); None for a dataset that reads no folder
    (``digits``: scikit-learn's bundled copy; ``synthetic``). Checks the files are there
    (with ``download``, the folder is where they will be downloaded to). Raises
    :class:`DatasetError` naming the folder and the key to set: a folder given to a dataset
    that reads none, a folder that does not exist or lacks the files, none at all."""
    dataset_info(dataset)
    if dataset not in FILE_DATASETS:
        if folder:
            raise DatasetError(f"{dataset} reads no folder, but dataset.path is {folder}: unset "
                               f"it (null), or pick a dataset read from files "
                               f"({', '.join(FILE_DATASETS)})")
        return None
    if dataset == "cifar10":
        from .cifar import find_batches
        return str(find_batches(folder)[0])
    from .mnist import find_files
    if download:
        if not folder:
            raise DatasetError(f"{dataset}: dataset.allow_download needs dataset.path, the "
                               "folder to download into")
        return str(folder)
    return str(find_files(dataset, folder)[0])


def load(dataset: str, input_shape: tuple[int, ...] | None = None, classes: int | None = None,
         seed: int = 0, folder: str | Path | None = None, download: bool = False,
         synthetic_samples: int = 4096, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """One split of a dataset: ``(images float32 [N, *shape], labels int32 [N])``.

    ``split``: ``"train"`` (what batches are drawn from) or ``"heldout"`` (module docstring:
    test files, or the :func:`heldout_mask` samples of ``digits``/``synthetic``; the two
    splits are disjoint). Raises :class:`DatasetError` for an unknown split, or naming the
    missing files (e.g. a folder without ``t10k-*`` or ``test_batch.bin`` for the held-out
    split)."""
    dataset_info(dataset)
    if split not in SPLITS:
        raise DatasetError(f"{dataset}: split {split!r} unknown; use one of {SPLITS}")
    test = split == "heldout"
    if dataset in ("mnist", "fashion_mnist"):
        from .mnist import load_mnist_like
        return load_mnist_like(dataset, folder, download, test=test)
    if dataset == "cifar10":
        from .cifar import load_cifar10
        return load_cifar10(folder, test=test)
    if dataset == "digits":
        from .digits import load_digits_28
        x, y = load_digits_28()
    else:
        from .synthetic import make_synthetic
        if input_shape is None or classes is None:
            raise DatasetError("synthetic: input_shape and classes are required (the model's)")
        x, y = make_synthetic(synthetic_samples, tuple(input_shape), classes, seed)
    keep = heldout_mask(len(x)) == test
    return x[keep], y[keep]


def write_batches(dataset: str, batch_size: int, num_batches: int, root: str | Path,
                  seed: int = 0, *, input_shape: tuple[int, ...] | None = None,
                  classes: int | None = None, dest: str | Path | None = None, **opts) -> dict:
    """Write ``num_batches`` batches of ``batch_size`` samples under ``root`` (into the folder
    ``dest`` instead, when given: a workflow job's named output).

    ``input_shape``/``classes`` are the model's: required for ``synthetic``, checked against
    the others. ``opts`` go to :func:`load` (``folder``, ``download``, ``synthetic_samples``).
    Returns ``{"dir", "images", "labels"`` (paths relative to ``root``), ``"num_batches",
    "batch_size", "input_shape", "classes", "sha256"`` (of images then labels)``,
    "source_folder"`` (the folder read, :func:`source_folder`; None for digits and
    synthetic)``}``.
    """
    if batch_size < 1 or num_batches < 1:
        raise DatasetError(f"{dataset}: batch_size and num_batches must be >= 1")
    x, y = load(dataset, input_shape, classes, seed=seed, **opts)
    if len(x) == 0:
        raise DatasetError(f"{dataset}: the training split holds no samples "
                           f"(folder {opts.get('folder') or 'none given'}); point "
                           "dataset.path at the dataset's files")
    shape = tuple(x.shape[1:])
    if input_shape is not None:
        check_compatible(dataset, tuple(input_shape), classes or 1 << 30, "the model")
    ncls = classes if dataset == "synthetic" else dataset_info(dataset).classes
    rng = np.random.default_rng(seed)
    need = batch_size * num_batches
    order = np.concatenate([rng.permutation(len(x)) for _ in range(math.ceil(need / len(x)))])
    idx = order[:need]
    images = np.ascontiguousarray(x[idx], dtype="<f4").tobytes()
    labels = np.ascontiguousarray(y[idx], dtype="<i4").tobytes()
    rel = batch_dir(dataset, batch_size, shape, ncls)
    folder = Path(dest) if dest is not None else Path(root) / rel
    write_bytes(folder / "images.f32", images)
    write_bytes(folder / "labels.i32", labels)
    return {"dir": rel, "images": f"{rel}/images.f32", "labels": f"{rel}/labels.i32",
            "num_batches": num_batches, "batch_size": batch_size, "input_shape": list(shape),
            "classes": ncls, "sha256": hashlib.sha256(images + labels).hexdigest(),
            "source_folder": source_folder(dataset, opts.get("folder"))}


__all__ = ["DATASETS", "FILE_DATASETS", "HELDOUT_FRACTION", "HELDOUT_SEED", "SPLITS",
           "DatasetError", "DatasetInfo", "batch_dir", "check_compatible", "dataset_info",
           "heldout_mask", "load", "read_idx", "source_folder",
           "write_batches", "write_idx"]
