# ER-Audit part 1: train/eval split, debate transcripts (honest / adversarial) per length, best-of-K selection.
# Outputs: results/er_audit/debate/<dataset>/split.parquet and <dataset>/<length>/debates_<mode>.parquet.

from debate_audit.eraudit.debate.splits import release_split_files

DEBATE_MODES = ["honest", "adversarial"]
# DebateSettings fields, passed as params so a changed setting reruns the debates (word_limit: the length).
DEBATE_SETTING_KEYS = ["rounds", "candidates", "temperature", "top_p"]
DEBATE_SETTING_KEYS += ["seed", "max_context_words", "quote_match", "round_reminder"]
DEBATE_SETTING_KEYS += ["scratchpad", "thinking_max_new_tokens"]
DEBATE_SPLIT = config["debate"]["split"]
DEBATE_TRANSCRIPTS = config["debate"].get("transcripts") or {"source": "generate"}
DEBATE_OUT = f"{RESULTS}/er_audit/debate"
# The stronger adversary (debate.gcg): a GCG suffix on every adversarial candidate before selection.
DEBATE_GCG = config["debate"].get("gcg") or {"enabled": False}
# The settings a suffix depends on (tracked params); batch_size only bounds the rows per forward pass.
GCG_SETTING_KEYS = ["suffix_length", "steps", "top_k", "candidates_per_step", "weights"]
GCG_SETTING_KEYS += ["seed", "init_token", "allow_non_ascii"]


wildcard_constraints:
    debate_mode=one_of(DEBATE_MODES),


rule debate_split:
    input:
        pairs=f"{DATA}/{{dataset}}.parquet",
        release=lambda wc: [
            p for p in release_split_files(DEBATE_SPLIT, wc.dataset).values() if p
        ],
    output:
        split=f"{DEBATE_OUT}/{{dataset}}/split.parquet",
    log:
        f"{LOGS}/debate/split_{{dataset}}.log",
    params:
        eval_fraction=config["debate"]["eval_fraction"],
        seed=config["debate"]["split_seed"],
        source=DEBATE_SPLIT["source"],
        release=lambda wc: release_split_files(DEBATE_SPLIT, wc.dataset),
        overlap=DEBATE_SPLIT.get("overlap", "exclude"),
        library=library_code("debate_split"),
    script:
        "../workflow/scripts/debate_split.py"


if DEBATE_TRANSCRIPTS["source"] == "release":

    # The release's own selected transcripts replace generation and best-of-K selection (length "release").
    rule debate_import:
        input:
            pairs=f"{DATA}/{{dataset}}.parquet",
            rows=lambda wc: release_transcript_inputs(wc.dataset, wc.debate_mode),
        output:
            selected=f"{DEBATE_OUT}/{{dataset}}/{{length}}/debates_{{debate_mode}}.parquet",
            rejected=f"{DEBATE_OUT}/{{dataset}}/{{length}}/debates_{{debate_mode}}.rejected.parquet",
        log:
            f"{LOGS}/debate/import_{{dataset}}_{{length}}_{{debate_mode}}.log",
        params:
            rows=lambda wc: release_transcripts(wc.dataset, wc.debate_mode),
            library=library_code("debate_import"),
        script:
            "../workflow/scripts/debate_import.py"

