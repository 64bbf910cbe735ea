"""The ``pipelined`` placement: staged transfers on a second queue, ordered by wait lists.

Staged semantics (the host owns every tensor; each kernel's inputs go up before it, its
outputs come down after it) with the transfers on queue 1 (non-blocking copies) and the
kernels on queue 0, so the uploads for kernel ``k+1`` run while kernel ``k`` computes.

Order of the steps (one in-order list, which is also what the transfer queue sees): the
loads, then per kernel ``k``: the *early* uploads of kernel ``k``'s inputs (those kernel
``k-1`` neither writes nor reads: they need not wait for it), the downloads of kernel
``k-1``'s outputs, the *late* uploads (the rest: they wait for kernel ``k-1``), kernel ``k``;
after the last kernel its downloads. Every upload and download of staged placement is
emitted, once each, with its bytes, so both placements move the same data.

Wait lists come from a hazard analysis over two resources per tensor, its device buffer and
its host copy: a step waits for the last writer of what it reads (read after write) and for
the last writer and every reader since of what it writes (write after read, write after
write). Only dependencies on the *other* queue are listed (a queue is in order), and of those
only the latest (waiting for it implies the earlier ones on that in-order queue). Loads are
host work the runner does synchronously before it enqueues anything later (it drains queue 1
first), so they take part in no wait list. Executing the list in order is a valid schedule,
which is why the CPU backend and the numpy reference run it unchanged.
"""

from __future__ import annotations

from ..plan import Step

COMPUTE_QUEUE = 0
TRANSFER_QUEUE = 1


def _effects(step: Step, access_of, storage=lambda t: t) -> tuple[set, set]:
    """(resources read, resources written) of one step; a resource is ``("dev"|"host",
    storage(id))`` (``storage``: tensor id -> what holds it, the tensor itself or a shared
    buffer's name)."""
    if step.op == "kernel":
        bound, access = access_of(step)
        reads = {("dev", storage(bound[a])) for a, acc in access.items() if "r" in acc}
        writes = {("dev", storage(bound[a])) for a, acc in access.items() if "w" in acc}
        return reads, writes
    if step.op == "h2d":
        return {("host", storage(step.tensor))}, {("dev", storage(step.tensor))}
    if step.op == "d2h":
        return {("dev", storage(step.tensor))}, {("host", storage(step.tensor))}
    return set(), set()


def add_waits(steps: list[Step], access_of, storage=lambda t: t) -> list[Step]:
    """Set ``queue`` (kernels 0, transfers 1) and ``wait`` of every step in place (module
    doc) and return ``steps``. ``access_of(step)`` returns ``(bound, access)`` of a kernel
    step (:func:`phonetrain.kernels.bind_args`, :func:`phonetrain.kernels.buffer_access`).
    Raises ``ValueError`` for an op other than kernel, h2d, d2h and load (map transfers have
    no pipelined form). ``storage`` maps a tensor id to what holds it (a shared buffer's name
    where tensors share one: :mod:`phonetrain.lowering.reuse`); hazards are on storage."""
    last_write: dict[tuple, int] = {}
    readers: dict[tuple, list[int]] = {}
    for k, s in enumerate(steps):
        if s.op == "load":
            continue
        if s.op not in ("kernel", "h2d", "d2h"):
            raise ValueError(f"steps[{k}]: op {s.op!r} has no pipelined form (use transfer "
                             "copy)")
        s.queue = COMPUTE_QUEUE if s.op == "kernel" else TRANSFER_QUEUE
        reads, writes = _effects(s, access_of, storage)
        deps: set[int] = set()
        for r in reads:
            if r in last_write:
                deps.add(last_write[r])
        for w in writes:
            if w in last_write:
                deps.add(last_write[w])
            deps.update(readers.get(w, []))
        other = [j for j in deps if steps[j].queue != s.queue]
        s.wait = [max(other)] if other else []
        for r in reads:
            readers.setdefault(r, []).append(k)
        for w in writes:
            last_write[w] = k
            readers[w] = []
    return steps


def schedule(loads: list[Step], per_kernel: list[tuple[list[Step], Step, list[Step]]],
             access_of) -> list[Step]:
    """Order the staged steps for overlap (module doc). ``per_kernel`` holds, per kernel in
    program order, ``(uploads, kernel, downloads)`` exactly as staged placement emits them.
    Returns the ordered steps with queues and wait lists set."""
    out = list(loads)
    prev_kernel: Step | None = None
    prev_downloads: list[Step] = []
    for uploads, kernel, downloads in per_kernel:
        touched: set[int] = set()
        if prev_kernel is not None:
            bound, access = access_of(prev_kernel)
            touched = {bound[a] for a in access}
        early = [u for u in uploads if u.tensor not in touched]
        late = [u for u in uploads if u.tensor in touched]
        out += early + prev_downloads + late + [kernel]
        prev_kernel, prev_downloads = kernel, downloads
    out += prev_downloads
    return add_waits(out, access_of)
