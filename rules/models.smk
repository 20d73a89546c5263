rule prepare_model:
    input:
        tokenizer=tokenizer_input,
    output:
        fingerprint="resources/models/{model}/fingerprint.json",
    log:
        "logs/models/prepare_{model}.log",
    benchmark:
        "benchmarks/rules/models/prepare_{model}.tsv"
    resources:
        # a hub download streams to disk (runtime: ~62 GB at 20 MB/s); a GGUF conversion holds the model
        mem_mb=lambda wc: PREPARE_MEM_MB[model_spec(wc.model).source],
        runtime=lambda wc: 240 if model_spec(wc.model).source == "hf" else 60,
    params:
        # only what defines the model's files: a run setting (batch size, backend, ...) or a chat-template
        # switch prepares nothing
        spec=lambda wc: model_spec(wc.model).file_settings(),
        out_dir=lambda wc: model_dir(wc.model),
        tokenizer_dir=lambda wc, input: (
            str(Path(input.tokenizer[0]).parent) if input.tokenizer else None
        ),
        library=library_code("prepare_model"),
    script:
        "../workflow/scripts/prepare_model.py"
