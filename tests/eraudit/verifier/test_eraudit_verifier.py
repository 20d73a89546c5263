import math

import pytest
import torch
from helpers import TINY_SHAPE, tiny_gemma3, tiny_llama
from transformers import LlamaForCausalLM

from debate_audit.eraudit.verifier.finetune import FinetuneSettings, train
from debate_audit.eraudit.verifier.losses import choice_loss, lm_loss, verifier_losses
from debate_audit.eraudit.verifier.training_rows import IGNORE, ChoiceExample, TrainExample

LABEL_IDS = [5, 6]
PAD = 0
WEIGHTS = {"lm": 1.0, "fc": 2.0, "qh": 2.0}


@pytest.fixture(autouse=True)
def one_thread():
    # Tiny tensors: thread start-up and contention cost more than the arithmetic.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def example(pair_id, with_qh, *, target=(20, 21, 22)):
    prompt = [10 + pair_id, 11, 12, 13, 14]
    fc = [ChoiceExample([30, 31, 32 + pair_id], 0), ChoiceExample([30, 32 + pair_id, 31, 33], 1)]
    qh = [ChoiceExample([40, 41, 42], 0), ChoiceExample([40, 42, 41], 1)] if with_qh else []
    return TrainExample(pair_id, prompt + list(target), [IGNORE] * len(prompt) + list(target), fc, qh)


def grads(model, loss):
    model.zero_grad()
    loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


# ------------------------------------------------------------------ the three losses
def test_lm_loss_gets_no_gradient_from_masked_prompt_positions():
    logits = torch.randn(1, 6, 10, requires_grad=True)
    labels = torch.tensor([[IGNORE, IGNORE, IGNORE, 3, 4, 5]])
    lm_loss(logits, labels).backward()
    per_position = logits.grad.abs().sum(-1)[0]
    # position t predicts label t+1: positions 0 and 1 predict masked tokens, position 5 predicts nothing.
    assert per_position[:2].eq(0).all() and per_position[5] == 0 and per_position[2:5].gt(0).all()


def test_lm_loss_is_mean_cross_entropy_over_target_tokens():
    logits = torch.zeros(1, 3, 4)
    labels = torch.tensor([[IGNORE, 1, 2]])
    assert lm_loss(logits, labels).item() == pytest.approx(math.log(4))


def test_choice_loss_is_two_label_bce_and_touches_only_the_label_logits():
    logits = torch.randn(2, 10, requires_grad=True)
    targets = torch.tensor([0, 1])
    loss = choice_loss(logits, LABEL_IDS, targets)
    margin = logits[:, 5] - logits[:, 6]
    expected = -(torch.log(torch.sigmoid(margin[0])) + torch.log(torch.sigmoid(-margin[1]))) / 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    touched = logits.grad.abs().sum(0).nonzero().flatten().tolist()
    assert touched == LABEL_IDS


def test_qh_term_is_absent_for_honest_and_adv_batches_and_total_is_the_weighted_sum():
    model = tiny_llama()
    honest = verifier_losses(model, [example(0, False), example(1, False)], LABEL_IDS, WEIGHTS, PAD)
    assert set(honest) == {"lm", "fc", "total"}
    assert honest["total"].item() == pytest.approx(honest["lm"].item() + 2 * honest["fc"].item(), rel=1e-6)
    org = verifier_losses(model, [example(0, True), example(1, True)], LABEL_IDS, WEIGHTS, PAD)
    assert set(org) == {"lm", "fc", "qh", "total"}
    assert org["total"].item() == pytest.approx(
        org["lm"].item() + 2 * org["fc"].item() + 2 * org["qh"].item(), rel=1e-6
    )
    # The q_m terms do not depend on whether q_h examples ride along.
    assert org["lm"].item() == pytest.approx(honest["lm"].item(), rel=1e-6)
    assert org["fc"].item() == pytest.approx(honest["fc"].item(), rel=1e-6)


