"""Entry point: registers the commands and turns user errors into one line.

Only the command that runs is imported (`importlib`, by its name in `commands.SUMMARY`): `llamabench --help`
loads this module and the commands' one-line table, not llama.cpp's binding, gguf or numpy."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import signal
import sys
import threading

from .commands import SUMMARY
from .core.errors import LlamabenchError, UsageError
from .core.safe_text import escaped
from .settings.model_arg import settle_model
from .world.versions import __version__

COMMANDS = tuple(SUMMARY)


def command_module(name: str):
    """The module of one command (llamabench/commands/NAME.py)."""
    return importlib.import_module(f"{__package__}.commands.{name}")


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (and exit code 2), not a usage block; no abbreviated options (`-m` is not `-mg`);
    a misspelt option or command gets a "did you mean"."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # a word that starts with a dash and a digit is a value (`--vram -3GiB` reaches --vram's own check), not an
        # unknown option ("expected one argument"): argparse's rule for negative numbers, widened; no option of
        # llamabench starts with a digit
        self._negative_number_matcher = re.compile(r"^-\d")

    command: str | None = None  # the command named on the line: the help an unrecognized option points to

    def error(self, message: str):
        where = f"{self.prog}: " if self.prog != "llamabench" else ""  # llamabench's own errors: no prefix twice
        helped = f"llamabench {self.command}" if self.prog == "llamabench" and self.command else self.prog
        self.exit(2, f"llamabench: error: {where}{message}{self._suggestion(message)} (see {helped} --help)\n")

    def _suggestion(self, message: str) -> str:
        words = re.findall(r"(?:unrecognized arguments|invalid choice): '?([^\s']+)", message)
        if not words:
            return ""
        known = [s for a in self._actions for s in a.option_strings]
        for a in self._actions:  # the commands, and the options of the one that was built in full
            if isinstance(a, argparse._SubParsersAction):
                known += list(a.choices) + [s for p in a.choices.values() for b in p._actions for s in b.option_strings]
        close = difflib.get_close_matches(words[0], known, n=1, cutoff=0.6)
        return f"; did you mean {close[0]}?" if close else ""


DEADLINES = """deadlines: every wait on something outside the tool ends, in one line (seconds; the variables are set in
the environment):
  LLAMABENCH_HTTP_TIMEOUT  a remote header read, a hub listing, each JSON answer of a llama-server (default 120)
  LLAMABENCH_RPC_TIMEOUT   a --rpc host's (or an emulated card's) answer to llama.cpp (default 300)
  LLAMABENCH_HTTP_LOW_SPEED  a remote read that gets fewer BYTES than that in SECONDS fails (default 1024/15)
  bench --runtime llama-server: 300 to listen once started; a /completion stream 3600 between reads, ended
  at its last event or after 64 events without a token
  quality: 300 to load the vocabularies and tokenize the text (-f)
  llama.cpp's children: 120 to list a model's tensors or ask its quantize recipe, 20 to match -ot patterns, 30 for a
  --rpc host's memory; 120 to compile the tool's C++ helpers
caps: what the tool reads whole is bounded, and a file past it is refused in one line before the work starts:
  quality -f TEXT: 4 MiB (Gemma 3's tokenizer takes some 130 s for 4 MiB of prose on 2 cores)
  roofline --calibrate FILE: 64 MiB of results (about 13 s to read and check on 2 cores)
  LLAMABENCH_CATALOG: a models.toml of 16 MiB"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with `only` one command's options in full and the others by name and help alone."""
    parser = OneLineParser(
        prog="llamabench",
        description="What a GGUF model costs in memory at long context, and what llama.cpp really allocates.",
        epilog=DEADLINES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"llamabench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, summary in SUMMARY.items():
        if only is not None and name != only:
            sub.add_parser(name, help=summary, description=summary)
            continue
        module = command_module(name)
        p = sub.add_parser(name, help=summary, description=summary, epilog=module.EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return parser


# llama-server flags the pinned llama.cpp does not have, each said in words (argparse would read `-cd 4096` as `-c d`)
ABSENT_FLAGS = {
    flag: "this llama.cpp (llama-cpp-python 0.3.36) has no -cd: the draft context takes the target's n_ctx "
          "(common/speculative.cpp:2530), and llamabench sizes it so; leave out -cd"
    for flag in ("-cd", "--ctx-size-draft")}


def absent_flag(argv: list[str]) -> str | None:
    """Why a flag of the line is one this llama.cpp does not have; None where none is."""
    return next((ABSENT_FLAGS[word.split("=")[0]] for word in argv if word.split("=")[0] in ABSENT_FLAGS), None)


def chosen_command(argv: list[str]) -> str:
    """The command named on the line (the first word that is one), or "" for `llamabench --help` and errors."""
    return next((word for word in argv if word in SUMMARY), "") if argv else ""


class _Ended:
    """SIGTERM and SIGHUP (a closed terminal) end the tool as Ctrl-C does: every `finally` runs, so the children it
    started (the emulated card, llama.cpp's processes) are stopped and what was measured is kept; exit 128 + signal."""

    SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

    def __init__(self):
        self.signum = signal.SIGINT
        self.previous: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self.previous[signum] = signal.signal(signum, self._raise)
        return self

    def _raise(self, signum, frame):
        self.signum = signum
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        return False


def main(argv: list[str] | None = None) -> int:
    with _Ended() as ended:
        return _main(argv, ended)


def _main(argv: list[str] | None, ended: _Ended) -> int:
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(only=chosen_command(argv))
        parser.command = chosen_command(argv)
        if (absent := absent_flag(argv)) is not None:
            parser.error(absent)
        args = parser.parse_args(argv)
        try:
            settle_model(args)
        except UsageError as exc:
            parser.error(f"{args.command}: {exc}")
        code = args.run(args)
        if code == 128 + signal.SIGINT and ended.signum != signal.SIGINT:
            code = 128 + int(ended.signum)  # a command that kept its results on SIGTERM / SIGHUP: 143 / 129
        sys.stdout.flush()  # a full or closed stdout fails here, inside the handlers, not at exit
        return code
    except LlamabenchError as exc:
        if os.environ.get("LLAMABENCH_DEBUG") == "1":
            raise
        hint = f" (hint: {exc.hint})" if exc.hint else ""
        # one line, whatever a path or a file's string held (a newline, an escape sequence): escaped at this door
        print(escaped(f"llamabench: error: {exc}{hint}"), file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    except BrokenPipeError:  # e.g. `llamabench inspect ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("llamabench: interrupted" + ("" if ended.signum == signal.SIGINT else
                                           f" ({signal.Signals(ended.signum).name})"), file=sys.stderr)
        return 128 + int(ended.signum)
    except OSError as exc:  # the machine's, not the input's: a full disk or stdout, a failing device
        if os.environ.get("LLAMABENCH_DEBUG") == "1":
            raise
        _quiet_stdout()
        where = f" ({escaped(str(exc.filename))})" if exc.filename else ""
        print(f"llamabench: error: cannot go on: {exc.strerror or type(exc).__name__}{where}", file=sys.stderr)
        return 1


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's flush at exit does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
