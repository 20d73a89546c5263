"""Fine-tuning over several processes (FSDP2 on gloo, eraudit/verifier/distributed.py) trains what one process
trains. Tolerance: fp32, where the only difference is the order in which the processes' gradient shares are
added (rounding ~1e-7 relative per step), so curves to 1e-5 relative and weights to 1e-5 absolute (the
paper's bf16 policy too: see the gpt-oss MXFP4 test)."""

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch
import yaml
from distributed_train import tiny_gpt_oss_shape
from helpers import torchrun
from safetensors.torch import load_file

from debate_audit.eraudit.common.grid import distributed_settings
from debate_audit.eraudit.verifier.distributed import Rank, step_share
from debate_audit.eraudit.verifier.finetune import FinetuneSettings, finetune_verifier
from debate_audit.models.loading import ModelRef
from debate_audit.models.prepare import prepare_model
from debate_audit.models.spec import ModelSpec, resolve_dtype
from debate_audit.models.weights import load_pretrained
from debate_audit.tools.tiny_checkpoints import tiny_tokenizer, write_mxfp4_gpt_oss

HERE = Path(__file__).parent
ROOT = HERE.parents[2]


@pytest.mark.parametrize("sizes", [[1] * 8, [1] * 7, [2, 1, 2], [3], [1, 1]])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_the_shares_of_a_step_add_up_to_its_rows_and_every_rank_takes_as_many_turns(sizes, world):
    micro = [[f"b{i}r{j}" for j in range(n)] for i, n in enumerate(sizes)]
    shares = [step_share(micro, Rank(r, world)) for r in range(world)]
    # every batch once with a share, fillers at 0; the gradient sum over ranks / world is the step's rows
    assert sorted(b[0] for s in shares for b, share in s if share) == sorted(b[0] for b in micro)
    assert sum(share for s in shares for _, share in s) / world == sum(sizes)
    assert len({len(s) for s in shares}) == 1 and len(shares[0]) == -(-len(sizes) // world)
    if world == 1:
        assert shares[0] == [(b, len(b)) for b in micro]  # the one-process loop exactly


PAPER = yaml.safe_load((ROOT / "config/paper.yaml").read_text())


def paper_flags(architecture: str) -> list[str]:
    """The worker's flags for `architecture`'s policy in config/paper.yaml: on a GPU every full fine-tune
    computes in bf16 (finetune.py), and verifier.distributed says whether its shards sit on the host."""
    offload = distributed_settings(PAPER["verifier"], architecture)["cpu_offload"]
    return ["--bf16", *(["--cpu-offload"] if offload else [])]


def train_in_one_and_two_processes(tmp_path: Path, arch: str, *flags: str, save: bool = False) -> tuple[dict, dict]:
    """distributed_train.py's curve, gathered weights and initial weights: one process, then two under torchrun;
    `save`: each run also writes its checkpoint to tmp_path / saved-<processes>."""

    def args(processes: int) -> list[str]:
        saved = ["--save", str(tmp_path / f"saved-{processes}")] if save else []
        return [arch, str(processes), str(tmp_path / f"{processes}.pt"), *flags, *saved]

    subprocess.run(
        [sys.executable, str(HERE / "distributed_train.py"), *args(1)], check=True, capture_output=True, timeout=300
    )
    torchrun(2, HERE / "distributed_train.py", *args(2))
    return torch.load(tmp_path / "1.pt"), torch.load(tmp_path / "2.pt")


def assert_same_training(one: dict, two: dict) -> None:
    """The two runs' curves equal to 1e-5 relative and their gathered weights to 1e-5 absolute, after training
    moved the weights by far more than that."""
    assert [c["items"] for c in two["curve"]] == [c["items"] for c in one["curve"]] == [3, 6, 7, 10, 13, 14]
    for a, b in zip(one["curve"], two["curve"]):
        for key in ("loss", "loss_lm", "loss_fc", "loss_qh", "learning_rate"):
            assert (a[key] is None) == (b[key] is None), key
            if a[key] is not None:
                assert b[key] == pytest.approx(a[key], rel=1e-5), (key, a, b)
    assert any(c["loss_lm"] is None for c in one["curve"])  # a step whose rows had no L_lm target
    assert set(two["weights"]) == set(one["weights"])
    assert max((one["weights"][k] - one["initial"][k]).abs().max() for k in one["weights"]) > 1e-3
    for name, weight in one["weights"].items():
        torch.testing.assert_close(two["weights"][name], weight, rtol=0, atol=1e-5, msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "gpt_oss"])
def test_two_gloo_processes_train_the_one_process_curve_and_weights(tmp_path, arch):
    # Seven rows, three a step: steps of 3, 3 and 1 rows (a rank with only a filler batch), two rows
    # without an L_lm target and one of L_qh alone (the lockstep passes), a cosine schedule with warm-up,
    # gradient clipping. gpt-oss: its experts (each rank routes its own rows to them), attention sinks and
    # sliding-window layers, which losses.py runs unpacked (L_lm and L_fc in two passes). fp32, the one
    # process unsharded.
    assert_same_training(*train_in_one_and_two_processes(tmp_path, arch))