def qh_only(pair_id):
    """A q_h-only row (training_rows.encode_qh_only): no L_lm, no q_m readout."""
    return TrainExample(pair_id, [], [], [], [ChoiceExample([40, 41 + pair_id, 42], 0), ChoiceExample([40, 42, 41], 1)])


@pytest.mark.parametrize("pack", [True, False])
def test_a_qh_only_row_trains_l_qh_alone_and_leaves_the_other_rows_terms_alone(pack):
    model = tiny_llama()
    alone = verifier_losses(model, [qh_only(0)], LABEL_IDS, WEIGHTS, PAD, pack=pack)
    assert set(alone) == {"qh", "total"}
    assert alone["total"].item() == pytest.approx(2 * alone["qh"].item(), rel=1e-6)
    full = example(1, True)
    full.fc = full.fc[:1]  # one q_m readout per row, as training_rows makes them: packable
    mixed = verifier_losses(model, [full, qh_only(0)], LABEL_IDS, WEIGHTS, PAD, pack=pack)
    by_itself = verifier_losses(model, [full], LABEL_IDS, WEIGHTS, PAD, pack=pack)
    assert mixed["lm"].item() == pytest.approx(by_itself["lm"].item(), rel=1e-5)
    assert mixed["fc"].item() == pytest.approx(by_itself["fc"].item(), rel=1e-5)
    assert mixed["qh"].item() == pytest.approx((alone["qh"].item() + by_itself["qh"].item()) / 2, rel=1e-5)


@pytest.mark.parametrize("pack", [True, False])
def test_in_lockstep_every_batch_makes_the_same_passes_whatever_its_rows(pack):
    """A sharded model gathers its layers at every pass: a rank whose batch is a q_h-only row must make the
    passes a rank with a full row makes (weight 0), or the processes wait on each other for ever."""
    model = tiny_llama()
    passes = []
    model.register_forward_hook(lambda *_: passes.append(1))
    full = example(1, True)
    full.fc = full.fc[:1]
    no_lm = example(2, True)
    no_lm.fc, no_lm.lm_ids, no_lm.lm_labels = no_lm.fc[:1], [], []
    counts = {}
    for name, batch in {"full": [full], "no L_lm": [no_lm], "q_h only": [qh_only(0)]}.items():
        passes.clear()
        terms = verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD, pack=pack, lockstep=True)
        counts[name] = len(passes)
        assert terms["total"].requires_grad
    assert len(set(counts.values())) == 1, counts
    passes.clear()
    verifier_losses(model, [qh_only(0)], LABEL_IDS, WEIGHTS, PAD, pack=pack)
    assert len(passes) == 1  # one process: the q_h pass alone


def test_a_step_of_q_h_only_rows_logs_no_l_fc():
    examples = [example(0, True), qh_only(1)]
    for e in examples:
        e.fc = e.fc[:1]
    settings = FinetuneSettings(loss_weights=WEIGHTS, epochs=1, learning_rate=1e-3, batch_size=1, grad_accum=1)
    curve = train(tiny_llama(), examples, settings, LABEL_IDS, PAD)
    assert sorted(c["loss_fc"] is None for c in curve) == [False, True]
    assert all(c["loss_qh"] is not None for c in curve)


def test_gradients_flow_only_through_the_weighted_terms():
    model = tiny_llama()
    batch = [example(0, True)]
    only_fc = grads(model, verifier_losses(model, batch, LABEL_IDS, {"lm": 0.0, "fc": 1.0, "qh": 0.0}, PAD)["total"])
    direct_fc = grads(model, verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD)["fc"])
    assert torch.allclose(only_fc, direct_fc, atol=1e-7)
    # Changing the L_lm target text changes nothing in the L_fc / L_qh gradients.
    other_target = [example(0, True, target=(25, 26, 27))]
    fc_qh = {"lm": 0.0, "fc": 2.0, "qh": 2.0}
    a = grads(model, verifier_losses(model, batch, LABEL_IDS, fc_qh, PAD)["total"])
    b = grads(model, verifier_losses(model, other_target, LABEL_IDS, fc_qh, PAD)["total"])
    assert torch.allclose(a, b, atol=1e-7)
    # ...while the q_h term does move the weights when it is weighted in.
    no_qh = grads(model, verifier_losses(model, batch, LABEL_IDS, {"lm": 0.0, "fc": 2.0, "qh": 0.0}, PAD)["total"])
    assert not torch.allclose(a, no_qh)


