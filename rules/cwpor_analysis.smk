# CW-POR's statistics, tables and figures (rules/cwpor.smk has the chain and the rules that call a model):
# POR and CW-POR with their bootstrap intervals, the breakdowns and figures, the calibration of every
# confidence signal, the debater x judge matrix, the effects of a rebuttal round. They read the judgments
# only: changing a statistics setting reruns these rules alone, never a model job.
from debate_audit.cwpor.calibration import SIGNAL_NAMES as CALIBRATION_SIGNALS

CWPOR_FIGURES = [
    "fig2_category",
    "fig4_verbosity",
    "fig5_question_type",
    "fig6_confidence",
]
# the single-turn responses at the configured word limits (cwpor_tables; rules/browse.smk reads them too)
CWPOR_CELLS = dict(model=CWPOR["models"], verbosity=CWPOR["verbosity"])
CWPOR_RESPONSES = expand(
    f"{CWPOR_OUT}/{{model}}/responses_v{{verbosity}}.parquet", **CWPOR_CELLS
)
CROSS_JUDGING = any(len(judges) > 1 for judges in CWPOR_JUDGES.values())
# the primary judge's judgments make the paper's outputs; every judge's the calibration and matrix
CWPOR_JUDGMENTS = cwpor_judgments(primary_only=True)
CWPOR_ALL_JUDGMENTS = cwpor_judgments(primary_only=False)
# every judge's judgments of both rounds of each rebuttal protocol (cwpor_rebuttal_effects)
REBUTTAL_JUDGMENTS = [
    f"{CWPOR_OUT}/{m}/judge-{judge}/rebuttal-{p}/judgments_v{v}.parquet"
    for m, judges in CWPOR_JUDGES.items()
    for judge in judges
    for p in REBUTTAL_PROTOCOLS
    for v in CWPOR["verbosity"]
]


rule cwpor_rebuttal_effects:
    input:
        single=CWPOR_ALL_JUDGMENTS,
        rebutted=REBUTTAL_JUDGMENTS,
    output:
        effects=f"{CWPOR_OUT}/rebuttal.parquet",
        flips=f"{CWPOR_OUT}/rebuttal_flips.parquet",
        markdown=report(
            f"{CWPOR_OUT}/tables/rebuttal.md",
            caption="../report/captions/cwpor_rebuttal.rst",
            category="CW-POR",
            subcategory="Rebuttal",
            labels={"table": "POR and CW-POR after a rebuttal round"},
        ),
    log:
        f"{LOGS}/cwpor/rebuttal_effects.log",
    params:
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_rebuttal_effects"),
    script:
        "../workflow/scripts/cwpor_rebuttal_effects.py"


rule cwpor_metrics:
    input:
        judgments=CWPOR_JUDGMENTS,
    output:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        breakdowns=f"{CWPOR_OUT}/breakdowns.parquet",
    log:
        f"{LOGS}/cwpor/metrics.log",
    params:
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_metrics"),
    script:
        "../workflow/scripts/cwpor_metrics.py"


rule cwpor_calibration:
    input:
        judgments=CWPOR_ALL_JUDGMENTS,
    output:
        table=f"{CWPOR_OUT}/calibration.parquet",
        bins=f"{CWPOR_OUT}/calibration_bins.parquet",
        markdown=report(
            f"{CWPOR_OUT}/tables/calibration.md",
            caption="../report/captions/cwpor_calibration.rst",
            category="CW-POR",
            subcategory="Calibration",
            labels={"table": "calibration of every confidence signal"},
        ),
    log:
        f"{LOGS}/cwpor/calibration.log",
    params:
        settings=CWPOR["calibration"],
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_calibration"),
    script:
        "../workflow/scripts/cwpor_calibration.py"


rule cwpor_reliability:
    input:
        table=f"{CWPOR_OUT}/calibration.parquet",
        bins=f"{CWPOR_OUT}/calibration_bins.parquet",
    output:
        [
            report(
                f"{CWPOR_OUT}/figures/reliability_{signal}.png",
                caption="../report/captions/cwpor_reliability.rst",
                category="CW-POR",
                subcategory="Calibration",
                labels={"figure": f"reliability of {signal}"},
            )
            for signal in CALIBRATION_SIGNALS
        ],
        expand(
            f"{CWPOR_OUT}/figures/reliability_{{signal}}.svg",
            signal=CALIBRATION_SIGNALS,
        ),
    log:
        f"{LOGS}/cwpor/reliability.log",
    params:
        signals=CALIBRATION_SIGNALS,
        out_dir=lambda wc, output: str(Path(output[0]).parent),
        library=library_code("cwpor_reliability"),
    script:
        "../workflow/scripts/cwpor_reliability.py"


