# The input and params functions of the stages, and the lists of files a stage gathers: what one job reads
# (its transcripts, checkpoint, score files, round-1 responses), the per-checkpoint settings it trains with,
# and the lists a later stage gathers (a model's CW-POR judgments, Table 3's benchmark records); and
# library_code, the code fingerprint in every rule's params. A rule takes a function when it is defined, so
# they come before the rule files; the names they read when called (DEBATE_OUT, CWPOR_JUDGES, rules.<name>,
# ...) are the rule files'.
from pathlib import Path

from debate_audit.eraudit.common import grid
from debate_audit.runtime.provenance import code_fingerprint


def library_code(script):
    """Hash of the library modules `workflow/scripts/<script>.py` reaches: an edited prompt or function
    body reruns exactly the rules whose output can change (their descendants follow)."""
    return code_fingerprint(
        Path(workflow.basedir) / "workflow" / "scripts" / f"{script}.py"
    )


# ---------------------------------------------- CW-POR (rules/cwpor.smk, rules/cwpor_analysis.smk)
def cwpor_judgments(primary_only):
    """Judgment files of every (model, judge, word limit); primary_only: the primary judge's, which make
    the paper's outputs (metrics, breakdowns, figures, summary)."""
    return [
        f"{CWPOR_OUT}/{m}/judge-{judge}/judgments_v{v}.parquet"
        for m, judges in CWPOR_JUDGES.items()
        for judge in (judges[:1] if primary_only else judges)
        for v in CWPOR["verbosity"]
    ]


def cwpor_benchmarks():
    """Benchmark records of this configuration's CW-POR model jobs (Table 3: runtime_benchmarks), with the
    length control's single-turn debates at v // 2 words and every judge of every model.
    """
    words = {
        rebuttal_protocol(p).turn_words(v)
        for p in REBUTTAL_PROTOCOLS
        for v in CWPOR["verbosity"]
    }
    cells = [
        (m, j, v)
        for m, js in CWPOR_JUDGES.items()
        for j in js
        for v in CWPOR["verbosity"]
    ]
    pairs = dict(zip(("model", "judge", "verbosity"), map(list, zip(*cells))))
    # a job gathering a model's word limits (cwpor.job_split) has one record: its pattern has no {verbosity}
    return list(
        dict.fromkeys(
            [
                *expand(
                    rules.cwpor_debate.benchmark,
                    model=CWPOR["models"],
                    verbosity=sorted(words | set(CWPOR["verbosity"])),
                ),
                *expand(rules.cwpor_judge.benchmark, zip, **pairs),
                *expand(rules.cwpor_rebuttal.benchmark, **REBUTTAL_CELLS),
                *[
                    path
                    for p in REBUTTAL_PROTOCOLS
                    for path in expand(
                        rules.cwpor_judge_rebuttal.benchmark, zip, protocol=p, **pairs
                    )
                ],
            ]
        )
    )


def debate_budgets(wc):
    """max_new_tokens of a cwpor_debate job: its word limit's, or, gathered per model, each word limit's."""

    def budget(words):
        return max_new_tokens_for(
            words, CWPOR["tokens_per_word"], CWPOR["extra_tokens"]
        )

    if CWPOR_PER_MODEL:
        return {v: budget(v) for v in CWPOR_DEBATE_WORDS}
    return budget(int(wc.verbosity))


def round1_responses(wc):
    """The single-turn responses a protocol's round 1 is (length control: at v // 2 words)."""
    words = rebuttal_protocol(wc.protocol).turn_words(int(wc.verbosity))
    return f"{CWPOR_OUT}/{wc.model}/responses_v{words}.parquet"


# ---------------------------------------------- ER-Audit debates (rules/debate.smk)
def release_transcripts(dataset, mode):
    """The configured release files (paths or URLs) of one dataset and debate mode."""
    return list(DEBATE_TRANSCRIPTS["release"][dataset][mode])


def release_transcript_inputs(dataset, mode):
    return [p for p in release_transcripts(dataset, mode) if "://" not in p]


def selection_candidates(wc):
    """debate_select's pool: the generated candidates, or for adversarial selection with debate.gcg on the
    pool debate_gcg_merge writes (the suffixed candidates, with or instead of the natives: debate.gcg.pool).
    """
    if wc.debate_mode == "adversarial" and DEBATE_GCG["enabled"]:
        return (
            f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/candidates_adversarial_gcg.parquet"
        )
    return f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/candidates_{wc.debate_mode}.parquet"


def honest_candidates(wc):
    """debate_select's input: the honest candidates an adversarial selection checks its own against
    (debate.drop_honest_copies), where that length debates honest transcripts too."""
    if (
        wc.debate_mode != "adversarial"
        or not config["debate"]["drop_honest_copies"]
        or "honest" not in PLAN.debate_modes(wc.dataset, wc.length)
    ):
        return []
    return f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/candidates_honest.parquet"


def gcg_parts(wc):
    """debate_gcg_merge's inputs: the records of each range job of a (dataset, length)'s GCG
    (debate.gcg.parts, else as many as fit cluster.runtime.max_minutes), named by its range and their count.
    """
    parts = split_jobs("debate_gcg", wc)
    return [
        f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/gcg/part{i}_of_{parts}.parquet"
        for i in range(parts)
    ]


# ---------------------------------------------- ER-Audit verifiers (rules/verifier.smk)
def checkpoint_fingerprint(wc):
    """The fingerprint of checkpoint `wc.verifier` of an architecture: its prepared V_base, V_base's copy (the
    audit's null, verifier_copy), or a fine-tuned verifier (`<length>/<variant>`, written by verifier_finetune).
    """
    if wc.verifier == "base":
        return model_fingerprint(wc.architecture)
    if wc.verifier == "copy":
        return f"{VERIFIERS}/{wc.architecture}/copy/fingerprint.json"
    return f"{VERIFIERS}/{wc.architecture}/{wc.dataset}/{wc.verifier}/fingerprint.json"


