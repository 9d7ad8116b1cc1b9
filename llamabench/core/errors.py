"""User-facing errors. `cli.main` turns each into one line on stderr and exit code 1."""


class LlamabenchError(Exception):
    """Base class: the message is written for the user; `hint` says what to do."""

    hint: str | None = None

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class BadModelFile(LlamabenchError):
    """A file that is not a readable GGUF, or whose metadata is missing or absurd."""


class UnsupportedArchitecture(LlamabenchError):
    """A GGUF architecture whose layer layout llamabench does not know."""


class CatalogError(LlamabenchError):
    """A malformed models.toml entry, or an id that is not in it."""


class UsageError(LlamabenchError):
    """A bad option value (exit code 2, like argparse)."""

    exit_code = 2


class EngineError(LlamabenchError):
    """llama.cpp refused or failed to create a model or a context."""


class ContextRefused(EngineError):
    """llama.cpp could not create one context of a loaded model (it refused it, or aborted creating it)."""


class Stalled(EngineError):
    """A llama.cpp child that gave no answer within its deadline (a --rpc host that stopped answering), and was
    stopped: not a context llama.cpp refused, and every other context would wait as long."""


class UntrustedCache(LlamabenchError):
    """A cache folder or file the user does not own, that others can write, or that is a link: not used."""


class DeadlinePassed(LlamabenchError):
    """Work stopped at its deadline (a sweep of many quants): the message says how far it got, the hint how to ask
    for less."""