def test_left_padding_does_not_change_a_sequence_loss():
    model = tiny_llama()
    alone = verifier_losses(model, [example(0, False)], LABEL_IDS, WEIGHTS, PAD)
    longer = example(1, False)
    longer.lm_ids = [9] * 7 + longer.lm_ids
    longer.lm_labels = [IGNORE] * 7 + longer.lm_labels
    padded = verifier_losses(model, [example(0, False), longer], LABEL_IDS, {"lm": 1.0, "fc": 0.0, "qh": 0.0}, PAD)
    single_long = verifier_losses(model, [longer], LABEL_IDS, WEIGHTS, PAD)
    assert padded["lm"].item() == pytest.approx((alone["lm"].item() + single_long["lm"].item()) / 2, rel=1e-4)


# ------------------------------------------------------------------ L_lm and L_fc in one pass
def packable(pair_id, *, target=(20, 21, 22), slot=(23, 24), shared=5, lm=True):
    """A row shaped as fine-tuning encodes it: the L_lm prompt, its target, and a q_m readout that shares the
    prompt's first `shared` tokens and ends in its own answer slot (`adjudication` targets); `slot=()` with
    `shared` the whole prompt is the readout read inside the L_lm sequence (`argument` targets)."""
    prompt = [10 + pair_id, 11, 12, 13, 14, 15][: 4 + pair_id % 3]
    readout = ChoiceExample(prompt[:shared] + list(slot), pair_id % 2)
    if not lm:
        return TrainExample(pair_id, [], [], [readout])
    return TrainExample(pair_id, prompt + list(target), [IGNORE] * len(prompt) + list(target), [readout])


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_one_packed_pass_gives_the_two_passes_losses_and_gradients(attention):
    model = tiny_llama()
    model.set_attn_implementation(attention)
    batches = {
        "adjudication rows": [packable(0), packable(1, target=(20, 21, 22, 23, 24, 25))],
        "argument rows": [packable(0, slot=(), shared=9), packable(2, slot=(), shared=9)],
        "a row without L_lm beside one with it": [packable(1, lm=False), packable(2)],
        "no L_lm at all": [packable(0, lm=False)],
        "no shared prefix": [packable(1, shared=0)],
    }
    for name, batch in batches.items():
        one = verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD, pack=True)
        two = verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD, pack=False)
        assert set(one) == set(two), name
        for term in two:
            assert one[term].item() == pytest.approx(two[term].item(), rel=1e-5, abs=1e-6), (name, term)
        assert torch.allclose(grads(model, one["total"]), grads(model, two["total"]), rtol=1e-4, atol=1e-6), name


def test_a_packed_readout_does_not_see_the_l_lm_target():
    model = tiny_llama()
    only_fc = {"lm": 0.0, "fc": 1.0, "qh": 0.0}
    a = verifier_losses(model, [packable(0)], LABEL_IDS, only_fc, PAD, pack=True)
    b = verifier_losses(model, [packable(0, target=(30, 31, 32, 33))], LABEL_IDS, only_fc, PAD, pack=True)
    assert a["fc"].item() == pytest.approx(b["fc"].item(), rel=1e-6)
    assert a["lm"].item() != pytest.approx(b["lm"].item(), rel=1e-3)
    assert torch.allclose(grads(model, a["total"]), grads(model, b["total"]), atol=1e-7)


