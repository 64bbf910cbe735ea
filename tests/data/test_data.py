"""Datasets: IDX reader on generated files, MNIST-like folders, digits, CIFAR-10 binary,
synthetic, batch files."""

import gzip

import numpy as np
import pytest

from phonetrain import data
from phonetrain.data import DatasetError, read_idx, write_batches, write_idx
from phonetrain.data.cifar import RECORD_BYTES, load_cifar10, read_cifar_batch
from phonetrain.data.digits import load_digits_28
from phonetrain.data.mnist import load_mnist_like


def _mnist_folder(folder, n=5, compress=True, seed=0):
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    sfx = ".gz" if compress else ""
    write_idx(folder / f"train-images-idx3-ubyte{sfx}", imgs, compress)
    write_idx(folder / f"train-labels-idx1-ubyte{sfx}", labels, compress)
    return imgs, labels


@pytest.mark.parametrize("compress", [False, True])
def test_idx_write_read_roundtrip_with_big_endian_header(tmp_path, compress):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a.idx", a, compress)
    raw = (tmp_path / "a.idx").read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == compress
    got = read_idx(tmp_path / "a.idx", expect_ndim=3)
    np.testing.assert_array_equal(got, a)
    # header by hand: magic 00 00 08 03, big-endian dims
    body = gzip.decompress(raw) if compress else raw
    assert body[:16] == bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4])


