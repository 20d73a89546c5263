"""ER-Audit part 2, the audit (`rules/audit.smk`): readout scores on paraphrases, degradation scores,
counterexample search, anytime-valid bounds, sweeps, figures and Table 3.
"""
