"""One model and the pair: a model with its KV cache, loading a pair at a precision (the draft networks and their
assets among it), the weight-only int8 path, attention for verification passes, batch invariance, timing a model's
passes, prompts through the chat template."""
