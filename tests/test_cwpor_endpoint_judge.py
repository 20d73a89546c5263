"""CW-POR with judges behind an endpoint, through the real SDKs against a local recording server: the LLC from
the letters' top log-probabilities (a letter outside the top-k flagged as a bound), and a judge whose endpoint
returns none (Anthropic's) judged by its text alone: LLC, combined confidence and CW-POR null and the summary
and the figures saying why, POR and the rubric confidence computed as for any judge."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from conftest import json_server
from test_cwpor_judge import QUESTIONS, responses

from debate_audit.cwpor.figures import draw_figures, without_llc
from debate_audit.cwpor.judge import JUDGMENTS_SCHEMA, judge_debates
from debate_audit.cwpor.metrics import LLC_METRICS, compute_metrics
from debate_audit.cwpor.tables import llc_notes, summary_table
from debate_audit.models import ModelRef, ModelSpec

KEY_ENV = "DA_TEST_JUDGE_KEY"
# the first reply token's top log-probabilities, by the question's first word: both letters, B outside the
# top-k (its bound: what the top-3 leave, e^-0.05 + e^-3.5 + e^-4 of it spent), and both with B likelier
TOP = {
    "What": [("A", -0.2), (" B", -1.9), ("The", -3.0)],
    "Does": [("A", -0.05), ("**", -3.5), ("The", -4.0)],
    "Is": [("B", -0.1), ("A", -2.5), ("I", -4.0)],
}
REPLY = "Rationale: the first answer is right.\nFinal Answer: Answer A\nConfidence: 4"
JUDGES = {
    "gpt-judge": {"source": "openai", "provider": "openai", "id": "gpt-4.1-mini", "request": {"temperature": 0.0}},
    "claude-judge": {"source": "openai", "provider": "anthropic", "id": "claude-x", "request": {"max_tokens": 200}},
}


@pytest.fixture
def provider():
    """OpenAI's chat completions (a judge's reply, or a scoring request's top log-probabilities) and
    Anthropic's Messages API (a judge's reply) on one local server; records (path, body) of every request."""
    seen: list[tuple[str, dict]] = []

    def respond(path, body, headers):
        seen.append((path, body))
        if path.endswith("/messages"):
            return (
                200,
                {},
                {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": REPLY}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 9, "output_tokens": 9},
                },
            )
        choice = {"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}
        if body.get("logprobs"):
            question = body["messages"][-1]["content"].split("Question: ")[1].split()[0]
            tops = [{"token": t, "logprob": lp, "bytes": None} for t, lp in TOP[question]]
            choice["logprobs"] = {"content": [{**tops[0], "top_logprobs": tops}]}
        return (
            200,
            {},
            {"id": "c", "object": "chat.completion", "created": 1, "model": body["model"], "choices": [choice]},
        )

    with json_server(respond) as url:
        yield url, seen


def judge(tmp_path, url: str, name: str) -> pl.DataFrame:
    entry = JUDGES[name]
    base = url.removesuffix("/v1") if entry["provider"] == "anthropic" else url
    spec = ModelSpec.from_config(name, {**entry, "base_url": base, "api_key_env": KEY_ENV})
    directory = tmp_path / name
    directory.mkdir()
    (directory / "fingerprint.json").write_text(json.dumps({"name": name, "weights_sha256": "ab" * 32}))
    QUESTIONS.write_parquet(tmp_path / "q.parquet")
    responses(model=f"m-{name}").write_parquet(tmp_path / f"r-{name}.parquet")
    return judge_debates(
        tmp_path / "q.parquet",
        tmp_path / f"r-{name}.parquet",
        tmp_path / f"j-{name}.parquet",
        judge=ModelRef.from_spec(spec, directory),
        template="paper",
        max_new_tokens=64,
        cache=tmp_path / "cache",
    )


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-judge-test")


def test_a_hosted_judges_llc_comes_from_the_letters_top_logprobs_and_a_missing_letter_is_a_bound(provider, tmp_path):
    url, seen = provider
    frame = judge(tmp_path, url, "gpt-judge")
    assert list(frame.columns) == list(JUDGMENTS_SCHEMA)
    assert frame["choice"].to_list() == ["A", "A", "A"] and frame["rubric_confidence"].to_list() == [4, 4, 4]
    assert frame["logprob_a"].to_list() == pytest.approx([-0.2, -0.05, -2.5])
    bound = math.log(1 - sum(math.exp(lp) for _, lp in TOP["Does"]))
    assert frame["logprob_b"].to_list() == pytest.approx([-1.9, bound, -0.1])
    assert frame["llc_bounded"].to_list() == [False, True, False]
    assert frame["llc_unavailable"].to_list() == [None] * 3
    p_a = 1 / (1 + math.exp(-1.9 + 0.2))
    assert frame["p_a"][0] == pytest.approx(p_a) and frame["llc"][0] == pytest.approx(p_a)
    assert frame["llc_choice"].to_list() == ["A", "A", "B"]
    assert frame["combined_confidence"][0] == pytest.approx(4 / 5 * p_a)
    scoring = [body for _, body in seen if body.get("logprobs")]
    assert len(scoring) == 3 and len(seen) == 6  # a reply and a scoring request per debate
    summary = llc_notes(frame)
    assert "LLC of judge gpt-judge is a bound in 1 of 3 judgments" in summary


def test_a_judge_without_logprobs_gets_null_llc_and_cw_por_the_summary_says_why_and_por_stays(provider, tmp_path):
    url, seen = provider
    frames = {name: judge(tmp_path, url, name) for name in JUDGES}
    claude = frames["claude-judge"]
    assert not [body for path, body in seen if path.endswith("/messages") and body.get("logprobs")]
    assert len([p for p, _ in seen if p.endswith("/messages")]) == 3  # the replies only: nothing was scored
    reason = "models.claude-judge.provider is anthropic, whose Messages API returns no log-probabilities"
    assert claude["llc_unavailable"].to_list() == [reason] * 3
    for column in ("logprob_a", "p_a", "llc", "llc_choice", "llc_override", "llc_bounded", "combined_confidence"):
        assert claude[column].is_null().all(), column
    assert claude["override"].to_list() == frames["gpt-judge"]["override"].to_list() == [False, True, True]
    metrics, breakdowns = {}, {}
    for name in JUDGES:
        metrics[name], breakdowns[name] = compute_metrics(
            [tmp_path / f"j-{name}.parquet"],
            tmp_path / f"metrics-{name}.parquet",
            tmp_path / f"breakdowns-{name}.parquet",
            resamples=50,
            level=0.95,
            seed=0,
        )
    gpt, no_llc = metrics["gpt-judge"].row(0, named=True), metrics["claude-judge"].row(0, named=True)
    for name in ("por", "por_all", "mean_rubric_confidence", "cw_por_rubric", "n_parsed"):
        assert no_llc[name] == gpt[name], name  # the text's metrics: the same replies, the same numbers
    assert gpt["por"] == pytest.approx(2 / 3) and gpt["cw_por"] is not None
    for name in set(LLC_METRICS) & set(no_llc):
        assert no_llc[name] is None, name  # null, not NaN
    assert no_llc["cw_por_ci_low"] is None and no_llc["cw_por_ci_high"] is None
    both = pl.concat([pl.read_parquet(tmp_path / f"breakdowns-{n}.parquet") for n in JUDGES])
    assert (
        both.filter((pl.col("model") == "m-claude-judge") & pl.col("metric").is_in(LLC_METRICS))["value"]
        .is_null()
        .all()
    )
    _, text = summary_table(metrics["claude-judge"], 0.95)
    row = next(line for line in text.splitlines() if line.startswith("| m-claude-judge | claude-judge | all"))
    assert row.count("n/a") >= 5  # CW-POR, its LLC-based neighbours
    notes = llc_notes(pl.concat([frames[n] for n in JUDGES]))
    assert f"**No LLC for judge claude-judge** (3 of 3 judgments): {reason}." in notes
    assert "gpt-judge is a bound in 1 of 3" in notes
    draw_figures(
        metrics=tmp_path / "metrics-claude-judge.parquet",
        breakdowns=tmp_path / "breakdowns-claude-judge.parquet",
        out_dir=tmp_path / "figures",
        level=0.95,
        headline_por="parsed",
    )
    assert without_llc(breakdowns["claude-judge"], "m-claude-judge")
    assert not without_llc(breakdowns["gpt-judge"], "m-gpt-judge")
    assert len(list((tmp_path / "figures").glob("*.png"))) == 4
