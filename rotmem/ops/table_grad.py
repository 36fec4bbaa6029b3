"""The gradient of an embedding table from the gradients of the rows a batch gathered.

A loss that gathers ``B`` rows of a table ``[N, D]`` gives the table a gradient that is zero but
for those rows. Dense, that gradient is an ``[N, D]`` tensor of zeros with the rows added: at
N = 1,000,000 entities and D = 498 it is 2 GB made, written and added per step. With ``sparse``
it is a sparse COO tensor (``indices [1, B]``, ``values [B, D]``, repeated rows not yet summed),
which autograd adds in place into the dense gradient the rest of the loss gives the table (the
1-vs-all cross-entropy touches every entity): no ``[N, D]`` temporary is made.

Ask for it only in such a loss. If nothing else gives the table a dense gradient, ``table.grad``
stays sparse, as ``nn.Embedding(sparse=True)`` leaves it: ``torch.optim.Adagrad`` and
``SparseAdam`` take that, ``Adam`` refuses it. Traced code (``torch.compile``) always gets the
dense gradient: compiled graphs take no sparse tensors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def is_traced(t: torch.Tensor) -> bool:
    """Whether ``t`` stands in for data while a graph is traced (fake, functional or functorch
    tensors under ``torch.compile``, ``opcheck`` or ``make_fx``) rather than holding it."""
    return (
        torch.compiler.is_compiling()
        or type(t) is not torch.Tensor
        or torch._C._functorch.is_functorch_wrapped_tensor(t)
    )


def table_gradient(
    rows: torch.Tensor, index: torch.Tensor, table: torch.Tensor, sparse: bool
) -> torch.Tensor:
    """The gradient of ``table [N, D]`` whose rows ``index [B]`` received ``rows [B, D]``.

    Sparse COO when ``sparse`` and not traced, else dense, summed in ``rows``' dtype (a float32
    buffer sums bfloat16 tables' repeated rows before the one rounding to ``table.dtype``).
    """
    if sparse and not is_traced(rows):
        values = rows.to(table.dtype)
        return torch.sparse_coo_tensor(index.reshape(1, -1), values, table.shape, check_invariants=False)
    dense = torch.zeros(table.shape, dtype=rows.dtype, device=rows.device)
    return dense.index_add_(0, index.reshape(-1), rows).to(table.dtype)


def gather_rows(table: torch.Tensor, index: torch.Tensor, sparse_grad: bool = False) -> torch.Tensor:
    """``table[index]``: ``[*index.shape, D]`` rows of ``table [N, D]``; with ``sparse_grad`` the
    table's gradient is sparse (see the module's docstring), else dense."""
    if sparse_grad and not torch.compiler.is_compiling():
        return F.embedding(index, table, sparse=True)
    return table.index_select(0, index.reshape(-1)).view(*index.shape, table.shape[-1])
