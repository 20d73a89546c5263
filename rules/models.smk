rule prepare_model:
    input:
        tokenizer=tokenizer_input,
    output:
        fingerprint="resources/models/{model}/fingerprint.json",
    log:
        "logs/models/prepare_{model}.log",
    benchmark:
        "benchmarks/rules/models/prepare_{model}.tsv"
    conda:
        "../envs/debate-audit.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        # only what defines the model's numbers: a run setting (batch size, backend, ...) prepares nothing
        spec=lambda wc: model_spec(wc.model).number_settings(),
        out_dir=lambda wc: model_dir(wc.model),
        tokenizer_dir=lambda wc, input: (
            str(Path(input.tokenizer[0]).parent) if input.tokenizer else None
        ),
        library=library_code("prepare_model"),
    script:
        "../workflow/scripts/prepare_model.py"
