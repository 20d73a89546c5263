"""What the verifiers cost (`make plan`, tools/plan.py): the adjudications that write L_lm's targets
(verifier_adjudicate), the tokens every fine-tuning trains on (verifier_finetune) and the readouts of every
checkpoint (verifier_evaluate); one row per job."""

from __future__ import annotations

from debate_audit.models.calls import RulePlan, tokens

from ..common import grid
from ..common.shape import item_shapes, transcript_shape


def calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    ver = config["verifier"]
    archs = grid.base_models(ver)
    cells = grid.Plan.from_config(config)
    plans = []
    for item in item_shapes(config, stats):
        for length in cells.lengths:
            shape = transcript_shape(config, item, length)
            if ver.get("lm_target") == "adjudication":
                # one teacher for every architecture, or each V_base: each writer adjudicates a transcript mode
                # once where some variant trains on it; one accepted attempt per transcript (blind-first
                # retries up to 3 more times where an attempt fails the audits)
                teacher = ver["adjudication"].get("teacher")
                writers: dict[str, set[str]] = {}
                for arch in archs:
                    writers.setdefault(teacher or arch, set()).update(
                        cells.adjudication_modes(arch, item.dataset, length)
                    )
                for writer, used in writers.items():
                    for mode in sorted(used):  # one job each
                        cell = {"adjudicator": writer, "dataset": item.dataset, "length": length, "debate_mode": mode}
                        adj = RulePlan("verifier_adjudicate", model=writer, cell=cell)
                        adj.generations += item.train
                        adj.prompt_tokens += item.train * (shape.transcript_tokens + 200)
                        adj.new_tokens += item.train * ver["adjudication"]["max_new_tokens"]
                        plans.append(adj)
            for arch in archs:
                for variant in cells.variants(arch, item.dataset, length):  # one job each
                    cell = {"architecture": arch, "dataset": item.dataset, "length": length, "variant": variant}
                    fine = RulePlan("verifier_finetune", model=arch, cell=cell)
                    # two rows per transcript, one per answer order; V_org may train for its own epochs
                    epochs = grid.own_training(ver, grid.Checkpoint.of(length, variant)).get("epochs", ver["epochs"])
                    steps_tokens = 2 * item.train * epochs * min(ver["max_length"], shape.transcript_tokens + 400)
                    if ver["max_steps"] is not None:
                        steps_tokens = min(
                            steps_tokens, ver["max_steps"] * ver["batch_size"] * ver["grad_accum"] * ver["max_length"]
                        )
                    fine.train_tokens += steps_tokens
                    plans.append(fine)
        for arch in archs:
            for checkpoint in cells.checkpoints(arch, item.dataset):  # one job each
                ev = RulePlan(
                    "verifier_evaluate",
                    model=arch,
                    cell={"architecture": arch, "dataset": item.dataset, "verifier": checkpoint},
                )
                ev.scorings += item.n_items * 4  # x q_m/q_h x 2 orders
                ev.prompt_tokens += ev.scorings * (60 + tokens(item.question_words))
                plans.append(ev)
    return plans
