"""`quality`: what each lossy choice (a KV type, the weights' quant) costs, measured as llama-perplexity measures it."""
