"""The commands, one module each with `add_arguments(parser)` and `run(args) -> int`. This table is all that
`llamabench --help` loads: the CLI imports a command's module only when that command runs."""

SUMMARY = {  # the command and its one-line help, in the order --help lists them
    "inspect": "layer layout and theoretical KV / recurrent footprint from GGUF metadata",
    "twin": "write a tiny GGUF with a real model's layer layout and cache geometry",
    "verify": "compare the theoretical KV / recurrent sizes with what llama.cpp itself reports",
    "bench": "create real llama.cpp contexts, record what they allocate and how fast they run at depth",
    "fit": "does n_ctx fit on a 16 / 24 GB card beside the weights, and with which settings?",
    "roofline": "predict decode t/s at depths up to n_ctx from bytes per token, for a card or a bandwidth",
    "quality": ("what each lossy choice (KV type, quant) costs in quality: KL divergence, PPL and same top token, "
                "as llama-perplexity measures them"),
    "report": "write kv_efficiency records, a markdown report and plots from result files (runs nothing)",
    "demo": ("the main job: inspect, verify, fit, a bench at depth and the report "
             "(default: the built-in Qwen3.5-35B-A3B)"),
}