def finetune_mode(wc):
    """The debate mode (honest / adversarial) of the transcripts a fine-tuned variant trains on."""
    return VERIFIER_VARIANTS[grid.Checkpoint.of(wc.length, wc.variant).verifier]


def finetune_transcripts(wc):
    """The selected transcripts a fine-tuned variant trains on (honest or adversarial, at its length)."""
    return f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/debates_{finetune_mode(wc)}.parquet"


def finetune_adjudications(wc):
    """The L_lm targets of a variant (lm_target adjudication): the adjudications of the transcripts it trains
    on, by its architecture's adjudicator; [] for lm_target argument."""
    if LM_TARGET != "adjudication":
        return []
    return f"{VERIFIER_OUT}/{adjudicator(wc.architecture)}/{wc.dataset}/{wc.length}/adjudications_{finetune_mode(wc)}.parquet"


def finetune_settings(wc):
    """The FinetuneSettings of one checkpoint that define its weights (a tracked param): only V_org carries its
    L_qh weight and its own epochs and learning rate (verifier.org_training), so changing them retrains V_org
    alone. How many processes share the work and where the optimizer state lives (verifier.distributed) are
    `finetune_distributed`'s."""
    cp = grid.Checkpoint.of(wc.length, wc.variant)
    weights = dict(config["verifier"]["loss_weights"], qh=cp.qh_weight or 0.0)
    return (
        {key: config["verifier"][key] for key in FINETUNE_KEYS}
        | grid.own_training(config["verifier"], cp)
        | {
            "loss_weights": weights,
            "lora": grid.lora_settings(config["verifier"], wc.architecture),
        }
    )


def finetune_distributed(wc, resources):
    """The rest of one checkpoint's FinetuneSettings: processes (GPUs) and CPU offload (verifier.distributed).
    Speed and memory settings, like a model's batch size: N processes train the one-process curve and
    weights up to the order of float additions (eraudit/verifier/distributed.py), so they reach the script
    untracked (a params function taking `resources`, as model_ref) and changing the GPU count reruns nothing.
    """
    return grid.distributed_settings(config["verifier"], wc.architecture)


# ---------------------------------------------- ER-Audit paraphrase pools (rules/paraphrase.smk)
def pool_split(wc):
    """The part-1 split a dataset's pools select their pairs by (paraphrase.splits), where the workflow
    debates it; a dataset only models you bring are audited on has none: every pair (up to max_pairs).
    """
    if wc.dataset not in ER_DATASETS:
        return []
    return f"{DEBATE_OUT}/{wc.dataset}/split.parquet"


# ---------------------------------------------- ER-Audit audit (rules/audit.smk, audited_models.smk, browse.smk)
def audit_setting_scores(wc):
    """The score files of one audit: V_base, then each target at the setting's length and L_qh weight."""
    setting = AUDIT_SETTINGS_GRID[wc.setting]
    return [
        f"{AUDIT_OUT}/{wc.architecture}/{wc.dataset}/{cp.path_id}/scores.parquet"
        for cp in setting.checkpoints(AUDIT["targets"])
    ]


def brought_scores(wc):
    """The score files of one audit of models you bring: its base, then each target."""
    return [
        f"{AUDIT_OUT}/models/{wc.audit}/{wc.dataset}/{m}/scores.parquet"
        for m in BROUGHT[wc.audit].models
    ]


def browse_section(dataset, architecture, setting):
    """A browser section's name: the dataset, with the grid cell when the run has more than one."""
    cells = len(ARCHITECTURES) * len(AUDIT_SETTINGS_GRID)
    return dataset if cells == 1 else f"{dataset} · {architecture} · {setting}"


# Table 3 (audit_runtime): the benchmark records of this run's model-bound jobs as inputs, so no stale
# record of another configuration under benchmarks/rules/ gets in. prepare_model is left out: a model
# prepared by an earlier run, or linked in, has no record here and must not be prepared again for a table.
def runtime_benchmarks(wildcards):
    # Called when the DAG is built, after every rules/*.smk has defined its rules and lists.
    generated = DEBATE_TRANSCRIPTS["source"] == "generate"
    cells = [
        *([(rules.debate_generate, c) for c in DEBATE_CELLS] if generated else []),
        *([(rules.debate_select, c) for c in DEBATE_CELLS] if generated else []),
        *(
            [
                (rules.debate_gcg, {**c, "part": range(n), "parts": n})
                for c in GCG_CELLS
                for n in [split_jobs("debate_gcg", c)]
            ]
            if generated and DEBATE_GCG["enabled"]
            else []
        ),
        *(
            [(rules.verifier_adjudicate, c) for c in ADJUDICATION_CELLS]
            if LM_TARGET == "adjudication"
            else []
        ),
        *[(rules.verifier_finetune, c) for c in FINETUNE_CELLS],
        *[(rules.verifier_evaluate, c) for c in CHECKPOINT_CELLS],
        (rules.paraphrase_search, dict(dataset=AUDIT_DATASETS)),
        (
            rules.paraphrase_test,
            dict(dataset=AUDIT_DATASETS, generator=PARAPHRASE_TEST_GENERATORS),
        ),
        *[(rules.audit_scores, c) for c in AUDIT_SCORE_CELLS],
        *[(rules.audit_model_scores, c) for c in BROUGHT_SCORE_CELLS],
    ]
    return cwpor_benchmarks() + [
        path for rule, wcs in cells for path in expand(rule.benchmark, **wcs)
    ]
