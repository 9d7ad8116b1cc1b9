"""The machine's memory bandwidth, measured: a STREAM-style copy and triad over arrays far larger than cache.

One numpy thread per CPU core, each on its own slice, best of several passes. Copy moves 16 bytes per
float64 element; numpy's triad runs in two passes (c*s -> a, a+b -> a) and moves 40. On a GPU build the card's own
figure comes from NVML instead (memory clock x bus width), see `gpu_peak_gbps`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import threading
import time
from dataclasses import asdict, dataclass

import numpy as np

from ..core.errors import UntrustedCache
from .paths import cache_dir
from .private import trusted_file, write_private

N_BYTES_PER_ARRAY = 256 * 2**20  # 3 arrays of 256 MiB: well past any CPU cache
PASSES = 5


@dataclass(frozen=True)
class Bandwidth:
    copy_gbps: float
    triad_gbps: float
    threads: int
    method: str


@dataclass(frozen=True)
class PeakBandwidth:
    """The peak a bench's MBU is measured against: NVML's figure on a GPU, the probe's best on a CPU."""

    peak_gbps: float
    method: str
    probe: Bandwidth | None = None


def _timed(fn, slices, threads: int) -> float:
    barrier = threading.Barrier(threads + 1)
    done = []

    def work(part):
        barrier.wait()
        fn(part)
        done.append(time.perf_counter())

    workers = [threading.Thread(target=work, args=(s,)) for s in slices]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    return max(done) - start


def measure(threads: int | None = None, n_bytes: int = N_BYTES_PER_ARRAY, passes: int = PASSES) -> Bandwidth:
    threads = threads or os.cpu_count() or 1
    n = n_bytes // 8
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    bounds = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    scalar = 3.0

    def copy(part):
        lo, hi = part
        np.copyto(a[lo:hi], b[lo:hi])

    def triad(part):
        lo, hi = part
        np.multiply(c[lo:hi], scalar, out=a[lo:hi])
        np.add(a[lo:hi], b[lo:hi], out=a[lo:hi])

    best_copy = min(_timed(copy, bounds, threads) for _ in range(passes))
    best_triad = min(_timed(triad, bounds, threads) for _ in range(passes))
    # the two-step triad moves c -> a, then a + b -> a: 40 bytes per element; STREAM's triad counts 24
    return Bandwidth(copy_gbps=round(16 * n / best_copy / 1e9, 2), triad_gbps=round(40 * n / best_triad / 1e9, 2),
                     threads=threads, method=f"numpy STREAM-style copy and triad, {threads} threads, 3 x "
                                          f"{n_bytes // 2**20} MiB float64, best of {passes}")


CACHE_SECONDS = 24 * 3600


def cached_measure() -> Bandwidth:
    """`measure()`, at most once a day per machine (the probe moves 768 MiB per pass: seconds on a laptop)."""
    path = cache_dir() / "bandwidth.json"
    key = f"{platform.node()}|{platform.processor() or platform.machine()}|{os.cpu_count()}"
    try:
        if not trusted_file(path):
            raise FileNotFoundError(path)
        stored = json.loads(path.read_text())
        if stored.get("key") == key and time.time() - stored.get("time", 0) < CACHE_SECONDS:
            cached = Bandwidth(**stored["bandwidth"])
            if all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0
                   for v in (cached.copy_gbps, cached.triad_gbps)):
                return cached  # else a damaged cache entry: measure again
    except (OSError, ValueError, TypeError, KeyError, AttributeError, UntrustedCache):
        pass  # no cache, a damaged one, or one that is not the user's own: measure again
    result = measure()
    try:  # through a fresh file renamed over: a link planted at the path is replaced, its target never written
        write_private(path, json.dumps({"key": key, "time": time.time(), "bandwidth": asdict(result)}))
    except (OSError, UntrustedCache):
        pass
    return result
