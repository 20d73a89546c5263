"""ER-Audit: debate transcripts, verifier fine-tuning, forced-choice readout and the black-box audit."""
