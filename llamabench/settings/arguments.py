"""argparse options generated from the one schema: flags, defaults and help as declared there."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.errors import UsageError
from .model_arg import OnceModel
from .params import SCHEMA, OutputFormat
from .sweep import parse_value
from .values import INT_PARSERS


class _ArgType:
    """An argparse `type` that turns the schema's UsageError into argparse's one-line usage error."""

    def __init__(self, name: str, listed: bool):
        self.name, self.listed = name, listed
        self.__name__ = name

    def __call__(self, text: str):
        try:
            return parse_value(self.name, text, listed=self.listed)
        except UsageError as exc:
            message = str(exc).removeprefix(f"{self.name}: ")
            raise argparse.ArgumentTypeError(message + (f" ({exc.hint})" if exc.hint else "")) from None


class _Negated(_ArgType):
    """`-nr 1` is `--repack 0`."""

    def __call__(self, text: str):
        value = super().__call__(text)
        return tuple(not v for v in value) if self.listed else not value


class _NegatedFlag(argparse.Action):
    """A negated flag alone, as llama-server spells it (`--no-op-offload`, `-nr`), or with llama-bench's 0|1. A word
    after it that is no such value is the MODEL it stood before (`--no-op-offload model.gguf`)."""

    def __init__(self, option_strings, dest, *, negate: _Negated, **kwargs):
        self.negate = negate
        super().__init__(option_strings, dest, nargs="?", **kwargs)

    def __call__(self, parser, namespace, value, option_string=None):
        alone = (False,) if self.negate.listed else False
        if value is None:
            setattr(namespace, self.dest, alone)
            return
        try:
            setattr(namespace, self.dest, self.negate(value))
        except argparse.ArgumentTypeError as exc:
            if not hasattr(namespace, "model") or str(value).strip().lower() in ("on", "off", "true", "false"):
                parser.error(f"argument {option_string}: {exc}")
            setattr(namespace, self.dest, alone)
            OnceModel(["model"], "model")(parser, namespace, value)


class _Overrides(argparse.Action):
    """-ot given several times: each appends its overrides, in order (common/arg.cpp parse_tensor_buffer_overrides)."""

    def __call__(self, parser, namespace, value, option_string=None):
        before = getattr(namespace, self.dest, None) or ()
        setattr(namespace, self.dest, tuple(before) + tuple(value))


class _OlderLoadFlag(argparse.Action):
    """--no-mmap and --mlock as older llama.cpp builds spell them: --load-mode none, mmap+mlock, and mlock with both
    (the load mode that replaced them: common/arg.cpp:2690-2708)."""

    def __call__(self, parser, namespace, value, option_string=None):
        mode = getattr(namespace, self.dest, "auto")
        mlock = option_string == "--mlock" or mode in ("mlock", "mmap+mlock")
        mapped = option_string != "--no-mmap" and mode not in ("none", "mlock", "dio")
        setattr(namespace, self.dest, ("mmap+mlock" if mapped else "mlock") if mlock else "none")


def add_arguments(parser: argparse.ArgumentParser, names: Iterable[str], *, lists: Iterable[str] = (),
                  defaults: Mapping[str, Any] | None = None, helps: Mapping[str, str] | None = None,
                  optional_model: str | None = None) -> None:
    """argparse options for these schema names; `lists` take comma lists and ranges; per-command
    `defaults` (for n_ctx only None: a context that follows the tests, as bench's) and `helps` override the
    schema's."""
    lists, defaults, helps = set(lists), dict(defaults or {}), dict(helps or {})
    if defaults.get("n_ctx", None) is not None:
        raise ValueError("n_ctx has one default: settings.params.DEFAULT_N_CTX (or None: sized to the tests)")
    context = parser.add_argument_group("llama.cpp parameters (as llama-bench spells them)")
    for name in names:
        spec = SCHEMA[name]
        listed = name in lists
        default = defaults.get(name, spec.default)
        if listed and default is not None and not isinstance(default, tuple):
            default = (default,)
        shown = spec.shown_default or (",".join(spec.show(v) for v in default) if isinstance(default, tuple)
                                       else spec.show(default))
        ranges = spec.parse in INT_PARSERS
        help_text = helps.get(name, spec.help) + (
            (", comma list or range" if ranges else ", comma list") if listed else "")
        if default is not None and default != () and spec.action is None:
            help_text += f" (default {shown})"
        target = context if spec.context else parser
        if name == "result_files":
            target.add_argument("result_files", nargs="+", type=Path, metavar="RESULTS", help=help_text)
            continue
        if name == "model":
            shown = help_text + (f" (default {optional_model})" if optional_model is not None else "")
            # the positional sets nothing when left out (SUPPRESS), so -m before or after it is never overwritten
            target.add_argument("model", metavar="MODEL", nargs="?", default=argparse.SUPPRESS, action=OnceModel,
                                help=shown)
            target.add_argument(*spec.flags, dest="model", metavar="MODEL", action=OnceModel,
                                help="the same as MODEL, as llama.cpp's tools spell it")
            hf = SCHEMA["hf_repo"]  # the model too: settle_model makes it MODEL
            target.add_argument(*hf.flags, dest="hf_repo", metavar=hf.metavar, type=_ArgType("hf_repo", False),
                                default=None, help=hf.help)
            # where OnceModel (and settle_model, for -hf) finds it: a default is not a second model
            parser.set_defaults(model=optional_model, model_default=optional_model)
            continue
        if spec.action == "store_true":
            target.add_argument(*spec.flags, dest=name, action="store_true", default=default, help=help_text)
            continue
        if spec.negated:
            # alone as llama-server spells them (-nr, --no-op-offload), or with a value as llama-bench (-nr 1)
            target.add_argument(*spec.negated, dest=name, action=_NegatedFlag, negate=_Negated(name, listed),
                                metavar="0|1", help=f"the inverse of {spec.flags[0]}: alone as llama-server spells "
                                                    "it, or 0|1 as llama-bench")
        if _add_special(target, name, default, help_text):
            continue
        target.add_argument(*spec.flags, dest=name, type=_ArgType(name, listed), default=default,
                            metavar=spec.metavar or name.upper(), help=help_text)


def _add_special(target, name: str, default, help_text: str) -> bool:
    """The options argparse takes in a way of their own: -o with --json, --compare and -ot repeated, --load-mode
    with its older spellings. False for the rest."""
    spec = SCHEMA[name]
    if name == "output":
        target.add_argument(*spec.flags, dest=name, type=_ArgType(name, False), default=default,
                            metavar=spec.metavar, help=help_text)
        target.add_argument("--json", dest=name, action="store_const", const=OutputFormat.JSON,
                            help="same as -o json")
        return True
    if name == "tensor_overrides":
        target.add_argument(*spec.flags, dest=name, action=_Overrides, type=_ArgType(name, False), default=(),
                            metavar=spec.metavar, help=help_text)
        return True
    if name == "load_mode":
        target.add_argument(*spec.flags, dest=name, type=_ArgType(name, False), default=default,
                            metavar=spec.metavar, help=help_text)
        target.add_argument(*spec.older, dest=name, action=_OlderLoadFlag, nargs=0,
                            help="older llama.cpp builds' spellings: --load-mode none, mmap+mlock (mlock: both)")
        return True
    if name == "compare":
        target.add_argument(*spec.flags, dest=name, action="append", type=_ArgType(name, False), default=[],
                            metavar=spec.metavar, help=help_text + " (repeatable)")
        return True
    return False
