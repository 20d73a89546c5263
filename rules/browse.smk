# The results browser (issue 14): one static page with every CW-POR debate and every audited hidden question.
# It reads the stages' Parquet outputs only, so it reruns when any of them changes and calls no model.
from debate_audit.views.browse import page_version

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
        # hash of the page template: editing the page rebuilds it
        page=page_version(),
        library=library_code("browse"),
    script:
        "../workflow/scripts/browse.py"


ALL_TARGETS.append(f"{RESULTS}/browse/index.html")


# The experiments as inspect_ai eval logs (`inspect view results/inspect`), on request: `make inspect`
# (inspect_ai is the optional extra `inspect`). One log per experiment, a sample per judgment or scored
# question, written from the Parquet artifacts.
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
            for files in BROWSE_AUDIT_FILES.values()
            for stem in ("deltas", "records", "steps")
        ],
    output:
        cwpor=f"{RESULTS}/inspect/cwpor.eval",
        verifiers=f"{RESULTS}/inspect/er_audit_verifiers.eval",
        audit=f"{RESULTS}/inspect/er_audit_audit.eval",
    log:
        f"{LOGS}/browse/inspect_logs.log",
    params:
        datasets=ER_DATASETS,
        audits={
            section: {stem: files[stem] for stem in ("deltas", "records", "steps")}
            for section, files in BROWSE_AUDIT_FILES.items()
        },
        library=library_code("inspect_logs"),
    script:
        "../workflow/scripts/inspect_logs.py"