rule cwpor_cross_judge:
    input:
        judgments=CWPOR_ALL_JUDGMENTS,
    output:
        matrix=f"{CWPOR_OUT}/cross_judge.parquet",
        contrast=f"{CWPOR_OUT}/cross_judge_contrast.parquet",
        markdown=report(
            f"{CWPOR_OUT}/tables/cross_judge.md",
            caption="../report/captions/cwpor_cross_judge.rst",
            category="CW-POR",
            subcategory="Judges",
            labels={"table": "debater x judge matrix, family contrast"},
        ),
    log:
        f"{LOGS}/cwpor/cross_judge.log",
    params:
        families=CWPOR["families"],
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_cross_judge"),
    script:
        "../workflow/scripts/cwpor_cross_judge.py"


rule cwpor_tables:
    input:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        calibration=f"{CWPOR_OUT}/calibration.parquet",
        judgments=CWPOR_JUDGMENTS,
        responses=CWPOR_RESPONSES,
        questions=f"{CWPOR_OUT}/questions.parquet",
    output:
        summary_md=f"{CWPOR_OUT}/tables/summary.md",
        summary_csv=report(
            f"{CWPOR_OUT}/tables/summary.csv",
            caption="../report/captions/cwpor_summary.rst",
            category="CW-POR",
            subcategory="Tables",
            labels={"table": "summary per model and word limit"},
        ),
        examples=report(
            f"{CWPOR_OUT}/tables/fig3_examples.md",
            caption="../report/captions/cwpor_examples.rst",
            category="CW-POR",
            subcategory="Tables",
            labels={"table": "Fig. 3 example debates"},
        ),
    log:
        f"{LOGS}/cwpor/tables.log",
    params:
        level=CWPOR["ci_level"],
        headline_por=CWPOR["headline_por"],
        calibration=CWPOR["calibration"],
        example_categories=CWPOR["example_categories"],
        examples_per_category=CWPOR["examples_per_category"],
        library=library_code("cwpor_tables"),
    script:
        "../workflow/scripts/cwpor_tables.py"


rule cwpor_figures:
    input:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        breakdowns=f"{CWPOR_OUT}/breakdowns.parquet",
    output:
        [
            report(
                f"{CWPOR_OUT}/figures/{figure}.png",
                caption=f"../report/captions/cwpor_{figure}.rst",
                category="CW-POR",
                subcategory="Figures",
                labels={"figure": figure},
            )
            for figure in CWPOR_FIGURES
        ],
        expand(f"{CWPOR_OUT}/figures/{{figure}}.svg", figure=CWPOR_FIGURES),
    log:
        f"{LOGS}/cwpor/figures.log",
    params:
        out_dir=lambda wc, output: str(Path(output[0]).parent),
        level=CWPOR["ci_level"],
        headline_por=CWPOR["headline_por"],
        library=library_code("cwpor_figures"),
    script:
        "../workflow/scripts/cwpor_figures.py"


ALL_TARGETS.extend(
    [
        f"{CWPOR_OUT}/metrics.parquet",
        f"{CWPOR_OUT}/tables/summary.md",
        f"{CWPOR_OUT}/tables/fig3_examples.md",
        f"{CWPOR_OUT}/tables/calibration.md",
    ]
    + expand(f"{CWPOR_OUT}/figures/{{figure}}.png", figure=CWPOR_FIGURES)
    + expand(
        f"{CWPOR_OUT}/figures/reliability_{{signal}}.png", signal=CALIBRATION_SIGNALS
    )
    + ([f"{CWPOR_OUT}/tables/cross_judge.md"] if CROSS_JUDGING else [])
    + ([f"{CWPOR_OUT}/tables/rebuttal.md"] if REBUTTAL_PROTOCOLS else [])
)
