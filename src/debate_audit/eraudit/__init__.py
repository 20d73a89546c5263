"""ER-Audit: debate transcripts, verifier fine-tuning, forced-choice readout and the black-box audit.

One subpackage per stage of the workflow, named like its rule file (`rules/<stage>.smk`):

- `common`: what every stage shares (the verifiers, the grid, the forced-choice readout, rule ids)
- `debate`: splits, debate transcripts, quote checks, leak detection, best-of-K selection, release import
- `verifier`: adjudication targets, training rows, fine-tuning objectives and loop (one process or several),
  Table 1, loss curves
- `paraphrase`: paraphrase prompts, validation, pools, sentence embeddings
- `audit`: scores, degradation statistics and sequential bounds, figures, Table 3

Imports run from a later stage to an earlier one only (debate -> verifier -> paraphrase -> audit; any
stage may use `common`): the audit reads the verifier's readout, never the other way round.
"""
