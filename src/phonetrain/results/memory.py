"""Memory by role: the bytes a run's plan allocates, split by what each tensor is for.

Every tensor of a plan (:mod:`phonetrain.plan`) is 4 bytes per element and the runner
allocates each one once (a host array; on the OpenCL backend also one buffer per tensor a
step uses: ``run.json``'s ``device_bytes_allocated``), so the plan's tensor table is the
step's memory. Each tensor gets exactly one memory role, from its declared ``role`` and,
where that role is too coarse, from the lowering's names (:mod:`phonetrain.lowering.build`,
:mod:`phonetrain.lowering.optim`); the roles partition the tensors, so their bytes add up to
``plan_tensor_bytes``:

- ``param``: declared ``param`` (weights and biases), and the ``state`` tensors no
  parameter owns: the model's buffers (batch norm's ``<layer>.running_mean`` and
  ``<layer>.running_var``), which a checkpoint of the model saves with its weights;
- ``grad``: the gradients of parameters, declared ``grad`` and named ``<param>.grad`` after a
  ``param`` tensor (the fused lowering has none: it updates inside the gradient kernel);
- ``optimizer_state``: ``state`` tensors named ``<param>.<suffix>`` after a ``param`` tensor
  (SGD's ``.momentum``; Adam's and AdamW's ``.exp_avg`` and ``.exp_avg_sq``) and Adam's
  ``optimizer.step`` count;
- ``activation``: declared ``activation`` (every layer output ``<layer>.out``), and the
  ``scratch`` tensors the forward writes for the backward to read, as PyTorch's autograd
  saves them for that layer: max-pool indices ``<layer>.argmax`` and batch norm's batch
  statistics ``<layer>.mean`` / ``<layer>.invstd``;
- ``scratch``: the other ``scratch`` tensors (im2col columns ``<layer>.col`` and their
  gradient, the CNHW copies ``<layer>.out_cnhw`` and their gradient, the per-row losses
  ``loss.rows``) and the gradients of activations (declared ``grad``, not named after a
  parameter: ``<layer>.out.grad``, ``<layer>.body.grad``), temporaries of one step as
  PyTorch's memory profiler counts them (``torch.profiler._memory_profiler.Category``:
  GRADIENT is a parameter's, an activation's gradient is TEMPORARY);
- ``staging``: the batch and the loss the host reads back: declared ``input``, ``label`` and
  ``loss``.

The columns (:data:`COLUMNS`, bytes) are ``<role>_bytes`` for each role and
``plan_tensor_bytes``, their sum, plus ``plan_buffer_bytes``: the bytes of tensor storage the
plan really allocates when tensors share buffers (``lowering.reuse_buffers``,
:mod:`phonetrain.lowering.reuse`): each unshared tensor's size plus each shared buffer's
``size_bytes`` (equal to ``plan_tensor_bytes`` for a plan without shared buffers). The role
columns count every tensor at its own size, shared or not. The OpenCL buffers of the ``image`` kernel version are
padded to whole image rows, so its ``device_buffer_bytes`` can exceed ``plan_tensor_bytes``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phonetrain.plan import Plan, PlanError, Tensor

ROLES = ("param", "grad", "optimizer_state", "activation", "scratch", "staging")
COLUMNS = tuple(f"{r}_bytes" for r in ROLES) + ("plan_tensor_bytes", "plan_buffer_bytes")
STEP_TENSOR = "optimizer.step"            # Adam's step count (phonetrain.lowering.optim)
SAVED_SCRATCH = ("argmax", "mean", "invstd")  # scratch suffixes the backward reads
STAGING = {"input": "staging", "label": "staging", "loss": "staging"}


def memory_role(t: Tensor, params: set[str]) -> str:
    """The memory role of tensor ``t`` (one of :data:`ROLES`), by the rules of the module
    docstring; ``params`` holds the names of the plan's ``param`` tensors. Raises
    :class:`~phonetrain.plan.PlanError` for a declared role this module does not know."""
    owner, _, suffix = t.name.rpartition(".")
    if t.role in STAGING:
        return STAGING[t.role]
    if t.role in ("param", "activation"):
        return t.role
    if t.role == "state":
        return "optimizer_state" if owner in params or t.name == STEP_TENSOR else "param"
    if t.role == "grad":
        return "grad" if owner in params and suffix == "grad" else "scratch"
    if t.role == "scratch":
        return "activation" if suffix in SAVED_SCRATCH else "scratch"
    raise PlanError(f"tensor {t.name!r}: role {t.role!r} has no memory role")


def tensor_roles(plan: Plan) -> list[tuple[str, str, int]]:
    """``(tensor name, memory role, bytes)`` for every tensor of ``plan``, in plan order."""
    params = {t.name for t in plan.tensors if t.role == "param"}
    return [(t.name, memory_role(t, params), t.size_bytes) for t in plan.tensors]


def role_bytes(plan: Plan) -> dict[str, int]:
    """Bytes per memory role of ``plan`` as the columns :data:`COLUMNS`:
    ``<role>_bytes`` and their sum ``plan_tensor_bytes`` (every tensor's ``numel * 4``), and
    ``plan_buffer_bytes`` (what is allocated with shared buffers: module docstring)."""
    out = dict.fromkeys(COLUMNS, 0)
    for _, role, nbytes in tensor_roles(plan):
        out[f"{role}_bytes"] += nbytes
        out["plan_tensor_bytes"] += nbytes
    out["plan_buffer_bytes"] = plan.allocated_bytes
    return out


def plan_memory(plan_json: str | Path) -> dict[str, Any]:
    """:func:`role_bytes` of the plan file ``plan_json`` (a run folder's ``plan.json``);
    every column None when the file is missing or not a valid plan (a run that failed before
    its plan was deployed)."""
    try:
        return role_bytes(Plan.load(plan_json))
    except (OSError, PlanError):
        return dict.fromkeys(COLUMNS)