else:

    rule debate_generate:
        input:
            pairs=f"{DATA}/{{dataset}}.parquet",
            split=f"{DEBATE_OUT}/{{dataset}}/split.parquet",
            model=model_fingerprint(config["debate"]["debater"]),
        output:
            candidates=f"{DEBATE_OUT}/{{dataset}}/{{length}}/candidates_{{debate_mode}}.parquet",
        log:
            f"{LOGS}/debate/generate_{{dataset}}_{{length}}_{{debate_mode}}.log",
        benchmark:
            f"{BENCHMARKS}/debate/generate_{{dataset}}_{{length}}_{{debate_mode}}.tsv"
        priority: ER_CHAIN_PRIORITY
        resources:
            gpu=lambda wc: generation_gpu(config["debate"]["debater"]),
            mem_mb=lambda wc: model_mem_mb(config["debate"]["debater"], scores=False),
            runtime=job_runtime("debate_generate"),
            cpus_per_task=lambda wc: model_cpus(
                config["debate"]["debater"], scores=False
            ),
        params:
            model=lambda wc, resources: model_ref(config["debate"]["debater"]),
            numbers=lambda wc: model_numbers(config["debate"]["debater"]),
            # best-of-K (K > 1) samples: another engine draws other candidates
            engine=lambda wc: (
                sampling_engine(config["debate"]["debater"])
                if config["debate"]["candidates"] > 1
                else None
            ),
            settings=lambda wc: {
                **{key: config["debate"].get(key) for key in DEBATE_SETTING_KEYS},
                "word_limit": grid.word_limit(wc.length),
                "prompt_word_limit": config["debate"]["prompt_word_limits"].get(
                    wc.length
                ),
            },
            splits=config["debate"]["splits"],
            max_items=config["debate"].get("max_items"),
            cache=config["cache"],
            library=library_code("debate_generate"),
        script:
            "../workflow/scripts/debate_generate.py"

    rule debate_select:
        input:
            candidates=selection_candidates,
            pairs=f"{DATA}/{{dataset}}.parquet",
            model=model_fingerprint(DEBATE_SELECTOR),
            # adversarial: the same items' honest candidates, whose copies are no attack
            honest=honest_candidates,
        output:
            scores=f"{DEBATE_OUT}/{{dataset}}/{{length}}/scores_{{debate_mode}}.parquet",
            selected=f"{DEBATE_OUT}/{{dataset}}/{{length}}/debates_{{debate_mode}}.parquet",
        log:
            f"{LOGS}/debate/select_{{dataset}}_{{length}}_{{debate_mode}}.log",
        benchmark:
            f"{BENCHMARKS}/debate/select_{{dataset}}_{{length}}_{{debate_mode}}.tsv"
        priority: ER_CHAIN_PRIORITY
        resources:
            gpu=1,
            mem_mb=lambda wc: model_mem_mb(DEBATE_SELECTOR, generates=False),
            runtime=job_runtime("debate_select"),
            cpus_per_task=lambda wc: model_cpus(DEBATE_SELECTOR, generates=False),
        params:
            model=lambda wc, resources: model_ref(DEBATE_SELECTOR),
            numbers=lambda wc: model_numbers(DEBATE_SELECTOR),
            leak_ngram=config["debate"]["leak_ngram"],
            leak_threshold=config["debate"]["leak_threshold"],
            hard_terms=config["debate"]["hard_terms"],
            max_unverified_quote_fraction=config["debate"][
                "max_unverified_quote_fraction"
            ],
            order=config["debate"]["selection_order"],
            order_seed=config["debate"]["selection_order_seed"],
            readout=config["verifier"]["readout"],
            cache=config["cache"],
            library=library_code("debate_select"),
        script:
            "../workflow/scripts/debate_select.py"


if DEBATE_TRANSCRIPTS["source"] != "release" and DEBATE_GCG["enabled"]:

    # A suffix per adversarial candidate, optimised on the selector's gradients (white-box), in jobs over
    # ranges of the candidates (each one a checkpoint; a finished candidate is cached, so another range size
    # recomputes nothing).
    rule debate_gcg:
        input:
            candidates=f"{DEBATE_OUT}/{{dataset}}/{{length}}/candidates_adversarial.parquet",
            pairs=f"{DATA}/{{dataset}}.parquet",
            model=model_fingerprint(DEBATE_SELECTOR),
        output:
            records=f"{DEBATE_OUT}/{{dataset}}/{{length}}/gcg/part{{part}}_of_{{parts}}.parquet",
        log:
            f"{LOGS}/debate/gcg_{{dataset}}_{{length}}_part{{part}}_of_{{parts}}.log",
        benchmark:
            f"{BENCHMARKS}/debate/gcg_{{dataset}}_{{length}}_part{{part}}_of_{{parts}}.tsv"
        wildcard_constraints:
            part=r"\d+",
            parts=r"\d+",
        priority: ER_CHAIN_PRIORITY
        resources:
            gpu=1,
            mem_mb=lambda wc: model_mem_mb(DEBATE_SELECTOR, generates=False),
            runtime=job_runtime("debate_gcg"),
            cpus_per_task=lambda wc: model_cpus(DEBATE_SELECTOR, generates=False),
        params:
            model=lambda wc, resources: model_ref(DEBATE_SELECTOR),
            numbers=model_numbers(DEBATE_SELECTOR),
            settings={key: DEBATE_GCG.get(key) for key in GCG_SETTING_KEYS},
            batch_size=lambda wc, resources: DEBATE_GCG.get("batch_size"),
            order=config["debate"]["selection_order"],
            order_seed=config["debate"]["selection_order_seed"],
            readout=config["verifier"]["readout"],
            cache=config["cache"],
            library=library_code("debate_gcg"),
        script:
            "../workflow/scripts/debate_gcg.py"

    # The pool selection reads, from every range's records; a missing or repeated candidate stops it.
    rule debate_gcg_merge:
        input:
            candidates=f"{DEBATE_OUT}/{{dataset}}/{{length}}/candidates_adversarial.parquet",
            pairs=f"{DATA}/{{dataset}}.parquet",
            parts=gcg_parts,
        output:
            pool=f"{DEBATE_OUT}/{{dataset}}/{{length}}/candidates_adversarial_gcg.parquet",
            suffixes=f"{DEBATE_OUT}/{{dataset}}/{{length}}/gcg_adversarial.parquet",
        log:
            f"{LOGS}/debate/gcg_merge_{{dataset}}_{{length}}.log",
        params:
            pool=DEBATE_GCG["pool"],
            library=library_code("debate_gcg_merge"),
        script:
            "../workflow/scripts/debate_gcg_merge.py"


ALL_TARGETS.extend(
    cell_paths(
        f"{DEBATE_OUT}/{{dataset}}/{{length}}/debates_{{debate_mode}}.parquet",
        DEBATE_CELLS,
    )
)
