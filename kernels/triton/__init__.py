"""Triton kernels of the chunked gated delta rule and DeltaProduct (forward and backward); see function.py for the
entry points."""
from .function import chunk_gated_delta_product_triton, chunk_gated_delta_rule_triton

__all__ = ["chunk_gated_delta_product_triton", "chunk_gated_delta_rule_triton"]
