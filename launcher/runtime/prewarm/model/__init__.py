"""What the stage finds and runs on the loaded model and its runtime, outside the serving
batches: where the model keeps its EXL3 MoE units (``moe_units``), each MoE block's forward
at every token bucket (``moe_buckets``), vLLM's ``torch.compile``'d helpers outside the
model (``compiled_helpers``) and what a kernel's call sites pass, read from their source
(``call_sites``).
"""