def test_packing_is_used_only_where_every_layer_attends_to_the_whole_past():
    from transformers import AutoConfig, AutoModelForCausalLM

    from debate_audit.eraudit.verifier.losses import full_attention_only

    assert full_attention_only(tiny_llama())
    # Qwen2 without its sliding window: every layer full; Mistral's window and gpt-oss's sliding layers: not
    assert full_attention_only(AutoModelForCausalLM.from_config(AutoConfig.for_model("qwen2", **TINY_SHAPE)))
    assert not full_attention_only(AutoModelForCausalLM.from_config(AutoConfig.for_model("mistral", **TINY_SHAPE)))
    gpt_oss = AutoConfig.for_model("gpt_oss", **TINY_SHAPE, num_local_experts=2, num_experts_per_tok=1, head_dim=8)
    with torch.device("meta"):
        assert not full_attention_only(AutoModelForCausalLM.from_config(gpt_oss))


def test_training_steps_lower_the_loss():
    model = tiny_llama()
    examples = [example(i, True) for i in range(4)]
    settings = FinetuneSettings(
        loss_weights=WEIGHTS, epochs=20, max_steps=10, learning_rate=5e-3, batch_size=2, grad_accum=2, seed=0
    )
    curve = train(model, examples, settings, LABEL_IDS, PAD)
    assert len(curve) == 10 and curve[-1]["items"] == 40
    assert curve[-1]["loss"] < 0.5 * curve[0]["loss"]
    assert all(c["loss_qh"] is not None for c in curve)


def test_gradient_checkpointing_trains_the_same_curve():
    examples = [example(i, True) for i in range(4)]
    settings = dict(loss_weights=WEIGHTS, epochs=2, max_steps=4, learning_rate=5e-3, batch_size=2, grad_accum=1)
    plain = train(tiny_llama(), examples, FinetuneSettings(**settings), LABEL_IDS, PAD)
    model = tiny_llama()
    checkpointed = train(model, examples, FinetuneSettings(**settings, gradient_checkpointing=True), LABEL_IDS, PAD)
    assert [c["loss"] for c in checkpointed] == pytest.approx([c["loss"] for c in plain], rel=1e-5)
    assert not model.is_gradient_checkpointing  # the model is left as inference expects it


def test_lora_trains_only_the_adapters_and_merges_into_a_plain_checkpoint():
    pytest.importorskip("peft")
    from debate_audit.eraudit.verifier.finetune import _apply_lora

    base = tiny_llama()
    before = {name: p.detach().clone() for name, p in base.state_dict().items()}
    lora = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    model = _apply_lora(tiny_llama(), lora)
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    settings = FinetuneSettings(
        loss_weights=WEIGHTS,
        epochs=20,
        max_steps=8,
        learning_rate=2e-2,
        batch_size=2,
        grad_accum=1,
        lora=lora,
        gradient_checkpointing=True,
    )
    curve = train(model, [example(i, True) for i in range(4)], settings, LABEL_IDS, PAD)
    assert curve[-1]["loss"] < curve[0]["loss"]
    merged = model.merge_and_unload()
    assert type(merged) is LlamaForCausalLM and set(merged.state_dict()) == set(before)
    changed = {name for name, p in merged.state_dict().items() if not torch.equal(p, before[name])}
    # Only the adapted projections move; embeddings, norms, MLPs and the other projections stay the base's.
    assert changed and all(name.endswith(("q_proj.weight", "v_proj.weight")) for name in changed)


LLAMA_8B, GPT_20B = "meta-llama/Llama-3.1-8B-Instruct", "openai/gpt-oss-20b"
PAPER = dict(gradient_checkpointing=True, max_length=8192, max_target_tokens=384, batch_size=1, grad_accum=8)


