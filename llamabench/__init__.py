"""llamabench: what a GGUF model costs in memory at long context, and what llama.cpp really allocates."""

__version__ = "0.1.0"
