"""Ids outside their table raise one line naming the op, the input and the first bad id, on every
backend: the reference and Triton ops call ``check_ids``; the native kernels do the same in C++
(``csrc/checks.h``, same message). For example::

    IndexError: cross_entropy_all: target[3] = 10488 is out of range for the entity table of 10488 rows

The check is one fused reduction (``aminmax`` over the ids) and one readback of its two numbers;
only when they are out of range is the first bad id looked for. On a GPU that readback waits for
the device (``rotmem.host_syncs`` counts it; on the CPU it waits for nothing and is not counted):
``ROTMEM_CHECK_IDS=0`` skips the check there (a bad id then hits the kernels' own device-side
asserts, or reads out of bounds). Under ``torch.compile`` nothing is read back: a
``torch._assert_async`` naming op and input stands in, so the step still traces.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch

from rotmem.host_syncs import cpu_only
from rotmem.ops.table_grad import is_traced


def enabled(device: torch.device) -> bool:
    """Whether ids on ``device`` are checked: always on the CPU, elsewhere unless ``ROTMEM_CHECK_IDS=0``."""
    return device.type == "cpu" or os.environ.get("ROTMEM_CHECK_IDS", "1").strip() != "0"


@contextmanager
def unchecked_on_device() -> Iterator[None]:
    """Within the block, ids off the CPU are not checked (``ROTMEM_CHECK_IDS=0``, which the native
    kernels read too): for a caller that checked its ids once on the host, such as a training loop
    whose batches are rows of a graph checked when it was loaded, so that its steps never wait for
    the GPU. The previous setting is restored after."""
    before = os.environ.get("ROTMEM_CHECK_IDS")
    os.environ["ROTMEM_CHECK_IDS"] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ROTMEM_CHECK_IDS", None)
        else:
            os.environ["ROTMEM_CHECK_IDS"] = before


def check_ids(
    op: str,
    name: str,
    ids: torch.Tensor,
    rows: int,
    what: str = "the entity table",
    ignore: int | None = None,
    offset: int = 0,
) -> None:
    """Raise ``IndexError`` when an id of ``ids`` lies outside ``[offset, offset + rows)``; ``ignore``
    is one more allowed id (the cross-entropy's -100). ``what`` names the table in the message."""
    if ids.numel() == 0 or not enabled(ids.device):
        return
    ids = ids.reshape(-1)
    if ignore is not None:
        ids = ids.masked_fill(ids == ignore, offset)  # an ignored id takes an allowed value
    if torch.compiler.is_compiling():
        inside = (ids >= offset) & (ids < offset + rows)
        torch._assert_async(inside.all(), f"{op}: an id of {name} is out of range for {what}")
        return
    if ids.device.type == "meta" or is_traced(ids):
        return  # no values to check (opcheck, make_fx, functorch)
    with cpu_only() if ids.device.type == "cpu" else nullcontext():  # a CPU readback waits for no GPU
        low, high = torch.stack(torch.aminmax(ids)).tolist()  # one readback of two numbers
    if low >= offset and high < offset + rows:
        return
    at = int(((ids < offset) | (ids >= offset + rows)).nonzero()[0, 0])
    span = f"of {rows} rows" if offset == 0 else f"of ids [{offset}, {offset + rows})"
    raise IndexError(f"{op}: {name}[{at}] = {int(ids[at])} is out of range for {what} {span}")


def check_fact_ids(facts: torch.Tensor, num_entities: int, num_relations: int, where: str) -> None:
    """``facts [M, 4]`` ``(h, r, t, day)`` name only entities and relations of the model's tables;
    else one ``IndexError`` line naming ``where``, the column and the first bad fact. Checked where
    the facts are (the host, once), so that steps over them need not check again."""
    for column, name, rows, what in ((0, "head", num_entities, "the entity table"),
                                     (1, "relation", num_relations, "the relation table"),
                                     (2, "tail", num_entities, "the entity table")):  # fmt: skip
        check_ids(where, name, facts[:, column], rows, what)
