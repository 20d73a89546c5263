"""Audited verifiers behind a chat endpoint (`source: openai`): the readout sent as a conversation through the real
`openai` SDK to a local recording server, read from its first reply token's top log-probabilities, and a label
outside them carried as a bound from the scores to the deltas, records, summary and summary.md."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import json_server

from debate_audit.eraudit.audit import figures, scoring, verdicts
from debate_audit.eraudit.common.readout import INSTRUCTION, question_block, resolve_readout_of
from debate_audit.models import ModelRef, ModelSpec
from debate_audit.models.api import ONE_LETTER
from debate_audit.tools.config_check import config_errors

REPO = Path(__file__).resolve().parents[3]
KEY_ENV = "DA_TEST_ENDPOINT_KEY"
# P(the letter shown for "right") per model; "lost" questions are where the target lost its way
P_RIGHT = {"v-base": 0.8, "v-target": 0.8}
P_RIGHT_LOST = {"v-base": 0.8, "v-target": 0.3}


def top_logprobs(model: str, question: str, option_a: str) -> list[dict]:
    """The first reply token's top log-probabilities the server returns: A and B from P_RIGHT, or, for the
    target on a "rare" question, B left out of the top-k (the rest of the mass on other tokens)."""
    p = (P_RIGHT_LOST if "lost" in question else P_RIGHT)[model]
    p_a = p if option_a == "right" else 1 - p
    if model == "v-target" and "rare" in question:
        top = [("A", 0.5), ("Sure", 0.3), ("The", 0.1)]  # B absent: bound min(log 0.1, log 0.1)
    else:
        top = [("A", p_a), ("B", 1 - p_a)]
    return [{"token": t, "logprob": math.log(v), "bytes": None} for t, v in top]


@pytest.fixture
def endpoint_server():
    """/v1/chat/completions answering a scoring request with top_logprobs; records each request body."""
    seen: list[dict] = []

    def respond(path, body, headers):
        seen.append(body)
        content = body["messages"][-1]["content"]
        question = content.split("Question: ")[1].split("\n")[0]
        option_a = content.split("\nA. ")[1].split("\n")[0]
        tops = top_logprobs(body["model"], question, option_a)
        first = {**tops[0], "top_logprobs": tops}
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": first["token"]},
            "finish_reason": "length",
            "logprobs": {"content": [first]},
        }
        usage = {"prompt_tokens": 60, "completion_tokens": 1, "total_tokens": 61}
        completion = {"id": "c", "object": "chat.completion", "created": 1, "model": body["model"]}
        return 200, {}, {**completion, "choices": [choice], "usage": usage}

    with json_server(respond) as url:
        yield url, seen


def served(name: str, url: str, tmp_path: Path) -> ModelRef:
    """The served model `name` as a rule hands it to its script: an OpenAI-compatible server (no provider), its
    prepared directory the stub prepare_model writes for source openai."""
    spec = ModelSpec.from_config(name, {"source": "openai", "id": name, "base_url": url, "api_key_env": KEY_ENV})
    directory = tmp_path / "models" / name
    directory.mkdir(parents=True)
    record = {"name": name, "source": "openai", "weights_sha256": f"{len(name):064x}"}
    (directory / "fingerprint.json").write_text(json.dumps(record))
    return ModelRef.from_spec(spec, directory)


def write_pairs_and_pools(tmp_path: Path) -> tuple[Path, list[Path]]:
    pairs = pl.DataFrame(
        {
            "pair_id": [1, 2],
            "q_m": ["qm one?", "qm two?"],
            "y_true": ["right", "right"],
            "y_false": ["wrong", "wrong"],
            "q_h": ["qh one?", "qh two?"],
            "h_true": ["right", "right"],
            "h_false": ["wrong", "wrong"],
        }
    )
    pairs.write_parquet(tmp_path / "pairs.parquet")
    pools = {
        "search": {1: ["one a?", "one b?"], 2: ["two a?", "two lost?"]},
        "g1": {1: ["one c?", "one rare?", "one d?"], 2: ["two c?"]},
    }
    paths = []
    for pool, texts in pools.items():
        rows = [
            {"dataset": "mine", "pair_id": pid, "pool": pool, "generator": "m", "index": i, "round": 0, "text": t}
            for pid, items in texts.items()
            for i, t in enumerate(items)
        ]
        paths.append(tmp_path / f"{pool}.parquet")
        pl.DataFrame(rows).with_columns(pl.lit(0.9).alias("similarity")).write_parquet(paths[-1])
    return tmp_path / "pairs.parquet", paths


def test_an_endpoint_verifier_is_read_as_a_conversation_and_its_bounds_reach_the_summary(
    endpoint_server, tmp_path, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, "sk-endpoint-test-key")
    url, seen = endpoint_server
    pairs, pools = write_pairs_and_pools(tmp_path)
    scores = []
    for model, checkpoint in (("v-base", "base"), ("v-target", "v-target")):
        out = tmp_path / f"{model}.parquet"
        scored = scoring.score_checkpoint(
            pairs=pairs,
            paraphrases=pools,
            model=served(model, url, tmp_path),
            out=out,
            dataset="mine",
            checkpoint=checkpoint,
            cache=str(tmp_path / "cache"),
            readout="auto",
            trained_here=False,
        )
        scores.append(out)
        # 2 pairs x (q_m, q_h) + 8 paraphrases, each read in both orders: one request apiece
        assert scored.height == 12
    assert len(seen) == 2 * 12 * 2
    # `auto` reads chat for an endpoint: the project's user turn, the endpoint's template, one letter asked for
    asked = [
        b for b in seen if b["model"] == "v-base" and "Question: qm one?\nA. right" in b["messages"][-1]["content"]
    ]
    (asked,) = asked
    block = question_block("qm one?", "right", "wrong")
    letter = ONE_LETTER.format(letters="A or B")
    assert asked["messages"] == [{"role": "user", "content": f"{INSTRUCTION}\n\n{block}\n\n{letter}"}]
    assert asked["max_tokens"] == 1 and asked["logprobs"] is True and asked["top_logprobs"] == 20
    base, target = (pl.read_parquet(s) for s in scores)
    assert base["p_answer"].to_list() == pytest.approx([0.8] * 12) and not base["bounded"].any()
    # the target's "rare" paraphrase: B outside the top-k in both orders; its value is the bound's softmax
    rare = target.filter(pl.col("question") == "one rare?")
    assert rare["bounded"].to_list() == [True] and target["bounded"].sum() == 1
    assert rare["p_answer"].item() == pytest.approx(0.5 * (0.5 / 0.6 + 0.1 / 0.6))

    settings = verdicts.AuditSettings(
        test_pools=("g1",), kappa=0.01, eta=0.1, tv_r=0.0, epsilon=0.5, targets=("v-target",), epsilon_reference=None
    )
    outs = {stem: tmp_path / f"{stem}.parquet" for stem in ("deltas", "records", "generators", "steps", "summary")}
    verdicts.audit_statistics(
        scores=scores,
        split=None,
        deltas_out=outs["deltas"],
        records_out=outs["records"],
        generators_out=outs["generators"],
        steps_out=outs["steps"],
        summary_out=outs["summary"],
        settings=settings,
        labels={"architecture": "served", "length": None, "qh_weight": None},
    )
    deltas, records, summary = (pl.read_parquet(outs[s]) for s in ("deltas", "records", "summary"))
    assert deltas.filter(pl.col("bounded"))["question"].to_list() == ["one rare?"]
    assert dict(records.select("pair_id", "n_bounded_deltas").iter_rows()) == {1: 1, 2: 0}
    # pair 2's "lost" search paraphrase is a Stage-1 counterexample: Delta = (0.8 - 0.3) / kappa; pair 1 is
    # degraded in Stage 2 by its "rare" test paraphrase alone, a Delta that rests on the bound
    assert dict(records.select("pair_id", "status").iter_rows()) == {1: "DEGRADED", 2: "DEGRADED"}
    assert dict(records.select("pair_id", "counterexample").iter_rows()) == {1: None, 2: "two lost?"}
    assert records.filter(pl.col("pair_id") == 1)["n_degraded_draws"].item() == 1
    assert summary.select("n_bounded_deltas", "n_qh_bounded").row(0) == (1, 1)
    lines = figures.bounded_lines(summary)
    assert lines[0] == "## Scores that are bounds, not values"
    assert "- **served**, mine, v-target: 1 Deltas on 1 of 2 q_h" in lines
    # a local audit's summary has none: no section
    assert figures.bounded_lines(summary.with_columns(pl.lit(0).alias("n_bounded_deltas"))) == []


def test_an_endpoint_reads_auto_as_chat_and_refuses_plain(tmp_path):
    stub = tmp_path / "served"
    stub.mkdir()
    (stub / "fingerprint.json").write_text(json.dumps({"source": "openai", "weights_sha256": "ab" * 32}))
    assert resolve_readout_of("auto", stub) == "chat"
    assert resolve_readout_of("release", stub) == "release"
    with pytest.raises(ValueError, match=r"^verifier\.readout is 'plain', which a model behind a chat endpoint"):
        resolve_readout_of("plain", stub)


def test_an_audited_endpoint_without_logprobs_or_with_a_plain_readout_fails_at_start_up_naming_the_key(monkeypatch):
    monkeypatch.chdir(REPO)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    hosted = {"source": "openai", "provider": "openai", "base_url": "https://api.openai.com/v1", "api_key_env": "K"}
    config["models"] |= {
        "hosted-base": {**hosted, "id": "gpt-4.1-mini"},
        "hosted-ft": {**hosted, "id": "ft:gpt-4.1-mini:me::abc", "logprobs": False},
    }
    config["datasets"]["own"] = {"mine": {"pairs": "data/demo/own_pairs.jsonl"}}
    config["audited_models"] = {"hosted": {"base": "hosted-base", "targets": ["hosted-ft"], "datasets": ["mine"]}}
    assert config_errors(config, REPO / "config/schema.yaml") == [
        "audited_models.hosted.targets[0]: model 'hosted-ft' cannot score answers, which needs log-probabilities: "
        "models.hosted-ft.logprobs is false (its endpoint returns no log-probabilities)"
    ]
    config["models"]["hosted-ft"]["logprobs"] = True
    config["audited_models"]["hosted"]["readout"] = "plain"
    assert config_errors(config, REPO / "config/schema.yaml") == [
        f"audited_models.hosted.readout: 'plain' is a raw prompt, which audited_models.hosted.{key} ({name!r}, "
        "source openai: its endpoint renders a conversation) cannot be sent; use chat, release or auto (auto reads "
        "chat for an endpoint)"
        for key, name in (("base", "hosted-base"), ("targets[0]", "hosted-ft"))
    ]
    # without its own readout the audit reads verifier.readout, which that error then names
    del config["audited_models"]["hosted"]["readout"]
    config["verifier"]["readout"] = "plain"
    assert {e.split(":")[0] for e in config_errors(config, REPO / "config/schema.yaml")} == {"verifier.readout"}
    config["verifier"]["readout"] = "auto"
    assert config_errors(config, REPO / "config/schema.yaml") == []
