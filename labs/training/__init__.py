"""The training path every lab shares: data, models, format pass, recipe, vLLM CPU shim, evaluation, curves, pre-flight."""
