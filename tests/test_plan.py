"""The cost plan: call counts follow from the config exactly; GPU time scales with model size."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from debate_audit.models.calls import RulePlan
from debate_audit.models.size import params_b, params_from_config, prepared_params
from debate_audit.models.spec import ModelSpec
from debate_audit.runtime.cluster import ClusterSettings
from debate_audit.tools.plan import build_plan, load_config
from debate_audit.tools.plan_counts import model_calls
from debate_audit.tools.plan_hours import gpu_hours
from debate_audit.tools.plan_memory import training_memory
from debate_audit.tools.plan_report import Plan, plan_json, render, render_job_sizes, runtime_warnings

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def config(monkeypatch):
    monkeypatch.chdir(REPO)
    return load_config(["config/config.yaml", "config/paper.yaml"])


def stats(n_questions: int = 10) -> dict:
    return {
        "truthfulqa": {"n": n_questions, "question_words": 10.0, "answer_words": 8.0},
        "quality_h": {"n": 20, "question_words": 12.0, "context_words": 1000.0},
        "gpqa_h": {"n": 10, "question_words": 30.0, "context_words": 200.0},
    }


def test_cwpor_generations_are_two_per_question_verbosity_and_model(config):
    config["cwpor"]["subset"] = None
    plans = model_calls(config, stats(10))
    debate = [p for p in plans if p.rule == "cwpor_debate"]
    assert {p.model for p in debate} == set(config["cwpor"]["models"])
    n_v = len(config["cwpor"]["verbosity"])
    assert sum(p.generations for p in debate) == pytest.approx(2 * 10 * n_v * len(config["cwpor"]["models"]))
    judge = [p for p in plans if p.rule == "cwpor_judge"]
    assert sum(p.scorings for p in judge) == pytest.approx(10 * n_v * len(config["cwpor"]["models"]))


def test_subset_caps_the_questions(config):
    config["cwpor"]["subset"] = 3
    debate = [p for p in model_calls(config, stats(10)) if p.rule == "cwpor_debate"]
    assert sum(p.generations for p in debate) == pytest.approx(2 * 3 * len(config["cwpor"]["verbosity"]) * 5)


@pytest.mark.parametrize(("filter_", "redrawn"), [("report", 1.0), ("drop", 1.25)])
def test_paraphrase_test_generations_follow_pool_size_per_generator(config, filter_, redrawn):
    # filter report (the release's) redraws only empty replies; filter drop ~20% of the draws
    config["paraphrase"]["max_pairs"] = 4
    config["paraphrase"]["filter"] = filter_
    tests = [p for p in model_calls(config, stats()) if p.rule == "paraphrase_test"]
    per_dataset_and_generator = 4 * config["paraphrase"]["test"]["size"] * redrawn
    n = len(config["verifier"]["datasets"]) * len(config["paraphrase"]["test"]["generators"])
    assert sum(p.generations for p in tests) == pytest.approx(n * per_dataset_and_generator)


def test_the_release_ablations_plan_only_their_cells(config):
    config["debate"]["max_items"] = None
    update_config(config, yaml.safe_load((REPO / "config" / "ablations.yaml").read_text()))
    evaluate = [p for p in model_calls(config, stats()) if p.rule == "verifier_evaluate"]
    # checkpoints per architecture (base + trained) x items x q_m / q_h x both orders: Llama-8B and Qwen-9B
    # 1 + 3 on each dataset; GPT-20B 1 + 3 + 4 more V_org, and on QuALITY-H (20 items) V_honest at 50 / 250
    quality, gpqa = (4 + 4 + 10) * 20 * 4, (4 + 4 + 8) * 10 * 4
    assert sum(p.scorings for p in evaluate) == pytest.approx(quality + gpqa)


def test_gpu_time_doubles_with_parameters_and_tokens():
    work = RulePlan("x", model="m", prompt_tokens=1e6, new_tokens=1e5)
    small, _ = gpu_hours(work, 4.0)
    big, _ = gpu_hours(work, 8.0)
    assert big == pytest.approx(2 * small)
    double = RulePlan("x", model="m", prompt_tokens=2e6, new_tokens=2e5)
    assert gpu_hours(double, 4.0)[0] == pytest.approx(2 * small)
    assert gpu_hours(work, None) == (0.0, 0.0)


def test_model_size_from_table_name_and_config():
    assert params_b(ModelSpec.from_config("q", {"source": "hf", "id": "Qwen/Qwen2.5-14B-Instruct"})) == 14.77
    assert params_b(ModelSpec.from_config("x", {"source": "hf", "id": "org/Some-Model-7B"})) == 7.0
    assert params_b(ModelSpec.from_config("x", {"source": "hf", "id": "org/tiny-360M-chat"})) == pytest.approx(0.36)
    assert params_b(ModelSpec.from_config("x", {"source": "hf", "id": "org/no-size"})) is None
    llama_8b = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
    }
    assert params_from_config(llama_8b) == pytest.approx(8.03, rel=0.01)


def test_plan_of_the_paper_overlay_counts_every_dry_run_job(config):
    jobs = {"cwpor_debate": 50, "cwpor_judge": 50, "prepare_truthfulqa": 1}
    plan = build_plan(config, jobs, None)
    assert {p.rule for p in plan.rules} >= set(jobs)
    assert all(p.jobs == jobs[p.rule] for p in plan.rules if p.rule in jobs)
    assert sum(p.gpu_hours_h200 for p in plan.rules) > 0
    assert all(p.gpu_hours_h100 >= p.gpu_hours_h200 for p in plan.rules)


def test_plan_uses_real_dataset_sizes_when_shared_data_is_there(config, shared_data):
    plan = build_plan(config, {}, shared_data)
    assert any("817 questions" in note for note in plan.notes)
    assert any("222 pairs" in note for note in plan.notes)


def test_a_quantized_checkpoint_counts_parameters_not_packed_bytes(tmp_path):
    import json

    import torch
    from safetensors.torch import save_file

    config = {
        "model_type": "llama",
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "intermediate_size": 16,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "vocab_size": 32,
        "tie_word_embeddings": True,
    }
    # 2 x 8 x 16 expert weights stored as MXFP4 would: 2 values per byte plus a scale per 32 values.
    save_file(
        {
            "embed": torch.zeros(32, 8),
            "experts_blocks": torch.zeros(2, 8, 8, dtype=torch.uint8),
            "experts_scales": torch.zeros(2, 8, dtype=torch.uint8),
        },
        tmp_path / "model.safetensors",
    )
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert prepared_params(tmp_path) == 32 * 8 + 2 * 8 * 8 + 2 * 8  # the headers, as stored
    (tmp_path / "config.json").write_text(json.dumps({**config, "quantization_config": {"quant_method": "mxfp4"}}))
    assert prepared_params(tmp_path) == pytest.approx(params_from_config(config) * 1e9)


def test_plan_prints_each_architectures_fine_tuning_memory_term_by_term(config):
    from debate_audit.models.memory import TrainingSetup, training_memory_bytes
    from debate_audit.models.size import KNOWN_CONFIGS

    text = render(build_plan(config, {"verifier_finetune": 18}, None))
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in text.splitlines() if line.startswith("| ")
    }
    assert rows["GiB per GPU"] == ["gpt-oss-20b", "qwen3.5-9b", "llama-3.1-8b-instruct |"]
    # the paper overlay: all three in full over 4 GPUs, GPT-20B's shards on the host
    assert rows["training"][0] == "full-parameter, FSDP2 over 4 GPUs, shards on the host"
    assert rows["training"][2].startswith("full-parameter, FSDP2 over 4 GPUs |")
    setup = TrainingSetup.of({**config["verifier"], "processes": 4, "lora": False})
    llama = training_memory_bytes(KNOWN_CONFIGS["meta-llama/Llama-3.1-8B-Instruct"], setup)
    shards = next(v for k, v in rows.items() if k.startswith("fp32 shards"))
    assert shards == ["0.0", f"{33.36:.1f}", f"{llama.shards / 2**30:.1f} |"]
    peak = rows["**peak** (at)"]
    assert peak[2] == f"**{llama.total / 2**30:.1f}** (a layer's backward) |"
    assert rows["fits an H100 80 GB"] == ["yes", "yes", "yes |"]
    assert rows["host GiB per process: offloaded shards"][0] == f"{16 * 20.914757184e9 / 4 / 2**30:.0f}"
    # saved: full checkpoints in the bf16 they are evaluated in (8.03e9 x 2 B = 15 GiB)
    assert rows["disk GiB per checkpoint"] == ["39", "17", "15 |"]
    # 18 jobs over 3 architectures: 6 checkpoints each of GPT-20B (39), Qwen-9B (16.7) and Llama-8B (15 GiB)
    assert "18 verifier_finetune jobs, about 423 GiB on disk" in text
    # alone on one GPU, Llama-8B does not fit an H100; GPT-20B as LoRA keeps its bf16 base
    config["verifier"]["distributed"] = {"processes": 1, "cpu_offload": False}
    config["verifier"]["lora"]["enabled"] = ["gpt-oss-20b"]
    text = render(build_plan(config, {"verifier_finetune": 18}, None))
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in text.splitlines() if line.startswith("| ")
    }
    assert rows["training"][0] == "LoRA on a bf16 base, 1 GPU"
    assert rows["fits an H100 80 GB"] == ["yes", "**no**", "**no** |"]
    assert rows["disk GiB per checkpoint"][0] == "<0.1 (adapter)"


def test_generations_by_vllm_count_at_its_published_throughput_and_the_plan_names_the_source(config):
    from debate_audit.tools.plan_hours import VLLM_THROUGHPUT

    rp = RulePlan("cwpor_debate", model="m", generations=10, new_tokens=1e6)
    in_process = gpu_hours(rp, 8.03)[0]
    rp.engine = "vllm"
    assert gpu_hours(rp, 8.03)[0] == pytest.approx(1e6 / VLLM_THROUGHPUT["generated_tokens_per_s"] / 3600)
    assert gpu_hours(rp, 8.03)[0] < in_process
    plan = build_plan(config, {"cwpor_debate": 50, "cwpor_judge": 50, "verifier_evaluate": 3}, None)
    engines = {(p.rule, p.engine) for p in plan.rules if p.rule in ("cwpor_debate", "cwpor_judge", "verifier_evaluate")}
    # the paper overlay generates through vLLM; scoring-only rules generate nothing
    assert engines == {("cwpor_debate", "vllm"), ("cwpor_judge", "vllm"), ("verifier_evaluate", "in-process")}
    assert VLLM_THROUGHPUT["source"] in render(plan)


def test_the_json_plan_gives_each_model_job_its_gpus_and_memory_per_gpu(config):
    import json

    from debate_audit.tools.plan_report import plan_json

    plan = json.loads(
        plan_json(build_plan(config, {"verifier_finetune": 18, "debate_generate": 4, "verifier_evaluate": 3}, None))
    )
    rows = {(r["rule"], r["model"]): r for r in plan["rules"]}
    # the job's own memory check and this figure are one function (models/memory.py, training_memory_bytes)
    from debate_audit.models.memory import TrainingSetup, training_memory_bytes
    from debate_audit.models.size import KNOWN_CONFIGS

    llama = rows[("verifier_finetune", "llama-3.1-8b-instruct")]
    setup = TrainingSetup.of({**config["verifier"], "processes": 4, "lora": False})
    planned = training_memory_bytes(KNOWN_CONFIGS["meta-llama/Llama-3.1-8B-Instruct"], setup)
    assert llama["gpus"] == 4 and llama["gpu_gib"] == pytest.approx(planned.total / 2**30)
    assert rows[("verifier_finetune", "gpt-oss-20b")]["gpus"] == 4  # full-parameter, as the paper
    # the debater's vLLM engine over its tensor_parallel_size: Gemma-4-31B's bf16 weights over 4 GPUs
    gemma = next(r for (rule, model), r in rows.items() if rule == "debate_generate")
    assert gemma["gpus"] == config["models"][gemma["model"]]["vllm"]["tensor_parallel_size"] == 4
    # 31.27B (size.KNOWN_PARAMS_B: its language model and vision tower, as loaded), 2 bytes each
    assert gemma["gpu_gib"] == pytest.approx(31.27e9 * 2 / 4 / 2**30)
    assert all(r["gpus"] == 1 for (rule, _), r in rows.items() if rule == "verifier_evaluate")
    assert {t["architecture"]: t["processes"] for t in plan["training"]}["qwen3.5-9b"] == 4


def test_gcg_jobs_cost_their_gradients_and_exact_scores_on_one_gpu(config):
    """debate_gcg (the paper overlay's release setting): per adversarial candidate 2 tasks (seeded order) x
    (2 + 8 steps x 64 proposals) exact scorings and 8 gradient passes per task; the default plans none."""
    import json

    from debate_audit.tools.plan_report import plan_json

    sizes = stats()
    gcg, db = [rp for rp in model_calls(config, sizes) if rp.rule == "debate_gcg"], config["debate"]
    assert len(gcg) == 2 and {rp.model for rp in gcg} == {db["selector"]}  # one row per dataset
    train = sum(sizes[d]["n"] * (1 - db["eval_fraction"]) for d in config["verifier"]["datasets"])
    candidates = train * db["candidates"]
    assert sum(rp.scorings for rp in gcg) == pytest.approx(candidates * 2 * (2 + 8 * 64))
    assert all(0 < rp.train_tokens < rp.prompt_tokens for rp in gcg)
    row = next(
        r
        for r in json.loads(plan_json(build_plan(config, {"debate_gcg": 2}, None)))["rules"]
        if r["rule"] == "debate_gcg"
    )
    assert (row["jobs"], row["gpus"]) == (2, 1) and row["gpu_hours_h100"] > 0
    default = load_config(["config/config.yaml"])
    assert not any(rp.rule == "debate_gcg" for rp in model_calls(default, sizes))


def test_qwen3_5_is_priced_at_the_torch_fallback_where_the_cluster_has_no_kernels(config):
    """cluster.linear_attention_kernels false: a Qwen3.5 model's in-process hours (scoring, fine-tuning) at
    LINEAR_ATTENTION_FALLBACK's factor, its load as it was, every other model's unchanged; the plan says which
    it assumed, and the jobs' time limits follow (plan_hours.job_hours)."""
    from debate_audit.tools.plan_hours import LINEAR_ATTENTION_FALLBACK, job_hours

    jobs = {"verifier_finetune": 18, "verifier_evaluate": 3, "audit_scores": 3}
    kernels = build_plan(config, jobs, None)
    no_kernels_config = {**config, "cluster": {**config.get("cluster", {}), "linear_attention_kernels": False}}
    fallback = build_plan(no_kernels_config, jobs, None)
    factor = LINEAR_ATTENTION_FALLBACK["factor"]
    assert kernels.linear_attention == {"qwen3.5-9b": 1.0} and fallback.linear_attention == {"qwen3.5-9b": factor}
    pairs = list(zip(kernels.rules, fallback.rules))
    assert {a.model for a, b in pairs if a.gpu_hours_h100 != b.gpu_hours_h100} == {"qwen3.5-9b"}
    for a, b in pairs:
        if a.model == "qwen3.5-9b" and a.rule in jobs:
            assert b.gpu_hours_h100 > a.gpu_hours_h100
            assert b.gpu_hours_h200 < factor * a.gpu_hours_h200  # the weights load no slower
    assert "priced with the `gpu` extra's kernels" in render(kernels)
    assert "priced with transformers' torch fallback, x2 their in-process hours" in render(fallback)
    assert json.loads(plan_json(fallback))["linear_attention"]["priced_as"] == "torch fallback"
    # one job: its compute at the factor, so its time limit grows with it
    spec = ModelSpec.from_config("qwen3.5-9b", config["models"]["qwen3.5-9b"])
    scoring = RulePlan("verifier_evaluate", model="qwen3.5-9b", scorings=1000, prompt_tokens=2e7)
    compute, load = job_hours(config, spec, scoring)
    assert job_hours(no_kernels_config, spec, scoring) == (pytest.approx(factor * compute), load)
    llama = ModelSpec.from_config("llama-3.1-8b-instruct", config["models"]["llama-3.1-8b-instruct"])
    assert job_hours(no_kernels_config, llama, scoring) == job_hours(config, llama, scoring)
    # a vLLM engine's generations bring their own kernels: priced as they were
    generated = RulePlan("x", model="qwen3.5-9b", generations=10, prompt_tokens=1e4, new_tokens=1e6, engine="vllm")
    assert gpu_hours(generated, 8.95, factor) == gpu_hours(generated, 8.95)


def test_plan_names_the_longest_job_and_warns_of_one_over_the_time_cap():
    rules = [
        RulePlan("debate_gcg", jobs=2, model="gpt-oss-20b", runtime_min=2880, runtime_wanted_min=3803),
        RulePlan("cwpor_debate", jobs=5, model="phi-4", runtime_min=74, runtime_wanted_min=74),
    ]
    plan = Plan(rules=rules, cluster=ClusterSettings(max_runtime=2880))
    text = render_job_sizes(plan, rules)
    assert "Longest job: debate_gcg (gpt-oss-20b), 3803 min on its first attempt" in text
    (warning,) = runtime_warnings(plan)
    assert warning.startswith("WARNING: debate_gcg: estimate 3803 min over cluster.runtime.max_minutes 2880: ")
    assert "debate.gcg.parts" in warning and warning in text
    # at the cap is within it; without a cap nothing is killed
    rules[0].runtime_wanted_min = 2880
    assert runtime_warnings(plan) == []
    rules[0].runtime_wanted_min = 3803
    assert runtime_warnings(Plan(rules=rules, cluster=ClusterSettings(max_runtime=None))) == []


def test_the_paper_plan_splits_gcg_into_ranges_that_fit_48_hours_and_warns_where_fixed_too_few(config):
    """The paper's GCG over one dataset's training candidates wants more than the default cap (48 h): split into
    ranges (debate.gcg.parts null) every job fits; held to one range per dataset it is capped, and warned of."""
    from debate_audit.tools.job_sizes import JobTimes, job_parts

    settings = ClusterSettings.from_config(config)
    times = JobTimes.from_config(config)
    cells = times.cells("debate_gcg")
    whole = {c["dataset"]: times.hours("debate_gcg", c) for c in cells}
    parts = {c["dataset"]: job_parts(config, settings, "debate_gcg", c) for c in cells}
    assert max(whole.values()) * 60 * settings.runtime_margin > 2880  # one job would not fit
    assert max(parts.values()) > 1
    for cell in cells:
        part = times.hours("debate_gcg", cell, parts[cell["dataset"]])
        assert part * 60 * settings.runtime_margin <= 2880  # each range does
        if parts[cell["dataset"]] > 1:  # and no fewer ranges would
            fewer = times.hours("debate_gcg", cell, parts[cell["dataset"]] - 1)
            assert fewer * 60 * settings.runtime_margin > 2880
    plan = build_plan(config, {"debate_gcg": sum(parts.values())}, None)
    (gcg,) = [rp for rp in plan.rules if rp.rule == "debate_gcg"]
    assert gcg.runtime_wanted_min == gcg.runtime_min <= 2880
    assert runtime_warnings(plan) == []

    fixed = {**config, "debate": {**config["debate"], "gcg": {**config["debate"]["gcg"], "parts": 1}}}
    plan = build_plan(fixed, {"debate_gcg": 2}, None)
    (gcg,) = [rp for rp in plan.rules if rp.rule == "debate_gcg"]
    assert gcg.runtime_wanted_min > 2880 == gcg.runtime_min
    assert [w.split(":")[1].strip() for w in runtime_warnings(plan)] == ["debate_gcg"]
    assert f"estimate {gcg.runtime_wanted_min} min over cluster.runtime.max_minutes 2880" in render(plan)


def test_the_fine_tuning_memory_the_paper_overlay_and_the_cluster_page_quote_is_what_make_plan_prints(config):
    """config/paper.yaml and docs/cluster.md quote the paper's per-GPU peaks "as make plan prints at <commit>":
    a change to the memory model that moves them fails here until the figures (and the commit) are updated."""
    specs = {name: ModelSpec.from_config(name, entry) for name, entry in config["models"].items()}
    memory = {t.architecture: t for t in training_memory(config, specs)}
    peaks = sorted(f"{t.gib:.1f} GiB" for t in memory.values())
    assert len(peaks) == 3
    for page in ("config/paper.yaml", "docs/cluster.md"):
        text = " ".join((REPO / page).read_text().replace("#", " ").split())
        assert sorted(re.findall(r"\d+\.\d GiB", text)) == peaks, page
        assert re.search(r"as `?make plan`? prints at commit [0-9a-f]{7}", text), page
    # GPT-20B's shards on the host, per process, as the plan's host row prints them
    assert f"shards alone are {memory['gpt-oss-20b'].host_gib:.0f} GiB a process" in " ".join(
        (REPO / "config/paper.yaml").read_text().replace("#", " ").split()
    )


API = ["config/config.yaml", "config/paper.yaml", "config/api-generators.yaml"]
# Made-up figures for the arithmetic only (the shipped configs set no price: the user's to set).
PRICES = {
    "gpt-6-astra": {"input_per_mtok": 1.5, "output_per_mtok": 10.0},
    "claude-opus-4-8": {"input_per_mtok": 3.0, "output_per_mtok": 20.0},
}


def api_config(tmp_path, monkeypatch, prices):
    monkeypatch.chdir(REPO)
    overlay = tmp_path / "prices.yaml"
    overlay.write_text(yaml.safe_dump({"prices": prices}))
    return load_config([*API, str(overlay)])


def test_api_models_get_calls_tokens_and_cost_from_the_price_table(tmp_path, monkeypatch):
    import json

    from debate_audit.tools.plan_counts import NOMINAL
    from debate_audit.tools.plan_report import plan_json

    config = api_config(tmp_path, monkeypatch, PRICES)
    plan = build_plan(config, {"paraphrase_search": 2, "paraphrase_test": 4}, None)
    api = {a.model: a for a in plan.api}
    assert set(api) == {"gpt-6-astra", "gpt-5.6-terra", "claude-opus-4-8"}
    par = config["paraphrase"]
    pairs = sum(NOMINAL[d]["n"] for d in config["verifier"]["datasets"])  # max_pairs null: every pair
    # calls: the pools the plan counts, the search with its top-up rounds, each test pool `size` draws a pair
    search = [r for r in plan.rules if r.rule == "paraphrase_search"]
    assert (
        api["gpt-6-astra"].calls
        == sum(r.generations for r in search)
        == pytest.approx(pairs * par["search"]["samples"] * (1 + par["search"]["max_topup_rounds"]))
    )
    for model in ("gpt-5.6-terra", "claude-opus-4-8"):
        rows = [r for r in plan.rules if r.rule == "paraphrase_test" and r.model == model]
        assert api[model].calls == sum(r.generations for r in rows) == pytest.approx(pairs * par["test"]["size"])
        assert api[model].rules == ["paraphrase_test"]
        assert api[model].input_tokens == pytest.approx(sum(r.prompt_tokens for r in rows))
        assert api[model].input_tokens > 0
    # output: Claude's own cap (request.max_tokens); GPT sends none, so the stage's max_new_tokens, an estimate
    claude, terra, astra = api["claude-opus-4-8"], api["gpt-5.6-terra"], api["gpt-6-astra"]
    assert claude.output_tokens == pytest.approx(claude.calls * 16384) and not claude.output_estimated
    assert terra.output_tokens == pytest.approx(terra.calls * par["test"]["max_new_tokens"]) and terra.output_estimated
    assert astra.output_tokens == pytest.approx(astra.calls * par["search"]["max_new_tokens"])
    assert astra.output_estimated
    # cost = tokens x price per million
    for model, price in PRICES.items():
        a = api[model]
        assert a.cost_usd == pytest.approx(
            (a.input_tokens * price["input_per_mtok"] + a.output_tokens * price["output_per_mtok"]) / 1e6
        )
    assert terra.cost_usd is None
    text = render(plan)
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["gpt-5.6-terra"].endswith("| no price set | no price set |")
    assert rows["claude-opus-4-8"].endswith(f"| 3.0, 20.0 | {claude.cost_usd:,.2f} |")
    assert "16384 (request.max_tokens)" in rows["claude-opus-4-8"]
    assert "no cap: estimate" in rows["gpt-5.6-terra"]
    assert f"{claude.cost_usd + astra.cost_usd:,.2f} (priced models only)" in rows["**total**"]
    assert "input tokens: the plan's prompt estimate" in text and "an estimate, not a bound" in text
    # --json: the same per model
    data = {a["model"]: a for a in json.loads(plan_json(plan))["api"]}
    assert data["claude-opus-4-8"]["cost_usd"] == pytest.approx(claude.cost_usd)
    assert data["gpt-5.6-terra"]["cost_usd"] is None and data["gpt-6-astra"]["calls"] == astra.calls


def test_the_shipped_api_overlay_sets_no_price_and_the_default_plan_has_no_api_table(config, monkeypatch):
    monkeypatch.chdir(REPO)
    plan = build_plan(load_config(API), {}, None)
    assert len(plan.api) == 3 and all(a.cost_usd is None for a in plan.api)
    assert "no price set" in render(plan)
    assert build_plan(config, {}, None).api == []
    assert "Models served by an API" not in render(build_plan(config, {}, None))


def test_a_price_for_a_model_not_under_models_fails_naming_the_key(tmp_path, monkeypatch, config):
    with pytest.raises(ValueError, match=r"prices\.gpt-7-nova: model 'gpt-7-nova' is not defined under 'models:'"):
        api_config(tmp_path, monkeypatch, {"gpt-7-nova": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}})
    config["prices"] = {"gpt-7-nova": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
    with pytest.raises(ValueError, match=r"prices\.gpt-7-nova"):
        build_plan(config, {}, None)
    with pytest.raises(Exception, match="minimum of 0"):  # the schema: USD per million tokens >= 0
        api_config(tmp_path, monkeypatch, {"gpt-6-astra": {"input_per_mtok": -1.0, "output_per_mtok": 2.0}})


# ------------------------------------------------------------------ the audit's operating characteristic
POOL_RULES = ("paraphrase_search", "paraphrase_test", "audit_scores")


def test_the_paper_plan_gives_its_detectable_p_at_100_plus_100_paraphrases(config):
    plan = build_plan(config, {}, None)
    power = plan.power
    # M_search 100, M_test 100 for each of 2 generators, no tau: 300 paraphrases read on a clean q_h
    assert (power.search_size, power.test_size, power.generators, power.tau) == (100, 100, 2, None)
    assert power.clean_reads == 300
    assert power.detectable_p == pytest.approx(1 - 0.2 ** (1 / 300))  # 0.00535
    # 0.05^(1/100) = 0.970 certifies 0.9 (paper.yaml's certify_tau); at p = 0.01 all 300 must be clean
    assert power.certifiable and power.clean_bound == pytest.approx(0.05 ** (1 / 100))
    assert power.p_certify_paper == pytest.approx(0.99**300)
    assert power.p_certify_betting_se is not None and power.p_certify_betting > power.p_certify_paper + 0.1
    text = render(plan)
    assert "300 paraphrases read on a clean q_h; flagged with 80% power from p = 0.00535." in text
    assert "P(certify | p = 0.01): paper's bound 0.049, betting bound" in text
    options = {o.name: o for o in power.options}
    assert set(options) == {"configured", "equal pools"}  # the configured pools already reach p = 0.05
    configured, equal = options["configured"], options["equal pools"]
    assert configured.p_flag == pytest.approx(1 - 0.95**300)
    # p = 0.05 with 80% power needs 32 reads: 11 + 11 x 2 = 33 (10 + 10 x 2 = 30 falls short)
    assert (equal.search_size, equal.test_size, equal.clean_reads) == (11, 11, 33)
    assert equal.p_flag >= 0.8 > 1 - 0.95**30
    # the configured pools cost what the plan's rows of the same rules cost; scorings scale with the pools
    rows = [r for r in plan.rules if r.rule in POOL_RULES]
    assert configured.generations == pytest.approx(sum(r.generations for r in rows))
    assert configured.scorings == pytest.approx(sum(r.scorings for r in rows))
    # each pair's q_m and q_h besides its paraphrases
    assert equal.scorings / configured.scorings == pytest.approx((11 + 2 * 11 + 2) / (100 + 2 * 100 + 2))
    assert "| equal pools | 11 | 11 | 33 |" in text
    assert json.loads(plan_json(plan))["audit_power"]["detectable_p"] == pytest.approx(power.detectable_p)


def test_the_default_plan_says_tau_is_out_of_reach_and_which_pools_reach_the_target(monkeypatch):
    monkeypatch.chdir(REPO)
    plan = build_plan(load_config(["config/config.yaml"]), {}, None)
    power = plan.power
    # 6 + 4 x 2 paraphrases: 4 test draws give at most 0.05^(1/4) = 0.473 < tau 0.9, which needs 29
    assert not power.certifiable and power.certify_test_size == 29
    assert power.p_certify_paper == 0.0 and power.p_certify_betting == 0.0 and power.p_certify_betting_se is None
    assert power.detectable_p == pytest.approx(1 - 0.2 ** (1 / 14))
    text = render(plan)
    assert "**not possible** with these test pools" in text and "it needs 29 test paraphrases per generator" in text
    options = {o.name: o for o in power.options}
    assert options["configured"].p_flag < 0.8 and "0.512 (short)" in text
    # the configured test pools with a search pool of 32 - 8 = 24; or 11 + 11 x 2
    assert (options["larger search pool"].search_size, options["larger search pool"].test_size) == (24, 4)
    assert (options["equal pools"].search_size, options["equal pools"].test_size) == (11, 11)
    assert all(o.api_models == 0 for o in options.values()) and "no API model" in text


def test_the_pools_for_the_target_are_priced_where_prices_are_set(tmp_path, monkeypatch):
    config = api_config(tmp_path, monkeypatch, PRICES)
    plan = build_plan(config, {}, None)
    options = {o.name: o for o in plan.power.options}
    configured, equal = options["configured"], options["equal pools"]
    # the API models generate paraphrases only: the configured pools cost the API table's priced rows
    assert configured.api_models == 3 and not configured.priced_all
    assert configured.cost_usd == pytest.approx(sum(a.cost_usd for a in plan.api if a.cost_usd is not None))
    assert 0 < equal.cost_usd < configured.cost_usd
    assert f"{configured.cost_usd:,.2f} (priced models only)" in render(plan)


def test_an_endpoint_judge_counts_a_one_token_scoring_call_per_judgment_and_one_without_logprobs_none(config):
    from debate_audit.tools.plan_memory import job_gpus

    config["models"]["gpt-judge"] = {
        "source": "openai",
        "provider": "openai",
        "id": "gpt-4.1-mini",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
    }
    config["models"]["claude-judge"] = {
        "source": "openai",
        "provider": "anthropic",
        "id": "claude-x",
        "base_url": "https://api.anthropic.com",
        "api_key_env": "ANTHROPIC_API_KEY",
        "request": {"max_tokens": 300},
    }
    cw = config["cwpor"]
    cw["judge_model"], cw["cross_judges"] = "gpt-judge", ["claude-judge"]
    plan = build_plan(config, {}, None)
    judged = len(cw["models"]) * len(cw["verbosity"]) * min(817, cw["subset"] or 817)
    rows = {r.model: r for r in plan.rules if r.rule == "cwpor_judge"}
    assert rows["gpt-judge"].scorings == judged and rows["claude-judge"].scorings == 0
    assert rows["gpt-judge"].generations == rows["claude-judge"].generations == judged  # paper: one free reply
    api = {a.model: a for a in plan.api}
    assert api["gpt-judge"].calls == 2 * judged and api["claude-judge"].calls == judged
    # the judge's reply budget plus one token per scoring request; Claude's own cap, no scoring
    assert api["gpt-judge"].output_tokens == pytest.approx(judged * (cw["judge_max_new_tokens"] + 1))
    assert api["claude-judge"].output_tokens == pytest.approx(judged * 300)
    assert all(r.gpus == 0 for r in rows.values())  # nothing of theirs on this job's GPU
    served = ModelSpec.from_config(
        "m",
        {
            "source": "hf",
            "id": "org/m",
            "generation_backend": "server",
            "base_url": "http://h/v1",
            "scoring_backend": "server",
        },
    )
    assert job_gpus(config, served, RulePlan("cwpor_judge", model="m", generations=1, scorings=1), 8.0) == (0, None)


HOSTED = {
    "source": "openai",
    "provider": "openai",
    "base_url": "https://api.openai.com/v1",
    "api_key_env": "OPENAI_API_KEY",
}


def test_a_hosted_audit_is_priced_as_one_token_scoring_calls_with_the_one_letter_instruction(tmp_path, monkeypatch):
    from debate_audit.models.api import ONE_LETTER
    from debate_audit.models.calls import tokens
    from debate_audit.tools.plan_counts import dataset_stats

    monkeypatch.chdir(REPO)
    overlay = {
        "models": {
            "hosted-base": {**HOSTED, "id": "gpt-4.1-mini-2025-04-14"},
            "hosted-ft": {**HOSTED, "id": "ft:gpt-4.1-mini-2025-04-14:me::abc"},
        },
        "prices": {"hosted-ft": {"input_per_mtok": 0.8, "output_per_mtok": 3.2}},
        "datasets": {"own": {"mine": {"pairs": "data/demo/own_pairs.jsonl"}}},
        "audited_models": {"hosted": {"base": "hosted-base", "targets": ["hosted-ft"], "datasets": ["mine"]}},
    }
    (tmp_path / "hosted.yaml").write_text(yaml.safe_dump(overlay))
    config = load_config(["config/config.yaml", str(tmp_path / "hosted.yaml")])
    plan = build_plan(config, {"audit_model_scores": 2}, None)
    par = config["paraphrase"]
    pairs = dataset_stats(config, None)[0]["mine"]["n"]
    # q_m, q_h and every paraphrase of the pools, each read in both answer orders: one request each
    questions = 2 + par["search"]["size"] + par["test"]["size"] * len(par["test"]["generators"])
    api = {a.model: a for a in plan.api}
    assert set(api) == {"hosted-base", "hosted-ft"}
    for a in api.values():
        assert a.rules == ["audit_model_scores"] and a.calls == 2 * pairs * questions
        assert a.output_tokens == a.calls and a.output_budget == "1 per scoring (one-token request)"
        assert not a.output_estimated
    (row,) = [r for r in plan.rules if r.rule == "audit_model_scores" and r.model == "hosted-ft"]
    assert row.gpus == 0 and row.scorings == api["hosted-ft"].calls
    # the input: the readout prompt's estimate (eraudit/audit/cost.py) and the instruction appended to it
    instruction = tokens(len(ONE_LETTER.format(letters="A or B").split()))
    words = dataset_stats(config, None)[0]["mine"]["question_words"]
    expected = row.scorings * (60 + tokens(words) + instruction)
    assert api["hosted-ft"].input_tokens == pytest.approx(row.prompt_tokens) == pytest.approx(expected)
    assert api["hosted-ft"].cost_usd == pytest.approx((row.prompt_tokens * 0.8 + row.scorings * 3.2) / 1e6)
    text = render(plan)
    assert "the audit's readouts of a verifier behind an endpoint" in text and "an estimate, not a bound" not in text
