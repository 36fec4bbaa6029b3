"""RoMem ops, dispatched to a backend by device (see ``rotmem.ops.backend``).

The math of every op is ``rotmem.ops.reference``; all backends agree with it. The ops are those
listed in ``rotmem.ops.registry``; each function here has its reference's signature and docstring.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from rotmem.ops import reference
from rotmem.ops.backend import backend_module, backend_name
from rotmem.ops.registry import NAMES, OPS, Op


def autocast_inputs(q: torch.Tensor, entity: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Under ``torch.autocast`` (Lightning's ``precision="bf16-mixed"``), float32 ``q`` and
    ``entity`` in the autocast dtype, as autocast casts a matrix product's inputs: the products of
    the ops marked ``autocast`` in ``rotmem.ops.registry`` (``score_all``, ``cross_entropy_all``)
    then run in bfloat16 on every backend, while the float32 weights (the master copy) get float32
    gradients through the cast. Unchanged outside autocast."""
    device = q.device.type
    if not torch.is_autocast_enabled(device):
        return q, entity
    dtype = torch.get_autocast_dtype(device)
    return tuple(t.to(dtype) if t.dtype == torch.float32 else t for t in (q, entity))


def _dispatched(op: Op) -> Callable:
    """``rotmem.ops.<op.name>``: the reference's signature and docstring, run by the backend that
    ``rotmem.ops.backend`` picks for the device of the first input (the first tensor of a sequence,
    for ``n3``)."""
    name, autocast, params = op.name, op.autocast, op.params
    leading = 2 if autocast else 1  # the inputs read here, taken positionally

    @functools.wraps(op.reference)
    def run(*args, **kwargs):
        if len(args) < leading:  # given by keyword
            args = (*args, *[kwargs.pop(p) for p in params[len(args) : leading]])
        if autocast:
            args = (*autocast_inputs(args[0], args[1]), *args[2:])
        first = args[0] if isinstance(args[0], torch.Tensor) else args[0][0]
        return getattr(backend_module(first.device, name), name)(*args, **kwargs)

    run.__module__ = __name__
    return run


globals().update({op.name: _dispatched(op) for op in OPS})

__all__ = ["backend_name", "reference", *NAMES]
