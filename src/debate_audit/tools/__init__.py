"""Operator tools: the config check, the cost plan, the GPU smoke check."""
