"""Out-of-range ids (``rotmem.ops.id_checks``, ``csrc/checks.h``): on every backend here, the
reference included, each op that takes ids raises an ``IndexError`` of one line naming the op, the
input and the first bad id, and the process (and the GPU) goes on: the same call with good ids
works after it."""

from __future__ import annotations

import pytest
import torch

from rotmem.ops import ce_tiles, id_checks, reference
from rotmem.ops.biased_cross_entropy import cross_entropy_all_biased
from tests.ops import backends

N, R, B = 5, 3, 4  # entities, relations, queries


def cross_entropy(backend, ids):
    q, entity = torch.randn(B, 4), torch.randn(N, 4)
    target = ids.get("target", torch.tensor([0, 4, -100, 2]))
    return backend.ops.cross_entropy_all(
        q.to(backend.device), entity.to(backend.device), target.to(backend.device)
    )


def indexed_query(backend, ids):
    d = backend.device
    ent_idx = ids.get("ent_idx", torch.tensor([0, 4, 1, 2]))
    rel_idx = ids.get("rel_idx", torch.tensor([2, 0, 1, 0]))
    return backend.ops.unrotated_query_indexed(
        torch.randn(N, 4, device=d), torch.randn(R, 4, device=d), torch.randn(R, 4, device=d),
        ent_idx.to(d), rel_idx.to(d), torch.rand(B, device=d), torch.ones(B, device=d),
        torch.tensor(0.0, device=d), torch.tensor(2.0, device=d), 0.0,
    )  # fmt: skip


def rank_counts(backend, ids):
    d = backend.device
    target = ids.get("target", torch.tensor([4, 3, 1, 0]))  # with 2-entity tiles: reordered by chunk
    ptr, idx = torch.tensor([[0, 1, 1, 1, 2]]), torch.tensor([2, 4])
    q, entity = torch.randn(B, 4, device=d), torch.randn(N, 4, device=d)
    return backend.ops.filtered_rank_counts(q, entity, target.to(d), ptr.to(d), idx.to(d))


def biased(backend, ids):
    d = backend.device
    target = ids.get("target", torch.tensor([0, 4, 1, 2]))
    rows, cols = ids.get("rows", torch.tensor([0, 1, 3])), ids.get("cols", torch.tensor([2, 4, 0]))
    fn = reference.cross_entropy_all_biased if backend.name == "reference" else cross_entropy_all_biased
    q, entity, bias = torch.randn(B, 4, device=d), torch.randn(N, 4, device=d), torch.rand(3, device=d) + 0.1
    return fn(q, entity, target.to(d), rows.to(d), cols.to(d), bias)


ENTITIES, RELATIONS = f"the entity table of {N} rows", f"the relation table of {R} rows"


def message(op, name, at, value, table=ENTITIES):
    return f"{op}: {name}[{at}] = {value} is out of range for {table}"


CASES = [  # the call, its bad input, the expected message
    (cross_entropy, "target", [0, 1, 2, 5], message("cross_entropy_all", "target", 3, 5)),
    (cross_entropy, "target", [0, -1, 2, 3], message("cross_entropy_all", "target", 1, -1)),
    (cross_entropy, "target", [-100, -101, 2, 3], message("cross_entropy_all", "target", 1, -101)),
    (indexed_query, "ent_idx", [0, 1, 5, 2], message("unrotated_query_indexed", "ent_idx", 2, 5)),
    (indexed_query, "ent_idx", [-1, 1, 0, 2], message("unrotated_query_indexed", "ent_idx", 0, -1)),
    (indexed_query, "rel_idx", [0, 1, 2, 3], message("unrotated_query_indexed", "rel_idx", 3, 3, RELATIONS)),
    (
        indexed_query,
        "rel_idx",
        [0, -2, 2, 1],
        message("unrotated_query_indexed", "rel_idx", 1, -2, RELATIONS),
    ),
    (rank_counts, "target", [4, 3, 5, 0], message("filtered_rank_counts", "target", 2, 5)),
    (rank_counts, "target", [4, -1, 2, 0], message("filtered_rank_counts", "target", 1, -1)),
    (
        biased,
        "target",
        [0, 5, 1, 2],
        message("cross_entropy_all_biased", "target", 1, 5),
    ),  # N: the widened row
    (biased, "rows", [0, 4, 1], message("cross_entropy_all_biased", "rows", 1, 4, f"q of {B} rows")),
    (biased, "cols", [0, 1, -1], message("cross_entropy_all_biased", "cols", 2, -1)),
]
BACKENDS = backends.params(("native", "triton", "reference"), per_isa=False)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize(
    ("call", "name", "ids", "expected"), CASES, ids=[f"{c[0].__name__}-{c[1]}{c[2]}" for c in CASES]
)
def test_a_bad_id_raises_one_line_naming_it(backend, call, name, ids, expected, monkeypatch):
    monkeypatch.setenv("ROTMEM_BACKEND", backend.env_name)  # the biased CE dispatches through rotmem.ops
    monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", 8)  # 2-entity tiles: rank counts reorder their targets
    monkeypatch.delenv("ROTMEM_CHECK_IDS", raising=False)
    with pytest.raises(IndexError) as error:
        call(backend, {name: torch.tensor(ids)})
    assert str(error.value) == expected
    result = call(backend, {})  # the process goes on, and good ids still work
    assert all(torch.isfinite(t.float()).all() for t in (result if isinstance(result, tuple) else (result,)))
    if backend.device == "cuda":
        torch.cuda.synchronize()  # no device-side assert is pending


def test_the_switch_skips_the_check_off_the_cpu_only(monkeypatch):
    monkeypatch.setenv("ROTMEM_CHECK_IDS", "0")
    assert not id_checks.enabled(torch.device("cuda"))
    assert id_checks.enabled(torch.device("cpu"))  # no readback to save on the CPU
    with pytest.raises(
        IndexError, match=r"^op: ids\[0\] = 7 is out of range for the entity table of 7 rows$"
    ):
        id_checks.check_ids("op", "ids", torch.tensor([7]), 7)
    monkeypatch.setenv("ROTMEM_CHECK_IDS", "1")
    assert id_checks.enabled(torch.device("cuda"))


def test_a_shard_names_its_id_span_and_ignored_ids_pass():
    id_checks.check_ids("op", "target", torch.tensor([-100, 12, 10]), 3, ignore=-100, offset=10)
    with pytest.raises(
        IndexError, match=r"^op: target\[1\] = 13 is out of range for the entity table of ids \[10, 13\)$"
    ):
        id_checks.check_ids("op", "target", torch.tensor([10, 13]), 3, offset=10)


def test_the_reference_check_traces_under_torch_compile():
    q, entity = torch.randn(B, 4), torch.randn(N, 4)
    compiled = torch.compile(reference.cross_entropy_all, backend="eager", fullgraph=True)  # no graph break
    target = torch.tensor([0, 4, -100, 2])
    torch.testing.assert_close(compiled(q, entity, target), reference.cross_entropy_all(q, entity, target))
