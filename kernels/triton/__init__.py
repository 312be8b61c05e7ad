"""Triton kernels of the chunked gated delta rule (forward and backward); see function.py for the entry point."""
from .function import chunk_gated_delta_rule_triton

__all__ = ["chunk_gated_delta_rule_triton"]