@pytest.mark.slow
def test_gpt_oss_from_its_mxfp4_file_trains_saves_and_reloads_over_two_gloo_processes_as_in_one(tmp_path):
    """GPT-20B's path, on a CPU: a tiny gpt-oss written in the hub's MXFP4 format, read by load_pretrained in
    fp32 as finetune_verifier reads its base (experts dequantized), sharded with the paper's gpt-oss-20b policy
    (config/paper.yaml: shards on the host, bf16 compute), trained on the rows of the test above, gathered in
    the dtype of its model spec and saved by the job's save_verifier on rank 0, then read back by
    load_pretrained in that dtype, as the verifier's evaluation reads it. Two gloo processes against the same
    policy in a group of one.

    Host memory is not pinned here: distributed.shard pins the offloaded shards only where
    torch.accelerator.is_available(), and this machine (a CPU build of torch) has no accelerator, where
    pinning raises. The rest of the policy is the GPU's.

    Tolerance as the test above: with one row a micro-batch each bf16 pass sees the same gathered weights and
    row in both runs and the fp32 additions come in the same order (measured: losses equal to the last bit or
    one, weights within 1.2e-7). The reloaded weights equal the gathered fp32 ones rounded to the spec's bf16
    exactly: the one conversion on the way is that rounding."""
    spec = PAPER["models"]["gpt-oss-20b"]
    saved_dtype = resolve_dtype(spec["dtype"], spec["device"])
    hub = tmp_path / "hub"
    expected = write_mxfp4_gpt_oss(hub, tiny_gpt_oss_shape())
    tiny_tokenizer().save_pretrained(hub)  # save_verifier writes the base's tokenizer beside the weights
    assert json.loads((hub / "config.json").read_text())["quantization_config"]["quant_method"] == "mxfp4"
    one, two = train_in_one_and_two_processes(
        tmp_path,
        "gpt_oss",
        *paper_flags("gpt-oss-20b"),
        "--from",
        str(hub),
        "--save-dtype",
        spec["dtype"],
        save=True,
    )
    # the file's numbers: the experts' MXFP4 codes decoded, the rest as stored
    assert set(one["initial"]) == set(expected)
    for name, weight in expected.items():
        torch.testing.assert_close(one["initial"][name], weight, rtol=0, atol=0, msg=name)
    assert_same_training(one, two)
    for processes, run in ((1, one), (2, two)):
        saved = tmp_path / f"saved-{processes}"
        assert json.loads((saved / "fingerprint.json").read_text())["processes"] == processes
        # plain weights: no quantization_config left for the reload to dequantize what is not packed; the
        # dtype they were written in, not that of the fp32 master shards
        config = json.loads((saved / "config.json").read_text())
        assert "quantization_config" not in config and config["architectures"] == ["GptOssForCausalLM"]
        assert config["dtype"] == str(saved_dtype).removeprefix("torch.") == "bfloat16"
        reloaded = load_pretrained(saved, dtype=saved_dtype).state_dict()
        assert set(reloaded) == set(run["weights"])
        for name, weight in run["weights"].items():
            assert reloaded[name].dtype == saved_dtype, name
            torch.testing.assert_close(reloaded[name], weight.to(saved_dtype), rtol=0, atol=0, msg=name)


@pytest.mark.slow
def test_finetune_verifier_over_two_processes_writes_the_one_process_checkpoint(smoke_run, tmp_path):
    """The rule's path: finetune_verifier launches torchrun itself, the workers save one checkpoint, its
    curve and its fingerprint, in the rule's provenance. The verifier is a tiny random Llama with the embedded
    model's tokenizer (the embedded model's architecture; 6M parameters, not 135M, saved twice in full): the
    plumbing is what this test adds to the one above; the embedded model's own numbers over 2 processes are
    compared by a whole config/distributed-cpu.yaml run (config/README.md, "Distributed fine-tuning")."""
    workdir, _ = smoke_run
    base = tmp_path / "tiny-llama"
    prepare_model(
        ModelSpec.from_config("tiny-llama", {"source": "random", "id": "llama", "tokenizer": "smollm2-135m"}),
        base,
        tokenizer_dir=workdir / "resources/models/smollm2-135m",
    )
    # GPQA-H: the smoke run's one adversarial transcript that trains (QuALITY-H's is a fallback)
    debate = workdir / "results/er_audit/debate/gpqa_h/w20"
    common = dict(
        selected=debate / "debates_adversarial.parquet",
        pairs=workdir / "data/gpqa_h.parquet",
        split=workdir / "results/er_audit/debate/gpqa_h/split.parquet",
        base=ModelRef(name="tiny-llama", directory=str(base)),
        dataset="gpqa_h",
        variant="org",
        readout="auto",
        adjudications=workdir / "results/er_audit/verifier/smollm2-135m/gpqa_h/w20/adjudications_adversarial.parquet",
    )
    settings = dict(
        max_steps=2,
        grad_accum=2,
        max_length=256,
        max_target_tokens=24,
        lm_target="adjudication",
        loss_weights={"lm": 1.0, "fc": 2.0, "qh": 2.0},
    )
    records = {}
    for processes in (1, 2):
        out = tmp_path / f"p{processes}"
        records[processes] = finetune_verifier(
            **common,
            out_dir=out,
            curve_out=tmp_path / f"curve{processes}.parquet",
            settings=FinetuneSettings(**settings, processes=processes),
        )
    one, two = records[1], records[2]
    assert one["training_rows"] == two["training_rows"] > 0 and one["steps"] == two["steps"] == 2
    assert (one["processes"], two["processes"]) == (1, 2)
    assert json.loads((tmp_path / "p2/fingerprint.json").read_text()) == two
    curves = [pl.read_parquet(tmp_path / f"curve{n}.parquet") for n in (1, 2)]
    assert curves[1]["loss"].to_list() == pytest.approx(curves[0]["loss"].to_list(), rel=1e-5)
    weights = [load_file(tmp_path / f"p{n}/model.safetensors") for n in (1, 2)]
    assert set(weights[0]) == set(weights[1])
    for name, weight in weights[0].items():
        torch.testing.assert_close(weights[1][name], weight, rtol=0, atol=1e-5, msg=name)
    assert json.loads((tmp_path / "p2/config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
