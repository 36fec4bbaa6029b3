"""Paraphrase consistency against change-rate fidelity of the Semantic Speed Gate, trained several ways.

ROTMEM_DATA_DIR=../shared/data python -m benchmarks.gate_regularisation
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gate_regularisation (from the checkout's root)")

import argparse
import statistics
import time
from collections.abc import Iterator

import torch
import yaml
from scipy.stats import spearmanr

from benchmarks.runner import Benchmark, Row
from lightning_modules.phase1_gate import GatePretrainModule, GateTransitionData
from rotmem import configs
from rotmem.gate import SemanticSpeedGate, mine_transitions
from rotmem.gate.anchors import AnchoredSpeeds, anchors_for, choose_temperature, read_paraphrases
from rotmem.gate.encoder import RelationEncoder
from rotmem.gate.loss import change_probability, weighted_bce
from rotmem.gate.speed_gate import relation_sentences

SMOOTHING_TEMPERATURE = 0.05  # the anchored speeds' T on the packaged gate (leave-one-out choice)


Smoothing = tuple[float, torch.Tensor, torch.Tensor]  # (lambda, W [A, A], anchor_relation [A])


def train_gate(data: GateTransitionData, paraphrase_embeddings, paraphrase_relations, weight_decay: float,
               lr: float, epochs: int, seed: int,
               smoothing: Smoothing | None = None) -> SemanticSpeedGate:  # fmt: skip
    """Phase 1 full-batch (``GatePretrainModule.loss``), plus the augmentation term when
    ``paraphrase_embeddings [P, D]`` is given (``paraphrase_relations [P]``: their relation ids),
    plus the smoothing penalty when ``smoothing = (lambda, W [A, A], anchor_relation [A])``."""
    torch.manual_seed(seed)
    module = GatePretrainModule(
        data.embedding_dim, data.encoder, data.template, data.median_delta_days, lr=lr
    )
    optimiser = torch.optim.AdamW(  # decay on the MLP only, not on the time scale s_pre
        [{"params": module.gate.parameters()}, {"params": [module.log_scale], "weight_decay": 0.0}],
        lr=lr, weight_decay=weight_decay,
    )  # fmt: skip
    batch = data.full_batch()
    if paraphrase_embeddings is not None:
        rows = [torch.nonzero(batch["relation"] == int(r)).squeeze(1) for r in paraphrase_relations]
        selected = torch.cat(rows)
        owner = torch.cat([torch.full((len(r),), k) for k, r in enumerate(rows)])
    for _ in range(epochs):
        optimiser.zero_grad()
        loss = module.loss(batch)
        if paraphrase_embeddings is not None:
            alpha = module.gate(paraphrase_embeddings)[owner]
            p = change_probability(alpha, module.scale, batch["delta_days"][selected])
            loss = loss + weighted_bce(p, batch["changed"][selected], batch["weight"][selected])
        if smoothing is not None:
            weight, leave_one_out, anchor_relation = smoothing
            alpha = module.gate(batch["embeddings"])[anchor_relation]
            loss = loss + weight * ((leave_one_out @ alpha - alpha) ** 2).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)  # as the packaged setting
        optimiser.step()
    return module.gate.eval()


def heldout_gaps(alpha_held, alpha_rel, heldout, relations) -> list[float]:
    """``|alpha(phrasing) - alpha(its relation)|`` per held-out phrasing."""
    index = {r: i for i, r in enumerate(relations)}
    pairs = zip(alpha_held, heldout, strict=True)
    return [abs(float(a) - float(alpha_rel[index[p.relation]])) for a, p in pairs]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--weight-decay", type=float, nargs="+", default=[0.0, 0.1, 0.3, 1.0])
    parser.add_argument("--smoothing", type=float, nargs="*", default=[1.0, 3.0, 10.0, 30.0])
    parser.add_argument("--data-dir")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    torch.set_num_threads(1)  # tiny matrices: threads only add synchronisation (phase1_gate docs)
    config = yaml.safe_load(configs.resolve("gate-icews05-15").read_text())
    data_args = {k: v for k, v in config["data"].items() if k not in ("dataset", "data_dir")}
    data = GateTransitionData(**data_args, data_dir=args.data_dir)
    kg, relations = data.kg, data.kg.relations
    paraphrases = read_paraphrases()
    train = [p for p in paraphrases if p.split == "train"]
    heldout = [p for p in paraphrases if p.split == "heldout"]
    encoder = RelationEncoder(data.encoder)  # one MiniLM for the paraphrases and the anchors
    train_embeddings = encoder.encode(relation_sentences([p.text for p in train], data.template))
    train_relations = torch.tensor([kg.relation_id(p.relation) for p in train])
    pairs, rate = mine_transitions(kg.train, kg.num_relations).per_relation()
    lr, epochs = float(config["model"]["lr"]), int(config["trainer"]["max_epochs"])
    seed = int(config.get("seed_everything", 0))

    anchors = anchors_for(relations, paraphrases)
    anchor_texts = list(anchors)
    anchor_embeddings = encoder.encode(relation_sentences(anchor_texts, data.template)).float()
    anchor_units = torch.nn.functional.normalize(anchor_embeddings, dim=1)
    cos = (anchor_units @ anchor_units.T).fill_diagonal_(float("-inf"))
    leave_one_out = torch.softmax(cos / SMOOTHING_TEMPERATURE, dim=1)
    anchor_relation = torch.tensor([kg.relation_id(anchors[t]) for t in anchor_texts])
    settings = [(augment, decay, 0.0) for augment in (False, True) for decay in args.weight_decay]
    settings += [(False, 0.0, weight) for weight in args.smoothing]

    for augment, weight_decay, smoothing in settings:
        t0 = time.perf_counter()
        penalty = (smoothing, leave_one_out, anchor_relation) if smoothing else None
        gate = train_gate(data, train_embeddings if augment else None, train_relations, weight_decay,
                          lr, epochs, seed, penalty)  # fmt: skip
        temperature, _ = choose_temperature(gate, anchors, paraphrases)
        anchored = AnchoredSpeeds(gate, anchors, temperature)
        with torch.no_grad():
            plain_rel = gate.alpha(relations)
            plain_held = gate.alpha([p.text for p in heldout])
        anchored_rel = anchored.alpha(relations)
        anchored_held = anchored.alpha([p.text for p in heldout])
        plain = heldout_gaps(plain_held, plain_rel, heldout, relations)
        anch = heldout_gaps(anchored_held, anchored_rel, heldout, relations)

        def spearman(alpha, min_pairs):
            ids = [i for i in range(len(relations)) if pairs[i] >= min_pairs]
            return round(float(spearmanr(alpha[ids].numpy(), rate[ids].numpy()).statistic), 3)

        worst = max(range(len(heldout)), key=lambda i: anch[i])
        row = dict(
            paraphrases=augment, weight_decay=weight_decay, smoothing=smoothing, temperature=temperature,
            heldout_median_plain=round(statistics.median(plain), 4),
            heldout_max_plain=round(max(plain), 4),
            heldout_median_anchored=round(statistics.median(anch), 4),
            heldout_max_anchored=round(max(anch), 4),
            heldout_max_over_alpha_max=round(max(anch) / float(anchored_rel.max()), 3),
            worst_anchored=f"{heldout[worst].text} ({heldout[worst].relation})",
            spearman_ge1=spearman(anchored_rel, 1), spearman_ge20=spearman(anchored_rel, 20),
            alpha_std=round(float(anchored_rel.std()), 4), alpha_min=round(float(anchored_rel.min()), 4),
            alpha_max=round(float(anchored_rel.max()), 4), seconds=round(time.perf_counter() - t0, 1),
        )  # fmt: skip
        yield row


SPEC = Benchmark("gate_regularisation", __doc__, measure, add_arguments)

if __name__ == "__main__":
    SPEC.main()
