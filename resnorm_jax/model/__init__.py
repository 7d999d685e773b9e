"""The model: a scanned decoder-only Transformer (transformer, model_def) whose norm, placement
and residual are chosen by name from the variant registry (variants/). Imports `config` only."""