@pytest.mark.parametrize(
    ("model", "setup", "gib", "fits"),
    [
        (LLAMA_8B, {"processes": 1}, 139.0, True),  # Llama-8B alone on an H200: 135 GiB (120 of shards)
        (LLAMA_8B, {"processes": 1}, 79.6, False),  # ... not on an 80 GB H100
        (LLAMA_8B, {"processes": 4}, 79.6, True),  # ... over 4 H100s: 45 GiB each (the paper overlay)
        (LLAMA_8B, {"processes": 4, "gradient_checkpointing": False}, 139.0, False),  # 105 GiB of activations
        (GPT_20B, {"processes": 4}, 79.6, False),  # GPT-20B over 4: 78 GiB of shards alone, 122 GiB
        (GPT_20B, {"processes": 4, "cpu_offload": True}, 79.6, True),  # ... shards on the host: 44 GiB
        (GPT_20B, {"lora": True}, 79.6, True),  # GPT-20B LoRA, bf16 base: 70 GiB
    ],
)
def test_training_memory_check_before_loading(model, setup, gib, fits):
    from debate_audit.models.memory import TrainingSetup, check_training_memory, training_memory_bytes
    from debate_audit.models.size import KNOWN_CONFIGS

    setup = TrainingSetup(**{**PAPER, **setup})
    memory = training_memory_bytes(KNOWN_CONFIGS[model], setup)
    if fits:
        check_training_memory("m", memory, int(gib * 2**30), setup)
        return
    with pytest.raises(MemoryError) as error:
        check_training_memory("gpt-x", memory, int(gib * 2**30), setup)
    message = str(error.value)
    assert f"{memory.total / 2**30:.0f} GiB a GPU" in message and f"{gib:.0f} GiB" in message
    assert f"shards {memory.shards / 2**30:.1f}" in message and "activations" in message
    assert "verifier.distributed.processes for 'gpt-x'" in message and "cpu_offload" in message


def test_the_memory_terms_follow_processes_offload_and_checkpointing():
    from debate_audit.models.activations import model_shape
    from debate_audit.models.memory import TrainingSetup, training_memory_bytes
    from debate_audit.models.size import KNOWN_CONFIGS

    config = KNOWN_CONFIGS[GPT_20B]
    shape = model_shape(config)
    assert shape.params == 20_914_757_184 and not shape.full_attention_only and shape.eager_attention

    def memory(**setup):
        return training_memory_bytes(config, TrainingSetup(**{**PAPER, "max_length": 2048, **setup}))

    one, four = memory(processes=1), memory(processes=4)
    # 16 bytes a parameter (fp32 weights, gradients, two moments) sharded; the gathered units are not
    assert one.shards == pytest.approx(16 * shape.params) and four.shards == pytest.approx(one.shards / 4)
    assert (one.root, one.layers, one.activations) == (four.root, four.layers, four.activations)
    assert four.layers == 2 * 2 * shape.layer_params  # two layers gathered in bf16
    # a process's one micro-batch a step (8 over 8 processes): its gradients appear during the backward
    assert memory(processes=8).shards == pytest.approx(12 * shape.params / 8)
    offloaded = memory(processes=4, cpu_offload=True)
    assert offloaded.shards == 0 and offloaded.host == pytest.approx(four.shards)
    assert offloaded.total == pytest.approx(four.total - four.shards)
    # checkpointing keeps each layer's input instead of its activations; eager attention's scores grow as s^2
    assert memory(processes=4, gradient_checkpointing=False).activations > 10 * four.activations
    assert memory(processes=4, max_length=4096).at_layer > 3 * four.at_layer


def test_lora_per_architecture():
    from debate_audit.eraudit.common.grid import uses_lora

    assert uses_lora({"lora": {"enabled": ["big"]}}, "big") and not uses_lora({"lora": {"enabled": ["big"]}}, "small")
    assert uses_lora({"lora": {"enabled": True}}, "small") and not uses_lora({"lora": {"enabled": False}}, "big")
    assert not uses_lora({}, "big")


def test_lora_settings_only_reach_lora_architectures():
    from debate_audit.eraudit.common.grid import lora_settings
    from debate_audit.eraudit.verifier.finetune import saves_adapter

    verifier = {"lora": {"enabled": ["big"], "r": 16, "save": "adapter"}}
    assert lora_settings(verifier, "big") == {"enabled": True, "r": 16, "save": "adapter"}
    # a full-parameter architecture's settings do not change with r or save: its checkpoints stay put
    assert lora_settings(verifier, "small") == lora_settings({"lora": {"enabled": ["big"], "r": 8}}, "small")
    assert lora_settings(verifier, "small") == {"enabled": False}
    assert saves_adapter(lora_settings(verifier, "big")) and not saves_adapter(lora_settings(verifier, "small"))
    merged = {"lora": {"enabled": True, "save": "merged"}}
    assert not saves_adapter(lora_settings(merged, "small"))


