"""debate-audit: measure how LLM judges and verifiers get misled (CW-POR and ER-Audit)."""

__version__ = "0.1.0"
