# The results browser (issue 14): one static page with every CW-POR debate and every audited hidden question.
# It reads the stages' Parquet outputs only, so it reruns when any of them changes and calls no model.
from debate_audit.browse import page_version

BROWSE_AUDIT_FILES = {
    dataset: dict(
        pairs=f"data/{dataset}.parquet",
        debates={
            mode: f"results/er_audit/{dataset}/debates_{mode}.parquet"
            for mode in DEBATE_MODES
        },
        deltas=f"results/audit/{dataset}/deltas.parquet",
        records=f"results/audit/{dataset}/records.parquet",
        steps=f"results/audit/{dataset}/steps.parquet",
        generators=f"results/audit/{dataset}/generators.parquet",
    )
    for dataset in AUDIT_DATASETS
}


rule browse:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        responses=CWPOR_RESPONSES,
        judgments=CWPOR_JUDGMENTS,
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
            "results/browse/index.html",
            caption="../report/captions/browse.rst",
            category="Browse",
            labels={"page": "debate and audit browser"},
        ),
    log:
        "logs/browse/index.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        eraudit=BROWSE_AUDIT_FILES,
        # hash of the page template: editing the page rebuilds it
        page=page_version(),
        library=library_code("browse"),
    script:
        "../workflow/scripts/browse.py"


ALL_TARGETS.append("results/browse/index.html")