# ------------------------------------------------------------------ Table 1
def test_table1_has_the_papers_all_population_the_train_and_the_eval_split_with_hand_counted_n():
    import polars as pl

    from debate_audit.eraudit.verifier.table1 import EVAL_SCHEMA, markdown_table, summarise

    # 4 pairs: 0 and 1 eval, 2 train, 3 excluded (a release-split overlap item): `all` has 4, `train` 1, `eval` 2
    splits = {0: "eval", 1: "eval", 2: "train", 3: "excluded"}
    rows = []
    for verifier, probs in [("base", [0.9, 0.4, 0.7, 0.2]), ("org", [0.2, 0.3, 0.6, 0.8])]:
        for pair_id, p in enumerate(probs):
            for question in ("q_m", "q_h"):
                rows.append(
                    {
                        "architecture": "arch",
                        "length": None if verifier == "base" else "w40",
                        "qh_weight": None if verifier == "base" else 2.0,
                        "dataset": "gpqa_h",
                        "verifier": verifier,
                        "training_rows": 0 if verifier == "base" else 2,
                        "pair_id": pair_id,
                        "split": splits[pair_id],
                        "question": question,
                        "p_correct": p,
                        "correct": p > 0.5,
                    }
                )
    table = summarise(pl.DataFrame(rows, schema=EVAL_SCHEMA))
    assert table.select("population", "verifier", "question").rows() == [
        ("all", "base", "q_m"),
        ("all", "base", "q_h"),
        ("all", "org", "q_m"),
        ("all", "org", "q_h"),
        ("train", "base", "q_m"),
        ("train", "base", "q_h"),
        ("train", "org", "q_m"),
        ("train", "org", "q_h"),
        ("eval", "base", "q_m"),
        ("eval", "base", "q_h"),
        ("eval", "org", "q_m"),
        ("eval", "org", "q_h"),
    ]
    cell = {(r["population"], r["verifier"], r["question"]): r for r in table.iter_rows(named=True)}
    # all: base correct on pairs 0 and 2 of 4 -> 2/4; mean of 0.9, 0.4, 0.7, 0.2
    assert (cell["all", "base", "q_m"]["acc"], cell["all", "base", "q_m"]["mtp"], cell["all", "base", "q_m"]["n"]) == (
        pytest.approx(2 / 4),
        pytest.approx(0.55),
        4,
    )
    # all: org correct on pairs 2 and 3 -> 2/4
    assert cell["all", "org", "q_h"]["acc"] == pytest.approx(0.5) and cell["all", "org", "q_h"]["n"] == 4
    # eval: pairs 0 and 1 only
    assert (
        cell["eval", "base", "q_m"]["acc"],
        cell["eval", "base", "q_m"]["mtp"],
        cell["eval", "base", "q_m"]["n"],
    ) == (pytest.approx(0.5), pytest.approx(0.65), 2)
    assert (cell["eval", "org", "q_m"]["acc"], cell["eval", "org", "q_m"]["mtp"]) == (0.0, pytest.approx(0.25))
    # train: pair 2 only
    assert (cell["train", "org", "q_h"]["mtp"], cell["train", "org", "q_h"]["n"]) == (pytest.approx(0.6), 1)
    assert (cell["train", "org", "q_h"]["training_rows"], cell["train", "base", "q_h"]["training_rows"]) == (2, 0)
    with pytest.raises(ValueError, match="one population"):
        markdown_table(table)
    md = markdown_table(table.filter(pl.col("population") == "eval")).splitlines()
    assert md[0] == (
        "| dataset | architecture | length | question | V_base Acc | V_base MTP | V_org Acc | V_org MTP | n |"
    )
    assert md[2] == "| gpqa_h | arch | w40 | q_m | 0.500 | 0.650 | 0.000 | 0.250 | 2 |"
    assert md[3] == "| gpqa_h | arch | w40 | q_h | 0.500 | 0.650 | 0.000 | 0.250 | 2 |"
    assert md[4] == "| gpqa_h | arch | w40 | training rows | 0 |  | 2 |  |  |"
    md_all = markdown_table(table.filter(pl.col("population") == "all")).splitlines()
    assert md_all[2] == "| gpqa_h | arch | w40 | q_m | 0.500 | 0.550 | 0.500 | 0.475 | 4 |"


