"""``inner_products`` (native CPU kernel, ``csrc/cpu/inner_products.cpp``): scores against the float64
reference within the float32 rounding bound of a D-term dot product, on every instruction set the CPU
runs, odd shapes (widths off the 8 lanes, row and query counts off the 4 x 2 tiles); a batch gives
bit for bit what each query gives alone; bad input is named; opcheck."""

from __future__ import annotations

import re

import pytest
import torch

from rotmem.ops import reference

native = pytest.importorskip("rotmem.ops.native")
if not native.is_available("cpu"):
    pytest.skip(native.unavailable_reason("cpu"), allow_module_level=True)

SHAPES = [(1, 1, 1), (5, 7, 3), (37, 8, 2), (13, 9, 5), (64, 17, 4), (301, 384, 7), (3, 40, 1)]
U = 2.0**-24  # float32 unit roundoff


def _inputs(n: int, d: int, b: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=generator), torch.randn(b, d, generator=generator)


@pytest.mark.parametrize("n, d, b", SHAPES)
def test_scores_match_the_reference_within_rounding(cpu_isa, n, d, b):
    vectors, queries = _inputs(n, d, b)
    got = native.inner_products(vectors, queries)
    exact = reference.inner_products(vectors.double(), queries.double())
    # A sum of d float32 products, each rounded once (or fused), partial sums rounded: |error| <=
    # gamma_(d+1) * sum |q_k x_k| with gamma_m = m u / (1 - m u) (Higham, Accuracy and Stability, 3.1).
    gamma = (d + 1) * U / (1 - (d + 1) * U)
    bound = gamma * (queries.abs().double() @ vectors.abs().double().T)
    assert got.dtype == torch.float32 and got.shape == (b, n)
    assert ((got.double() - exact).abs() <= bound).all()


@pytest.mark.parametrize("n, d, b", SHAPES)
def test_a_batch_gives_what_each_query_gives_alone(cpu_isa, n, d, b):
    vectors, queries = _inputs(n, d, b, seed=1)
    batch = native.inner_products(vectors, queries)
    alone = torch.cat([native.inner_products(vectors, queries[j : j + 1]) for j in range(b)])
    assert torch.equal(batch, alone)
    part = native.inner_products(vectors[1:], queries)  # a row's score does not depend on its tile
    assert torch.equal(batch[:, 1:], part)


def test_the_wide_instruction_sets_agree_bit_for_bit():
    wide = [isa for isa in ("avx512", "avx2") if isa in native.supported_cpu_isas()]
    if len(wide) < 2:
        pytest.skip(f"this CPU runs {', '.join(native.supported_cpu_isas())}: one wide set at most")
    vectors, queries = _inputs(101, 75, 5, seed=2)
    results = []
    for isa in wide:
        with native.forced_cpu_isa(isa):
            results.append(native.inner_products(vectors, queries))
    assert torch.equal(*results)


def test_non_contiguous_inputs_and_empty_shapes():
    vectors, queries = _inputs(20, 12, 3, seed=3)
    strided = native.inner_products(vectors.T.contiguous().T, queries[:, :])
    assert torch.equal(strided, native.inner_products(vectors, queries))
    assert native.inner_products(vectors[:0], queries).shape == (3, 0)
    assert native.inner_products(vectors, queries[:0]).shape == (0, 20)


@pytest.mark.parametrize(
    "vectors, queries, message",
    [
        (torch.randn(4, 3), torch.randn(2, 5), "width 3, queries 5"),
        (torch.randn(4, 3), torch.randn(3), "must be [N, D] and queries [B, D]"),
        (torch.randn(4, 3, dtype=torch.float64), torch.randn(2, 3), "float32"),
    ],
)
def test_bad_input_is_named(vectors, queries, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        native.inner_products(vectors, queries)


def test_opcheck():
    vectors, queries = _inputs(9, 10, 3, seed=4)
    torch.library.opcheck(torch.ops.rotmem.inner_products, (vectors, queries))
