"""The CPU fast path: the engine's own kernels and the passes built on them.

    kernels     C kernels: batch-invariant linear layers, tree attention, row top-k, cache moves
    forward     the target's decoder forward in a few calls per layer (layer.c)
    head_pass   the draft head's pass in a few calls
    fused_pass  a whole drafting pass (head, draft LM head, top k) as one kernel call
"""