def test_table1_markdown_shows_both_populations(tmp_path):
    import polars as pl

    from debate_audit.eraudit.verifier.table1 import EVAL_SCHEMA, build_table1

    rows = [
        {
            "architecture": "arch",
            "length": None,
            "qh_weight": None,
            "dataset": "quality_h",
            "verifier": "base",
            "training_rows": 0,
            "pair_id": i,
            "split": "train" if i < 3 else "eval",
            "question": q,
            "p_correct": 0.7,
            "correct": True,
        }
        for i in range(5)
        for q in ("q_m", "q_h")
    ]
    scores = tmp_path / "eval.parquet"
    pl.DataFrame(rows, schema=EVAL_SCHEMA).write_parquet(scores)
    table = build_table1([scores], tmp_path / "t.parquet", tmp_path / "t.md", tmp_path / "t.csv")
    assert dict(table.group_by("population").agg(pl.col("n").max()).iter_rows()) == {"all": 5, "train": 3, "eval": 2}
    text = (tmp_path / "t.md").read_text()
    assert text.index("population `all`") < text.index("population `train`") < text.index("population `eval`")
    assert (
        "| quality_h | arch | q_m | 1.000 | 0.700 | 5 |" in text
        and "| quality_h | arch | q_m | 1.000 | 0.700 | 2 |" in text
    )


def test_a_sliding_window_model_trains_its_losses_in_two_passes_and_refuses_a_packed_one():
    from debate_audit.eraudit.verifier.losses import _packed_terms, unpackable

    model = tiny_gemma3()
    model.set_attn_implementation("sdpa")
    assert unpackable(model) == "it has sliding_attention layers"
    batch = [packable(0, target=(20, 21, 22, 23, 24, 25)), packable(1)]  # rows longer than the 4-token window
    with pytest.raises(ValueError, match="sliding_attention"):
        verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD, pack=True)
    chosen = verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD)  # pack=None: the model decides
    two = verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD, pack=False)
    assert {term: v.item() for term, v in chosen.items()} == {term: v.item() for term, v in two.items()}
    # Why: the packed row's custom mask stands in for the window, so the sliding layer would attend past it
    packed = _packed_terms(model, batch, LABEL_IDS, PAD, "cpu")
    assert packed["lm"].item() != pytest.approx(two["lm"].item(), rel=1e-4)
    # With a window wider than every row the sliding layer sees all it would: then the two agree
    wide = tiny_gemma3(window=64)
    wide.set_attn_implementation("sdpa")
    wide_packed = _packed_terms(wide, batch, LABEL_IDS, PAD, "cpu")
    wide_two = verifier_losses(wide, batch, LABEL_IDS, WEIGHTS, PAD, pack=False)
    for term in ("lm", "fc"):
        assert wide_packed[term].item() == pytest.approx(wide_two[term].item(), rel=1e-5)


def test_two_passes_compute_logits_only_where_a_loss_reads_them():
    """With a 262k-token vocabulary (Gemma 3) a position's logits are 1 MB: the L_lm pass keeps its targets'
    positions and the one before, each readout its answer slot."""
    model = tiny_gemma3()
    kept = []
    model.lm_head.register_forward_hook(lambda module, args, out: kept.append(out.shape[1]))
    target = (20, 21, 22)
    batch = [example(0, True, target=target), example(1, True, target=target)]
    verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD, pack=False)
    lm_width = len(batch[0].lm_ids)
    assert kept == [len(target) + 1, 1, 1]  # L_lm, then the q_m readouts, then the q_h readouts
    assert kept[0] < lm_width
