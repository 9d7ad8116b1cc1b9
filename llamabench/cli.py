"""Entry point: registers the commands and turns user errors into one line."""

from __future__ import annotations

import argparse
import os
import sys

from .commands import bench, demo, fit, inspect, report, roofline, twin, verify
from .errors import LlamabenchError
from .versions import __version__

MODULES = {"inspect": inspect, "twin": twin, "verify": verify, "bench": bench, "fit": fit, "roofline": roofline,
           "report": report, "demo": demo}
COMMANDS = tuple(MODULES)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (and exit code 2), not a usage block."""

    def error(self, message: str):
        self.exit(2, f"llamabench: error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="llamabench",
        description="What a GGUF model costs in memory at long context, and what llama.cpp really allocates.",
    )
    parser.add_argument("--version", action="version", version=f"llamabench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in MODULES.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP, epilog=module.EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except LlamabenchError as exc:
        if os.environ.get("LLAMABENCH_DEBUG") == "1":
            raise
        hint = f" (hint: {exc.hint})" if exc.hint else ""
        print(f"llamabench: error: {exc}{hint}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    except BrokenPipeError:  # e.g. `llamabench inspect ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("llamabench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
