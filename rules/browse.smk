# The results browser (issue 14): one static page with every CW-POR debate and every audited hidden question.
# It reads the stages' Parquet outputs only, so it reruns when any of them changes and calls no model.

# One browser section per audit (dataset, and architecture / setting when the run has several).
BROWSE_AUDIT_FILES = {
    browse_section(dataset, arch, setting): dict(
        pairs=f"{DATA}/{dataset}.parquet",
        debates={
            mode: f"{DEBATE_OUT}/{dataset}/{AUDIT_SETTINGS_GRID[setting].length}/debates_{mode}.parquet"
            for mode in PLAN.debate_modes(dataset, AUDIT_SETTINGS_GRID[setting].length)
        },
        **{
            stem: f"{AUDIT_OUT}/{arch}/{dataset}/{setting}/{stem}.parquet"
            for stem in ("deltas", "records", "steps", "generators")
        },
    )
    for (arch, dataset), settings in PLANNED_SETTINGS.items()
    for setting in (s.path_id for s in settings)
} | {
    # an audit of models you bring: no debates (none of this workflow's)
    f"{c['dataset']} · {c['audit']}": dict(
        pairs=f"{DATA}/{c['dataset']}.parquet",
        debates={},
        **{
            stem: f"{BROUGHT_OUT}/{c['audit']}/{c['dataset']}/{stem}.parquet"
            for stem in ("deltas", "records", "steps", "generators")
        },
    )
    for c in BROUGHT_CELLS
}


rule browse:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        responses=CWPOR_RESPONSES,
        judgments=CWPOR_ALL_JUDGMENTS,
        audit=[
            path
            for files in BROWSE_AUDIT_FILES.values()
            for path in [
                files["pairs"],
                *files["debates"].values(),
                files["deltas"],
                files["records"],
                files["steps"],
                files["generators"],
            ]
        ],
    output:
        page=report(
            f"{RESULTS}/browse/index.html",
            caption="../report/captions/browse.rst",
            category="Browse",
            labels={"page": "debate and audit browser"},
        ),
    log:
        f"{LOGS}/browse/index.log",
    params:
        eraudit=BROWSE_AUDIT_FILES,
        headline=AUDIT["headline_bound"],
        library=library_code("browse"),
    script:
        "../workflow/scripts/browse.py"


ALL_TARGETS.append(f"{RESULTS}/browse/index.html")


# The experiments as inspect_ai eval logs (`inspect view --log-dir results/inspect`), on request: `make inspect`
# (inspect_ai is the optional extra `inspect`). One log per task and model, a sample per judgment or scored
# question, written from the Parquet artifacts.
INSPECT_AUDITS = {
    section: dict(
        files,
        architecture=arch,
        dataset=dataset,
        setting=setting,
        summary=f"{AUDIT_OUT}/{arch}/{dataset}/{setting}/summary.parquet",
    )
    for (arch, dataset), settings in PLANNED_SETTINGS.items()
    for setting in (s.path_id for s in settings)
    for section, files in [
        (
            browse_section(dataset, arch, setting),
            BROWSE_AUDIT_FILES[browse_section(dataset, arch, setting)],
        )
    ]
} | {
    # an audit of models you bring: its name is its `architecture`, it has one setting
    f"{c['dataset']} · {c['audit']}": dict(
        BROWSE_AUDIT_FILES[f"{c['dataset']} · {c['audit']}"],
        architecture=c["audit"],
        dataset=c["dataset"],
        setting="models",
        summary=f"{BROUGHT_OUT}/{c['audit']}/{c['dataset']}/summary.parquet",
    )
    for c in BROUGHT_CELLS
}
# The readout of each architecture's logs (the messages a readout sends): its mode and its base's directory.
INSPECT_READOUTS = {
    arch: (config["verifier"]["readout"], model_dir(arch)) for arch in ARCHITECTURES
} | {
    a.name: (a.readout_mode(config["verifier"]), model_dir(a.base))
    for a in BROUGHT.values()
}


rule inspect_logs:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        responses=CWPOR_RESPONSES,
        judgments=CWPOR_ALL_JUDGMENTS,
        readouts=cell_paths(
            f"{VERIFIER_OUT}/{{architecture}}/{{dataset}}/{{verifier}}/eval.parquet",
            CHECKPOINT_CELLS,
        ),
        pairs=expand(f"{DATA}/{{dataset}}.parquet", dataset=ER_DATASETS),
        audit=[
            files[stem]
            for files in INSPECT_AUDITS.values()
            for stem in ("deltas", "records", "steps", "summary")
        ],
        models=[model_fingerprint(arch) for arch in ARCHITECTURES]
        + [model_fingerprint(a.base) for a in BROUGHT.values()],
    output:
        logs=directory(f"{RESULTS}/inspect"),
    log:
        f"{LOGS}/browse/inspect_logs.log",
    params:
        datasets=ER_DATASETS,
        audits=INSPECT_AUDITS,
        readouts=INSPECT_READOUTS,
        library=library_code("inspect_logs"),
    script:
        "../workflow/scripts/inspect_logs.py"
