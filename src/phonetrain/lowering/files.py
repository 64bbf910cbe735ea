"""Writing lowered plans (and whole staging roots) to disk, atomically."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .. import data as datasets
from ..io import make_temp_dir
from ..layout import plan_dir_rel
from ..kernels import KERNELS_ROOT, stage_kernels
from ..kernels.spirv import stage_spirv
from ..models import get_model
from .build import lower
from .init import init_params, init_state
from .spec import LowerSpec


def write_plan_dir(spec: LowerSpec, root: Path, kernels_root: Path = KERNELS_ROOT,
                   conv_lowering: dict[str, str] | None = None) -> Path:
    """Write ``root/plans/<plan_id>/plan.json`` and ``tensors/<param>.f32`` (raw little-endian
    float32, from :func:`~phonetrain.lowering.init_params`; batch norm's running statistics
    from :func:`~phonetrain.lowering.init.init_state` likewise) and return that folder.

    Everything goes to a temp folder beside it that is renamed into place, so a crash leaves
    no folder that looks complete; an existing folder of the same id is replaced.
    ``conv_lowering`` goes to :func:`~phonetrain.lowering.build.lower`.
    """
    plan = lower(spec, kernels_root=kernels_root, conv_lowering=conv_lowering)
    model = get_model(spec.model)
    dest = Path(root) / plan_dir_rel(spec.resolved_plan_id())
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(dest.parent, f".{dest.name}.")
    try:
        (tmp / "tensors").mkdir()
        for name, arr in {**init_params(model, spec.seed), **init_state(model)}.items():
            arr.astype("<f4").tofile(tmp / "tensors" / f"{name}.f32")
        plan.save(tmp / "plan.json")
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            dest.rename(old / "x")
            tmp.rename(dest)
            shutil.rmtree(old)
        else:
            tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def write_bundle(spec: LowerSpec, root: Path, kernels_root: Path = KERNELS_ROOT,
                 conv_lowering: dict[str, str] | None = None, **data_opts) -> Path:
    """A complete staging root for one spec: the plan folder, the dataset's batch files and,
    for the opencl backend, the staged kernel sources (vulkan: the version's shaders compiled
    to SPIR-V with glslc, :func:`phonetrain.kernels.spirv.stage_spirv`). Returns the plan.json
    path.
    ``data_opts`` go to :func:`phonetrain.data.write_batches` (e.g. ``folder=``, ``seed=``:
    the data seed is independent of the init seed because the batch folder is shared);
    ``conv_lowering`` goes to :func:`~phonetrain.lowering.build.lower`."""
    model = get_model(spec.model)
    dataset = spec.dataset or model.default_dataset
    datasets.write_batches(dataset, spec.batch_size, spec.num_batches, root,
                           input_shape=model.input_shape, classes=model.classes, **data_opts)
    if spec.backend == "opencl":
        stage_kernels(spec.kernel, root, kernels_root)
    elif spec.backend == "vulkan":
        stage_spirv(spec.kernel, root, kernels_root)
    return write_plan_dir(spec, root, kernels_root, conv_lowering) / "plan.json"
