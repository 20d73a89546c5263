"""ER-Audit part 1, debates (`rules/debate.smk`): the story-level split, honest and adversarial debate
transcripts, quote verification, leak detection, best-of-K selection, and the release's own transcripts.
"""
