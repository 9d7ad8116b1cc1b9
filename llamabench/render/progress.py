"""A one-line progress display for sweeps, on stderr; silent when stderr is not a terminal, unless asked for a plain
line now and then (`plain_every_s`: the demo's long steps, in a log)."""

from __future__ import annotations

import sys
import time


class Progress:
    """A one-line progress display on stderr; silent when stderr is not a terminal."""

    def __init__(self, n_tests: int, enabled: bool, plain_every_s: float | None = None):
        self.enabled = enabled
        self.plain = _Plain(plain_every_s)
        self.n_tests = n_tests
        self.done = 0
        self.start = time.perf_counter()
        self.cell = ""

    def _show(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K" + text)
            sys.stderr.flush()
        else:
            self.plain(text)

    def _eta(self) -> str:
        if not self.done:
            return "ETA ?"
        elapsed = time.perf_counter() - self.start
        return f"ETA {elapsed / self.done * (self.n_tests - self.done):.0f}s"

    def __call__(self, kind: str, data) -> None:
        if kind == "plan":
            self.n_tests = data["tests"]
        elif kind == "cell":
            c = data["params"]
            self.cell = (f"cell {data['index'] + 1}/{data['total']} n_ctx={c.n_ctx} K={c.type_k} V={c.type_v} "
                         f"fa={int(c.flash_attn)}")
            self._show(f"[{self.cell}] creating context")
        elif kind == "fill":
            rate = data["done"] / max(data["seconds"], 1e-9)
            left = (data["total"] - data["done"]) / rate if rate else 0
            self._show(f"[{self.cell}] filling to depth {data['depth']}: {data['done']}/{data['total']} tokens, "
                       f"{rate:.0f} t/s, fill ETA {left:.0f}s")
        elif kind == "measured":
            m = data["measurement"]
            self.done += 1
            status = "ok" if m.samples_ns and m.reason is None else "FAILED"
            self._show(f"[{self.cell}] {m.test.name} {status} ({self.done}/{self.n_tests} tests, {self._eta()})")

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


class StatusLine:
    """A line on stderr rewritten in place, shown once the work has taken a second; silent off a terminal."""

    def __init__(self, enabled: bool, after_s: float = 1.0, plain_every_s: float | None = None):
        self.enabled, self.after_s = enabled, after_s
        self.plain = _Plain(plain_every_s)
        self.start = time.perf_counter()
        self.shown = False

    def __call__(self, text: str) -> None:
        elapsed = time.perf_counter() - self.start
        if self.enabled and elapsed >= self.after_s:
            sys.stderr.write(f"\r\033[K{text} ({elapsed:.0f} s)")
            sys.stderr.flush()
            self.shown = True
        elif not self.enabled:
            self.plain(f"{text} ({elapsed:.0f} s)")

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


class _Plain:
    """Off a terminal: the latest progress as a plain line, at most one every `every_s` seconds (None: never)."""

    def __init__(self, every_s: float | None):
        self.every_s = every_s
        self.last = time.perf_counter()

    def __call__(self, text: str) -> None:
        now = time.perf_counter()
        if self.every_s is not None and now - self.last >= self.every_s:
            print(f"  ... {text}", file=sys.stderr, flush=True)
            self.last = now
