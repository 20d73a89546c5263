"""ER-Audit part 1, verifiers (`rules/verifier.smk`): adjudication targets, the training rows (which items
train, their targets, their token ids), the L_lm / L_fc / L_qh objectives, fine-tuning V_honest / V_adv /
V_org, Table 1 and the loss curves.
"""
