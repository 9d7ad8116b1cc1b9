"""MODEL as a positional or as llama.cpp's -m/--model, once. Light on purpose: the CLI imports it before any
command runs."""

from __future__ import annotations

import argparse

from ..core.errors import UsageError


class OnceModel(argparse.Action):
    """MODEL, from the positional or from -m/--model: a second, different model is a usage error."""

    def __call__(self, parser, namespace, value, option_string=None):
        if value is None or value is argparse.SUPPRESS:  # the positional left out: nothing to set
            return
        current = getattr(namespace, self.dest, None)
        if current is not None and current != parser.get_default(self.dest) and current != value:
            parser.error(f"two models: '{current}' and '{value}'; give one")
        setattr(namespace, self.dest, value)


def settle_model(args: argparse.Namespace) -> None:
    """MODEL from -hf where given (hf://OWNER/REPO[:QUANT]); a UsageError where a command that takes MODEL was given
    none, or two."""
    hf = getattr(args, "hf_repo", None)
    if hf is not None:
        if args.model is not None and args.model != getattr(args, "model_default", None) and args.model != hf:
            raise UsageError(f"two models: '{args.model}' and -hf {hf.removeprefix('hf://')}; give one")
        args.model = hf
    if hasattr(args, "model") and args.model is None:
        raise UsageError("no model given: write MODEL (a GGUF file, a URL or a catalog id) or -m MODEL")