def test_idx_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.idx"
    p.write_bytes(b"\x00\x00\x42\x01" + b"\x00" * 8)
    with pytest.raises(DatasetError, match=r"bad\.idx: bad IDX magic"):
        read_idx(p)
    write_idx(p, np.zeros((3, 2), np.uint8))
    p.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(DatasetError, match=r"bad\.idx: .*truncated"):
        read_idx(p)
    write_idx(p, np.zeros((3, 2), np.uint8))
    with pytest.raises(DatasetError, match=r"bad\.idx: IDX file has 2 dimensions, expected 3"):
        read_idx(p, expect_ndim=3)
    p.write_bytes(gzip.compress(b"\x00\x00\x08\x01\x00\x00\x00\x05ab"))
    with pytest.raises(DatasetError, match="truncated"):
        read_idx(p)
    p.write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(DatasetError, match=r"bad\.idx: cannot read"):
        read_idx(p)


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_folder_is_read_and_normalized(tmp_path, compress):
    imgs, labels = _mnist_folder(tmp_path / "m", compress=compress)
    x, y = load_mnist_like("mnist", tmp_path / "m")
    assert x.shape == (5, 1, 28, 28) and x.dtype == np.float32
    np.testing.assert_allclose(x[:, 0], (imgs / 255.0 - 0.1307) / 0.3081, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(y, labels)


def test_mnist_errors_are_named_and_known_folder_is_the_fallback(tmp_path, monkeypatch):
    from phonetrain.data import mnist

    known = tmp_path / "usr-share-datasets-fashion-mnist"
    monkeypatch.setitem(mnist.KNOWN_FOLDERS, "fashion_mnist", [known])
    with pytest.raises(DatasetError, match=rf"no train-images.* in {known};"):
        load_mnist_like("fashion_mnist")
    _mnist_folder(known, n=2)
    x, _ = load_mnist_like("fashion_mnist")  # no folder given: the known one
    assert x.shape == (2, 1, 28, 28)
    with pytest.raises(DatasetError, match=rf"dataset.path {tmp_path / 'none'} does not exist"):
        load_mnist_like("fashion_mnist", tmp_path / "none")  # a folder given: only that one
    _mnist_folder(tmp_path / "m", n=5)
    write_idx(tmp_path / "m" / "train-labels-idx1-ubyte.gz", np.zeros(4, np.uint8), True)
    with pytest.raises(DatasetError, match="4 labels for 5 images"):
        load_mnist_like("mnist", tmp_path / "m")
    with pytest.raises(DatasetError, match="needs a folder"):
        load_mnist_like("mnist", None, download=True)


def test_digits_are_upsampled_to_28x28_and_standardized():
    x, y = load_digits_28()
    assert x.shape == (1797, 1, 28, 28) and x.dtype == np.float32
    assert y.dtype == np.int32 and set(np.unique(y)) == set(range(10))
    assert abs(float(x.mean())) < 1e-4 and abs(float(x.std()) - 1) < 1e-4
    # bilinear upsampling keeps the picture: it correlates with a nearest-neighbour upsample
    from sklearn.datasets import load_digits
    src = load_digits().images[0]
    nearest = src[np.ix_(np.arange(28) * 8 // 28, np.arange(28) * 8 // 28)]
    assert np.corrcoef(x[0, 0].ravel(), nearest.ravel())[0, 1] > 0.9


def test_write_batches_layout_and_determinism(tmp_path):
    info = write_batches("digits", 32, 3, tmp_path, seed=1)
    assert info["dir"] == "data/digits/b32" and info["classes"] == 10
    x = np.fromfile(tmp_path / info["images"], "<f4")
    y = np.fromfile(tmp_path / info["labels"], "<i4")
    assert x.size == 3 * 32 * 784 and y.size == 96 and y.min() >= 0 and y.max() <= 9
    assert len(set(y.tolist())) > 5
    again = write_batches("digits", 32, 3, tmp_path / "b", seed=1)
    assert again["sha256"] == info["sha256"]
    assert write_batches("digits", 32, 3, tmp_path / "c", seed=2)["sha256"] != info["sha256"]
    # more batches than one epoch: a second permutation follows
    big = write_batches("digits", 1000, 2, tmp_path / "d")
    yb = np.fromfile(tmp_path / "d" / big["labels"], "<i4")
    assert yb.size == 2000
    assert not list(tmp_path.glob("data/digits/b32/.*"))  # no temp files left


def test_synthetic_takes_the_model_shape(tmp_path):
    info = write_batches("synthetic", 4, 2, tmp_path, input_shape=(16,), classes=16)
    assert info["dir"] == "data/synthetic-16-c16/b4"
    assert data.batch_dir("synthetic", 4, (16,), 16) == info["dir"]
    y = np.fromfile(tmp_path / info["labels"], "<i4")
    assert y.max() < 16
    with pytest.raises(DatasetError, match="input_shape and classes"):
        write_batches("synthetic", 4, 2, tmp_path)


def test_dataset_model_mismatch_and_unknown_dataset_are_refused():
    data.check_compatible("digits", (1, 28, 28), 16, "mlp_784_256_128_16")
    with pytest.raises(DatasetError, match="model m takes input .*cifar10"):
        data.check_compatible("cifar10", (1, 28, 28), 10, "m")
    with pytest.raises(DatasetError, match="10 classes but model m has only 4"):
        data.check_compatible("mnist", (1, 28, 28), 4, "m")
    with pytest.raises(DatasetError, match="unknown dataset 'imagenet'; known: digits"):
        data.dataset_info("imagenet")


def test_cifar10_binary_is_read_normalized_and_checked(tmp_path):
    rng = np.random.default_rng(0)
    rec = rng.integers(0, 256, (3, RECORD_BYTES), dtype=np.uint8)
    rec[:, 0] = [3, 0, 9]
    rec.tofile(tmp_path / "data_batch_1.bin")
    x, y = load_cifar10(tmp_path)
    assert x.shape == (3, 3, 32, 32) and y.tolist() == [3, 0, 9]
    red0 = rec[0, 1:1025].reshape(32, 32) / 255.0
    np.testing.assert_allclose(x[0, 0], (red0 - 0.4914) / 0.2470, rtol=1e-5, atol=1e-5)
    (tmp_path / "data_batch_2.bin").write_bytes(rec.tobytes()[:-7])
    with pytest.raises(DatasetError, match=r"data_batch_2\.bin: .*whole number"):
        load_cifar10(tmp_path)
    bad = rec.copy()
    bad[0, 0] = 12
    bad.tofile(tmp_path / "x.bin")
    with pytest.raises(DatasetError, match=r"x\.bin: label 12"):
        read_cifar_batch(tmp_path / "x.bin")


def test_download_is_opt_in_and_checks_md5(tmp_path, monkeypatch):
    """Downloading (only when asked) verifies each file's MD5 before it lands in the folder;
    a file:// mirror stands in for the network."""
    import hashlib

    from phonetrain.data import mnist

    _mnist_folder(tmp_path / "mirror", n=3)
    test = np.random.default_rng(1).integers(0, 256, (2, 28, 28), dtype=np.uint8)
    write_idx(tmp_path / "mirror" / "t10k-images-idx3-ubyte.gz", test, True)  # held-out split
    write_idx(tmp_path / "mirror" / "t10k-labels-idx1-ubyte.gz", np.array([1, 2]), True)
    sums = {f: hashlib.md5((tmp_path / "mirror" / f).read_bytes()).hexdigest()
            for f in mnist.MD5["mnist"]}
    monkeypatch.setitem(mnist.MIRRORS, "mnist", (tmp_path / "mirror").as_uri() + "/")
    monkeypatch.setitem(mnist.KNOWN_FOLDERS, "mnist", [])
    with pytest.raises(DatasetError, match="dl does not exist.*allow download"):
        load_mnist_like("mnist", tmp_path / "dl")  # download is off by default
    with pytest.raises(DatasetError, match="has MD5 .* expected"):
        load_mnist_like("mnist", tmp_path / "dl", download=True)  # published sums differ
    assert not list((tmp_path / "dl").glob("*ubyte*"))
    monkeypatch.setitem(mnist.MD5, "mnist", sums)
    x, y = load_mnist_like("mnist", tmp_path / "dl", download=True)
    assert x.shape == (3, 1, 28, 28) and sorted(p.name for p in (tmp_path / "dl").iterdir()) \
        == sorted(sums)
