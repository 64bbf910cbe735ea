"""Buffer reuse: tensors whose lifetimes within one iteration do not overlap share storage.

Liveness is taken over the plan's ordered steps (one iteration, in list order, which is a
valid schedule of every placement): a tensor's lifetime is the closed interval
``[first, last]`` of the indices of the steps that touch it -- a kernel argument, an
``h2d``/``d2h``/``map``/``unmap`` of it, a ``load`` of it. A tensor copied to the host and
back (staged placement) is thus live across that whole span, on the host and the device.

Sharable: tensors of role ``activation`` or ``scratch``, and ``grad`` tensors that are not
a parameter's gradient (the gradient of an activation, ``<activation>.grad``), whose first
use writes them without reading (a kernel's ``"w"`` buffer), so no content carries over
from the previous iteration or the tensor's init. Never shared:

- parameters, their gradients, optimizer and batch-norm state, inputs, labels, the loss;
- a tensor whose first use reads it (an in-place or accumulating kernel, a read before any
  write): it carries contents across iterations;
- a tensor the plan dumps, and the tensors the per-step verification reads from the
  runner's checkpoint besides the state: every buffer written by a decision kernel
  (:data:`DECISION_KERNELS`: the ReLU/ReLU6 outputs and the max-pool output and argmax,
  whose near-ties the check follows);
- a tensor read as an image (``image_width4``: its buffer is padded to whole image rows).

Assignment (greedy interval colouring, best fit): tensors in order of first use; a tensor
goes to a buffer whose last holder's lifetime ended strictly before its first use (a
step that reads one tensor and writes another thus never puts them in one buffer); among
those, the smallest buffer at least as large as the tensor, else the largest (which then
grows); else a new buffer. A buffer's size is its largest tensor's, in bytes. Buffers that
end up with one tensor are dropped (that tensor keeps its own allocation), so a plan lists
only real sharing: ``Tensor.buffer`` names the buffer, ``Plan.buffers`` gives
``{"name", "size_bytes"}`` (:mod:`phonetrain.plan`).

The lowering (``lower`` with ``LowerSpec.reuse_buffers``) drops shared tensors from the
checkpoint list and recomputes the pipelined placement's wait lists over shared storage,
so its two queues keep the list order on every buffer and host copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..kernels import bind_args, buffer_access
from ..plan import Step, Tensor

SHARABLE_ROLES = ("activation", "scratch", "grad")
# kernels whose written buffers the per-step check reads from the checkpoint (near-ties)
DECISION_KERNELS = ("relu_fwd", "relu6_fwd", "maxpool_fwd", "linear_fwd", "conv_fwd",
                    "bn_act_fwd")


@dataclass
class Lifetime:
    """Tensor ``tid`` is touched first by step ``first`` and last by step ``last``
    (indices into the iteration's steps); ``first_reads``: that first use reads it."""

    tid: int
    first: int
    last: int
    first_reads: bool = False


@dataclass
class Assignment:
    """Result of :func:`assign`: ``buffer_of`` tensor id -> buffer index, ``sizes_bytes``
    per buffer (the largest tensor it holds), ``excluded`` tensor id -> why not shared."""

    buffer_of: dict[int, int] = field(default_factory=dict)
    sizes_bytes: list[int] = field(default_factory=list)
    excluded: dict[int, str] = field(default_factory=dict)


def _step_uses(step: Step) -> list[tuple[int, bool]]:
    """``(tensor id, reads)`` for every tensor the step touches; ``reads``: the step reads
    the tensor's contents before (or without) writing it."""
    if step.op == "kernel":
        bound = bind_args(step.name, step.args)
        return [(int(bound[a]), "r" in acc)
                for a, acc in buffer_access(step.name, bound).items()]
    if step.op == "load":
        return [(int(step.tensor), False)]
    if step.op == "map":
        return [(int(step.tensor), step.access == "read")]
    return [(int(step.tensor), step.op != "h2d")]   # h2d writes the buffer; d2h/unmap read it


def lifetimes(steps: list[Step]) -> dict[int, Lifetime]:
    """The lifetime of every tensor the steps touch (module doc), keyed by tensor id."""
    out: dict[int, Lifetime] = {}
    for k, s in enumerate(steps):
        reads_of: dict[int, bool] = {}   # one step may pass a tensor twice (in place)
        for tid, reads in _step_uses(s):
            reads_of[tid] = reads_of.get(tid, False) or reads
        for tid, reads in reads_of.items():
            if tid not in out:
                out[tid] = Lifetime(tid, k, k, reads)
            else:
                out[tid].last = k
    return out


def _param_grad_names(tensors: list[Tensor]) -> set[str]:
    return {f"{t.name}.grad" for t in tensors if t.role == "param"}


def decision_tensors(steps: list[Step]) -> set[int]:
    """Buffers written by :data:`DECISION_KERNELS` (the check reads them after the step)."""
    out = set()
    for s in steps:
        if s.op == "kernel" and s.name in DECISION_KERNELS:
            bound = bind_args(s.name, s.args)
            out |= {int(bound[a]) for a, acc in buffer_access(s.name, bound).items()
                    if "w" in acc}
    return out


def _image_tensors(steps: list[Step]) -> set[int]:
    return {int(a["t"]) for s in steps if s.op == "kernel" for a in s.args or []
            if "image_width4" in a}


def exclusions(tensors: list[Tensor], steps: list[Step], keep: set[int],
               life: dict[int, Lifetime]) -> dict[int, str]:
    """Tensor id -> why it is never shared (module doc); ``keep``: tensors read after the
    step (dumps, checkpoint state)."""
    pgrads = _param_grad_names(tensors)
    decided = decision_tensors(steps)
    images = _image_tensors(steps)
    out = {}
    for t in tensors:
        why = None
        if t.role not in SHARABLE_ROLES:
            why = f"role {t.role}"
        elif t.role == "grad" and t.name in pgrads:
            why = "gradient of a parameter"
        elif t.id not in life:
            why = "unused"
        elif life[t.id].first_reads:
            why = "first use reads it (contents carry over)"
        elif t.id in keep:
            why = "read after the step (dump or checkpoint)"
        elif t.id in decided:
            why = "decision output the per-step check reads"
        elif t.id in images:
            why = "read as an image (padded buffer)"
        if why:
            out[t.id] = why
    return out


def assign(tensors: list[Tensor], steps: list[Step], keep: set[int] = frozenset()) -> Assignment:
    """Greedy best-fit interval colouring of the sharable tensors (module doc).

    ``tensors``/``steps``: the plan's (one iteration); ``keep``: ids read after the
    iteration (never shared). Every buffer of the result holds at least two tensors and no
    two of its tensors have overlapping lifetimes."""
    life = lifetimes(steps)
    res = Assignment(excluded=exclusions(tensors, steps, set(keep), life))
    cands = sorted((life[t.id] for t in tensors if t.id not in res.excluded),
                   key=lambda lt: (lt.first, lt.tid))
    free_after: list[int] = []        # per buffer: last step of its latest holder
    holders: list[list[int]] = []
    for lt in cands:
        size = tensors[lt.tid].size_bytes
        free = [b for b in range(len(free_after)) if free_after[b] < lt.first]
        fits = [b for b in free if res.sizes_bytes[b] >= size]
        if fits:
            b = min(fits, key=lambda b: (res.sizes_bytes[b], b))
        elif free:
            b = max(free, key=lambda b: (res.sizes_bytes[b], -b))
        else:
            b = len(free_after)
            free_after.append(-1)
            holders.append([])
            res.sizes_bytes.append(0)
        free_after[b] = lt.last
        holders[b].append(lt.tid)
        res.sizes_bytes[b] = max(res.sizes_bytes[b], size)
    shared = [b for b in range(len(holders)) if len(holders[b]) > 1]
    res.sizes_bytes = [res.sizes_bytes[b] for b in shared]
    res.buffer_of = {tid: i for i, b in enumerate(shared) for tid in holders[b]}
    return res


def apply(plan_tensors: list[Tensor], a: Assignment) -> list[dict]:
    """Set ``buffer`` on each shared tensor (``buf<i>``) and return the plan's ``buffers``
    list ``[{"name": "buf<i>", "size_bytes": n}, ...]``."""
    for tid, b in a.buffer_of.items():
        plan_tensors[tid].buffer = f"buf{b}"
    return [{"name": f"buf{i}", "size_bytes": n} for i, n in enumerate(a.sizes_bytes)]

