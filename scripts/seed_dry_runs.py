"""Write the shipped dry runs of the built-in default's fit (llamabench/jobs/seeds/): the
default `llamabench fit MODEL` run with an empty cache and no seeds on the emulated card, its dry-run cache entries
stored under the twin's name. A user's first default fit then reads llama.cpp's answers instead of asking again.

    .venv/bin/python scripts/seed_dry_runs.py [MODEL ...]      (default: the built-in default, qwen3-5-35b-a3b)

Run it again whenever the twin writer, llama.cpp or the fit's dry runs change: tests/llama_cpp/test_seed.py fails
until then (the seed no longer matches the twin), and asks llama.cpp a sample of the seed's answers again.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = ("qwen3-5-35b-a3b",)


def main(models: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LLAMABENCH_CACHE_DIR"] = tmp
        sys.path.insert(0, str(ROOT))
        import llamabench as lb
        from llamabench.jobs.fit import dry_run_cache
        from llamabench.jobs.seeds import store as seeding
        from llamabench.jobs.source import resolve
        from llamabench.jobs.twin import generic
        from llamabench.jobs.twin.shape import published_weights

        out = seeding.SEEDS
        seeding.SEEDS = Path(tmp) / "no-seeds"  # every answer asked of llama.cpp, the shape twin checked
        out.mkdir(exist_ok=True)
        listings: dict = {}
        asked = generic.listed_tensors

        def listing(metadata):  # llama.cpp's tensor list of each twin written, kept by the keys it was asked for
            keys, tensors = asked(metadata)
            listings[seeding.keys_digest(metadata)] = {
                "added": {k: [v.type, list(v.value) if isinstance(v.value, tuple) else v.value]
                          for k, v in keys.items() if k not in metadata},
                "tensors": [[t.name, list(t.shape), t.ggml_type] for t in tensors]}
            return keys, tensors

        generic.listed_tensors = listing
        for model in models:
            record = lb.fit(model)
            shape = published_weights(resolve(model)).path
            cache = dry_run_cache.DryRunCache(str(shape), seeding.SEEDED_DEVICES)
            name = dry_run_cache.twin_name(str(shape))
            if not cache.entries or name is None:
                raise SystemExit(f"{model}: the fit left no dry runs to seed")
            for old in out.glob("*.json"):  # one seed per model: the stale one of an earlier twin goes
                if old.name != seeding.LISTINGS and json.loads(old.read_text()).get("model") == model:
                    old.unlink()
            path = out / seeding.seed_name(name, seeding.SEEDED_DEVICES)
            path.write_text(json.dumps({"model": model, "twin": name, "entries": cache.entries}, sort_keys=True) + "\n")
            print(f"{model}: {len(cache.entries)} dry runs ({record.fit.dry_runs} asked of llama.cpp) -> {path}")
        (out / seeding.LISTINGS).write_text(json.dumps(listings, sort_keys=True) + "\n")
        print(f"{len(listings)} tensor lists -> {out / seeding.LISTINGS}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(DEFAULT_MODELS))
