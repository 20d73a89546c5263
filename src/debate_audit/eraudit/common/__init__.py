"""What every ER-Audit stage shares: the verifiers (V_base and its variants), the grid of architectures x
lengths x L_qh weights, the forced-choice readout P[V(q) = a], and the content ids of rules.
"""
