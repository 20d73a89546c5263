"""One torchrun worker of test_eraudit_distributed.py: the tiny model of the one-process run (a Llama, or a
gpt-oss: experts, attention sinks, sliding-window and full layers), sharded over the job's processes, trained
on the same rows; rank 0 saves the curve and the gathered weights.

    python distributed_train.py ARCH PROCESSES OUT [--cpu-offload] [--bf16] [--from DIR] [--save DIR --save-dtype D]

--cpu-offload and --bf16: FSDP2 with the shards on the host and the gathered layers computing in bf16 (the
paper's gpt-oss-20b policy, config/paper.yaml verifier.distributed), sharded even in one process (a group
of one, as a one-process fine-tune on a GPU is); without them one process trains unsharded in fp32.
--from DIR: the model read from DIR as finetune_verifier reads its base (load_pretrained in fp32, an MXFP4
checkpoint's experts dequantized), not built in memory. --save DIR: the trained model also written to DIR as
finetune_verifier writes a sharded one (full_state_dict in the saved dtype, save_verifier on rank 0), in
`--save-dtype`, a model spec's dtype resolved on a GPU as the paper's jobs run."""

import argparse
import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer, GptOssForCausalLM

from debate_audit.eraudit.verifier.distributed import full_state_dict, shard, start, stop
from debate_audit.eraudit.verifier.finetune import FinetuneSettings, save_verifier, train
from debate_audit.eraudit.verifier.training_rows import IGNORE, ChoiceExample, TrainExample
from debate_audit.models.spec import resolve_dtype
from debate_audit.models.weights import load_pretrained
from debate_audit.tools.tiny_checkpoints import tiny_gpt_oss_config

# Run as a script (by python and torchrun), so only this folder is on sys.path: tests/ for the shared helpers.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from helpers import tiny_llama  # noqa: E402

LABEL_IDS = [5, 6]
PAD = 0


def tiny_gpt_oss_shape():
    """The tiny gpt-oss of these runs: a window of 4 tokens, which the rows (5-10 tokens) reach past; widths of
    32, one MXFP4 block, so that its experts can be written in the hub's format too."""
    return tiny_gpt_oss_config(vocab_size=48, hidden_size=32, intermediate_size=32, sliding_window=4)


def tiny_model(arch: str):
    if arch == "gpt_oss":
        torch.manual_seed(0)
        return GptOssForCausalLM(tiny_gpt_oss_shape())  # eager attention, as gpt-oss loads
    return tiny_llama(seed=0)


def rows():
    """Seven rows of unequal lengths, all with L_qh: two without an L_lm target (an unresolved adjudication),
    one of L_qh alone (a train pair without an attack, org_training.qh_items: train)."""
    out = []
    for pair_id in range(7):
        prompt = [10 + pair_id, 11, 12, 13, 14][: 3 + pair_id % 3]
        target = [] if pair_id in (2, 5) else [20, 21, 22 + pair_id % 4]
        fc = [ChoiceExample([30, 31, 32 + pair_id], pair_id % 2)]
        qh = [ChoiceExample([40, 41 + pair_id % 3, 42], 1 - pair_id % 2)]
        if pair_id == 6:
            out.append(TrainExample(pair_id, [], [], [], qh))
            continue
        ids = prompt + target if target else []
        labels = [IGNORE] * len(prompt) + target if target else []
        out.append(TrainExample(pair_id, ids, labels, fc, qh))
    return out


# three rows a step: steps of 3, 3 and 1 rows per epoch; over 2 processes, 2 + 1 micro-batches and a filler
SETTINGS = dict(
    epochs=2,
    learning_rate=3e-3,
    batch_size=1,
    grad_accum=3,
    warmup_steps=1,
    lr_schedule="cosine",
    loss_weights={"lm": 1.0, "fc": 2.0, "qh": 2.0},
)


def run(
    arch: str,
    processes: int,
    out: str,
    *,
    cpu_offload: bool = False,
    bf16: bool = False,
    base: str | None = None,
    save: str | None = None,
    save_dtype: str = "auto",
) -> None:
    torch.set_num_threads(1)
    policy = cpu_offload or bf16
    rank, _ = start("cpu", shard_alone=policy)
    # finetune_verifier's load: fp32 master weights
    model = tiny_model(arch) if base is None else load_pretrained(base, dtype=torch.float32)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    sharded = rank.world > 1 or policy
    if sharded:
        model = shard(model, cpu_offload=cpu_offload, compute_dtype=torch.bfloat16 if bf16 else None)
    settings = FinetuneSettings(**SETTINGS, processes=processes, cpu_offload=cpu_offload)
    curve = train(model, rows(), settings, LABEL_IDS, PAD, rank=rank)
    weights = full_state_dict(model) if sharded else {k: v.detach().clone() for k, v in model.state_dict().items()}
    if save is not None:
        if not sharded or base is None:
            raise ValueError("--save writes what finetune_verifier writes of a sharded model loaded --from a base")
        # finetune_verifier's save of a sharded model, the dtype resolved on the paper's device
        state = full_state_dict(model, resolve_dtype(save_dtype, "cuda"))
        if rank.main:
            save_verifier(model, AutoTokenizer.from_pretrained(base), save, state_dict=state, processes=rank.world)
    if rank.main:
        torch.save({"curve": curve, "weights": weights, "initial": initial}, out)
    stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("arch", choices=["llama", "gpt_oss"])
    parser.add_argument("processes", type=int)
    parser.add_argument("out")
    parser.add_argument("--cpu-offload", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--from", dest="base")
    parser.add_argument("--save")
    parser.add_argument("--save-dtype", default="auto")
    args = parser.parse_args()
    run(
        args.arch,
        args.processes,
        args.out,
        cpu_offload=args.cpu_offload,
        bf16=args.bf16,
        base=args.base,
        save=args.save,
        save_dtype=args.save_dtype,
    )
