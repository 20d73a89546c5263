"""CW-POR: single-turn persuasion debates on TruthfulQA (neutral vs persuasive agent, one judge).

Stages, one module each: `questions` (subset, falsehood, answer order) -> `debates` (agent responses)
-> `judge` (text judgment + log-likelihood confidence) -> `metrics` (POR, CW-POR, bootstrap CIs)
-> `figures` / `tables`. Prompt templates live in `prompts`, parsing of the judge's text in `parsing`.
"""
