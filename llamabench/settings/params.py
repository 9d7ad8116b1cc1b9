"""One parameter schema: every option of every command declared once, as llama.cpp names it.

`Params` holds the llama.cpp model and context parameters of one configuration (the fields of
`llama_context_params` / `llama_model_params` that llamabench sets, and llama-bench's threadpool). Each of its
fields is declared once, with its option (flags, aliases, parser, help) beside its default; the job options
(`_OPTIONS`) are declared the same way. `SCHEMA` is generated from both. From it come:
- argparse for every command (`settings.arguments`), short flags as llama-bench spells them;
- the sweep expansion (`settings.sweep`): comma lists and llama-bench's ranges (`512-2048+512`, `1-16*2`);
- the keyword arguments of the Python API (`parse_value` takes 32768, "32k", [4096, "8k"] alike);
- the child job: a `Params.to_dict()`.
Pure: no file, no llama.cpp.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Callable, Mapping

from ..core import cache_types, serial
from ..core.errors import UsageError
from ..core.units import GIB, MIB
from .budget import Budget, budget, ram, reserve
from .tensor_overrides import LoadMode, parse_overrides
from .values import (
    Runtime,
    backend_name,
    cache_type,
    cpu_mask,
    device_list,
    endpoints,
    file_or_url,
    flash_attn,
    fraction,
    gpu_layers,
    hf_repo_model,
    int_at_least_minus_one,
    nonneg_float,
    nonneg_int,
    on_off,
    parse_runtime,
    path,
    percent,
    positive_float,
    positive_int,
    priority,
    spec_type,
    split_mode,
    tensor_split,
    text,
    threads,
    tokens,
)

DEFAULT_N_CTX = 131072  # the one default context length: 128k, the question this tool answers


class OutputFormat(StrEnum):
    TEXT = "text"  # a table for people
    MD = "md"
    CSV = "csv"
    JSON = "json"
    JSONL = "jsonl"


@dataclass(frozen=True)
class Param:
    """One option, declared once: where it lives, how it is spelled, parsed, defaulted and explained."""

    name: str  # the Params field, the API keyword and the argparse dest
    flags: tuple[str, ...]  # the first is the short flag as llama-bench spells it; the rest are aliases
    parse: Callable[[Any], Any]
    default: Any
    help: str
    context: bool = False  # a field of Params (a llama.cpp parameter), else a job option
    sweep: bool = True  # int-like values accept llama-bench's ranges in lists
    action: str | None = None  # "store_true" for flags without a value
    metavar: str | None = None
    negated: tuple[str, ...] = ()  # flags that set the inverse (llama-bench's -nr / --no-repack 1 for --repack 0)
    shown_default: str | None = None  # the default as a person writes it (512MiB, not 536870912)
    older: tuple[str, ...] = ()  # older llama.cpp builds' flags for it, taken too (--no-mmap, --mlock: --load-mode)

    def show(self, value) -> str:
        if isinstance(value, bool):
            return "on" if value else "off" if self.parse in (on_off, flash_attn) else str(int(value))
        if isinstance(value, Budget):
            return value.label
        if self.parse is tensor_split:
            return ",".join(f"{v:g}" for v in value)
        if isinstance(value, tuple):
            return ",".join(map(str, value))
        return str(value)


def tensor_overrides(value) -> tuple[str, ...]:
    return parse_overrides(value)


def load_mode(value) -> str:
    """--load-mode as llama.cpp's common/arg.cpp:2690-2708 takes it."""
    text = str(value).strip().lower()
    try:
        return LoadMode(text).value
    except ValueError:
        raise UsageError(f"'{value}' is not a load mode: " + ", ".join(m.value for m in LoadMode)) from None


def option(flags, parse, default, help, **kw) -> Any:
    """A field of Params declared with its option: the default once, the rest in the field's metadata."""
    spec = Param("", tuple(flags), parse, default, help, context=True, **kw)
    if isinstance(default, (list, dict, set)):
        raise TypeError("a Params default must be immutable")
    return dataclasses.field(default=default, metadata={"param": spec})


@dataclass(frozen=True)
class Params:
    """llama.cpp's parameters of one configuration: one context, one placement, one threadpool."""

    n_ctx: int = option(["-c", "--ctx", "--ctx-size", "--n-ctx"], tokens, DEFAULT_N_CTX,
                        "context length n_ctx: 4096 or 32k; 0 means the model's trained length")
    type_k: str = option(["-ctk", "--cache-type-k", "--type-k"], cache_type, "f16",
                         "K cache type: " + ", ".join(cache_types.CACHE_TYPES))
    type_v: str = option(["-ctv", "--cache-type-v", "--type-v"], cache_type, "f16",
                         "V cache type (a quantized V needs flash attention)")
    flash_attn: bool = option(["-fa", "--flash-attn"], flash_attn, True,
                              "flash attention: on|off|auto (auto, llama-server's default, is sized as on)")
    n_seq: int = option(["-np", "--n-seq", "--parallel"], positive_int, 1,
                        "n_seq_max: sequences (llama-server's slots)")  # n_seq_max
    kv_unified: bool = option(["-kvu", "--kv-unified"], on_off, False, "one KV stream shared by all sequences",
                              action="store_true")
    swa_full: bool = option(["--swa-full"], on_off, False, "full-size SWA cache (llama.cpp's C default is on!)",
                            action="store_true")
    n_batch: int = option(["-b", "--batch-size", "--n-batch"], positive_int, 2048, "n_batch: logical batch")
    n_ubatch: int = option(["-ub", "--ubatch-size", "--n-ubatch"], positive_int, 512, "n_ubatch: physical batch")
    n_rs_seq: int = option(["--n-rs-seq"], nonneg_int, 0,
                           "recurrent-state snapshots per sequence (speculative rollback)")
    n_outputs_max: int = option(["--n-outputs-max"], nonneg_int, 0, "outputs (logits) reserved per batch; "
                                "0: n_batch, as Llama() and llama-bench (llama-server: its slots)")
    n_outputs_max_per_seq: int = option(["--n-outputs-max-per-seq"], nonneg_int, 1,
                                        "outputs per sequence; 0: n_outputs_max")
    spec_type: str = option(["--spec-type"], spec_type, "none",
                            "llama-server's speculative decoding: draft-mtp (the model's own MTP / NextN layer: its "
                            "weights and a second context are sized), ngram-* (no device memory), none", sweep=False)
    spec_draft_n_max: int = option(["--spec-draft-n-max"], positive_int, 3,
                                   "draft tokens per step (llama-server's default 3): the outputs reserved and, with "
                                   "draft-mtp, the recurrent rollback planes", sweep=False)
    type_k_draft: str = option(["-ctkd", "--spec-draft-type-k", "--cache-type-k-draft"], cache_type, "f16",
                               "the draft (MTP) context's K cache type: llama-server's default f16, whatever -ctk",
                               sweep=False)
    type_v_draft: str = option(["-ctvd", "--spec-draft-type-v", "--cache-type-v-draft"], cache_type, "f16",
                               "the draft (MTP) context's V cache type", sweep=False)
    op_offload: bool = option(["--op-offload"], on_off, True,
                              "run a batch's ops on the card even where their weights are in system RAM, copying the "
                              "weights over (llama.cpp's default; off: llama-server's --no-op-offload)",
                              negated=("-nopo", "--no-op-offload"))
    n_gpu_layers: int = option(["-ngl", "--n-gpu-layers", "--gpu-layers"], gpu_layers, 0,
                               "layers on the GPU, the output layer counting as one, or all (bench's default "
                               "where a GPU backend is present, as llama-bench's)", shown_default="all on a GPU build")
    n_cpu_moe: int = option(["-ncmoe", "--n-cpu-moe"], nonneg_int, 0,
                            "keep the routed experts of the first N layers in system RAM")
    tensor_overrides: tuple[str, ...] = option(
        ["-ot", "--override-tensor"], tensor_overrides, (),
        "llama.cpp's tensor buffer overrides: REGEX=BUFFER,... (CPU, CUDA0, CUDA_Host, RPC0[HOST:PORT]), matched "
        "against each weight's name in order, the first placing it (repeatable, as llama-server)", sweep=False,
        metavar="REGEX=BUFFER,...")
    cpu_moe: bool = option(["-cmoe", "--cpu-moe"], on_off, False, "every routed expert in system RAM (-ot for "
                           "each expert tensor, as llama-server's --cpu-moe)", action="store_true")
    load_mode: str = option(["-lm", "--load-mode"], load_mode, "auto",
                            "how llama.cpp loads the weights: auto|mmap (the file mapped), none (read into "
                            "allocated buffers; older builds' --no-mmap), mlock (allocated and locked), mmap+mlock "
                            "(older builds' --mlock), dio; --no-mmap and --mlock are taken too", sweep=False,
                            metavar="MODE", older=("--no-mmap", "--mlock"))
    tensor_split: tuple[float, ...] = option(  # (): by free memory
        ["-ts", "--tensor-split"], tensor_split, (),
        "each device's share of the layers, as llama.cpp: 3,1 (fit searches it when not given)", sweep=False,
        metavar="N0,N1,...")
    split_mode: str = option(["-sm", "--split-mode"], split_mode, "layer",
                             "layer: layers pipelined over the devices; none: the -mg device alone", sweep=False)
    main_gpu: int = option(["-mg", "--main-gpu"], nonneg_int, 0, "the device of -sm none", sweep=False)
    n_threads: int = option(["-t", "--threads"], threads, 0, "threads; 0: the physical cores")
    repack: bool = option(["--repack"], on_off, True,  # use_extra_bufts
                          "the repacked CPU copy of the weights (CPU_REPACK / AMX): 0|1, as llama-bench --repack",
                          negated=("-nr", "--no-repack"))
    poll: int = option(["--poll"], percent, 50, "threadpool polling level, 0-100, as llama-bench")
    cpu_mask: str = option(["-C", "--cpu-mask"], cpu_mask, "0x0", "CPU affinity mask, hex (0x0: the default affinity)")
    cpu_strict: bool = option(["--cpu-strict"], on_off, False, "strict CPU placement: 0|1")
    prio: int = option(["--prio"], priority, 0, "thread priority: -1 low, 0 normal, 1 medium, 2 high, 3 realtime")

    def replace(self, **changes) -> "Params":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> "Params":
        return serial.from_dict(cls, data)

    @property
    def label(self) -> str:
        """The fields that differ from the defaults, as llama-bench flags: for progress lines and plans."""
        parts = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value != field.default or field.name in ("n_ctx", "type_k", "type_v"):
                spec = SCHEMA[field.name]
                parts.append(f"{spec.flags[0]} {spec.show(value)}")
        return " ".join(parts)


_CONTEXT = tuple(dataclasses.replace(f.metadata["param"], name=f.name) for f in dataclasses.fields(Params))
CONTEXT_PARAMS = tuple(p.name for p in _CONTEXT)


def _p(name, flags, parse, default, help, **kw) -> Param:
    return Param(name, tuple(flags), parse, default, help, **kw)


_OPTIONS = (
    _p("model", ["-m", "--model"], text, None, "a GGUF file (local, https:// or hf://) or a catalog id from "
       "models.toml (a catalog id runs llama.cpp on its geometry twin)", metavar="MODEL"),
    _p("hf_repo", ["-hf", "-hfr", "--hf-repo"], hf_repo_model, None, "a Hugging Face repository as llama.cpp's -hf "
       "takes it: the GGUF llama.cpp would load (QUANT, else Q4_K_M, then Q8_0), its header read; the same as MODEL "
       "hf://OWNER/REPO[:QUANT]", metavar="OWNER/REPO[:QUANT]"),
    _p("output", ["-o", "--output"], OutputFormat, OutputFormat.TEXT, "output format: text, md, csv, json, jsonl",
       metavar="FORMAT"),
    _p("results", ["--results"], path, None, "append the records to this JSON Lines results file", metavar="FILE"),
    _p("out", ["--out"], path, None, "the file to write", metavar="FILE"),
    _p("out_dir", ["--out-dir"], path, None, "the folder to write (default reports/local/<label>/)", metavar="DIR"),
    _p("vram", ["--vram"], budget, (Budget("16GiB", 16 * GIB), Budget("24GiB", 24 * GIB)),
       "card sizes, comma list of alternatives; + joins one machine's cards (24GiB+12GiB); plain numbers are GiB, "
       "and GB means GiB (a 24 GB card holds 24 GiB); a card or a unified machine by name (rtx-4090, "
       "apple-m4-pro-24gb, ryzen-ai-max-395-128gb, dgx-spark)"),
    _p("reserve", ["--reserve"], reserve, 512 * MIB, "kept free on each card for the driver and display; one per "
       "card joined by + (512MiB+1GiB); on a unified machine, the RAM kept for the OS (default 4GiB)",
       shown_default="512MiB"),
    _p("rpc", ["--rpc"], endpoints, (), "remote hosts: ggml-rpc-server HOST:PORT, comma list (llama.cpp's --rpc); "
       "their free memory is read from the server", metavar="HOST:PORT,..."),
    _p("ram", ["--ram"], ram, None, "system RAM the host part must fit into (mapped weights, host buffers, "
       "prompt cache, checkpoints), less what the OS keeps (4 GiB, a quarter below 16 GiB, as a Mac's pool); with "
       "--cpu-only the whole budget"),
    _p("cpu_only", ["--cpu-only"], on_off, False, "no card: everything in system RAM, as a CPU build (needs --ram)",
       action="store_true"),
    _p("unified", ["--unified"], on_off, False, "the --vram sizes are unified machines' RAM (a Mac, a Ryzen AI Max, a "
       "GB10): one pool for GPU and CPU, the device's ceiling within it (Metal: 2/3 of the RAM, 3/4 above 36 GiB, "
       "unless --wired-limit)", action="store_true"),
    _p("wired_limit", ["--wired-limit"], nonneg_int, None, "a Mac's GPU ceiling in MiB, as `sudo sysctl "
       "iogpu.wired_limit_mb=N` sets it (default, and 0 as the sysctl reads it: its recommendedMaxWorkingSetSize)",
       metavar="MIB"),
    _p("runtime", ["--runtime"], parse_runtime, Runtime.LLAMA_SERVER.value, "the program that creates the context: "
       "llama-server (the printed command) or llama-cpp-python (the Llama() call)", metavar="NAME"),
    _p("server_cmd", ["--server-cmd"], text, None, "bench --runtime llama-server: the llama-server line to start "
       "(what fit printed; llama-server is found as --server-bin says)", metavar="COMMAND"),
    _p("url", ["--url"], text, None, "bench --runtime llama-server: a running llama-server to bench (not started, "
       "not stopped)", metavar="http://HOST:PORT"),
    _p("server_bin", ["--server-bin"], path, None, "the llama-server binary (default: llama-server on PATH, then "
       "the tools `make tools` builds)", metavar="PATH"),
    _p("concurrency", ["--concurrency"], positive_int, 1, "bench --runtime llama-server: parallel requests, one "
       "slot each (needs -np at least as many)"),
    _p("cache_ram", ["-cram", "--cache-ram"], int_at_least_minus_one, 8192,
       "llama-server's prompt cache limit in MiB (-1: no limit, 0: off; its default 8192)", metavar="MIB"),
    _p("ctx_checkpoints", ["-ctxcp", "--ctx-checkpoints"], nonneg_int, 32,
       "llama-server's context checkpoints per slot (its default 32)"),
    _p("verify", ["--verify"], on_off, False, "create the answer for real and compare, device by device",
       action="store_true"),
    _p("backend", ["--backend"], backend_name, None, "the GPU backend of a card sized without it: cuda, vulkan, metal, "
       "rocm, or cpu (the emulated card as it is, no op offload); default: what a named card runs (NVIDIA cuda, AMD "
       "vulkan), else cuda. The emulated card then copies host weights for a batch's ops as that backend does",
       metavar="NAME"),
    _p("emulate", ["--emulate"], on_off, False, "size (and verify) on an emulated card, llama.cpp's RPC backend on "
       "this CPU, even on a GPU build: a card you do not have, its backend assumed to take every tensor type",
       action="store_true"),
    _p("mmproj", ["--mmproj"], file_or_url, None, "a vision projector GGUF (local, https:// or hf://), or 'published' "
       "for a catalog model's own", metavar="FILE"),
    _p("no_mmproj_offload", ["--no-mmproj-offload"], on_off, False,
       "keep the projector in system RAM, as llama-server's --no-mmproj-offload", action="store_true"),
    _p("quant", ["--quant"], text, None, "a catalog model's published quant (e.g. Q4_K_M), or a file's in llama.cpp's "
       "recipe (fit FILE --quant Q3_K_M); with -hf OWNER/REPO or a catalog id, all or a comma list (Q4_K_M,Q5_K_M) "
       "fits each quant: 64 quants at most and 600 s in all, past either one line that says how to narrow it; a quant "
       "is read as llama.cpp's -hf reads it, a regular expression"),
    _p("model_draft", ["-md", "--model-draft", "--spec-draft-model"], text, None,
       "llama-server's draft model (--spec-type draft-simple): a GGUF file, https:// or hf:// URL, or a catalog id, "
       "sized beside the target on the same devices", metavar="MODEL"),
    _p("n_gpu_layers_draft", ["-ngld", "--spec-draft-ngl", "--n-gpu-layers-draft"], nonneg_int, None,
       "the draft model's layers on the card (default: all, as llama-server)"),
    _p("device_draft", ["-devd", "--spec-draft-device", "--device-draft"], device_list, None,
       "the draft model's devices, as llama-server names them (CUDA1, RPC0; their place among the cards), or none "
       "(system RAM); default: the target's, split as it is", metavar="DEV,..."),
    _p("remote", ["--remote"], on_off, False, "a catalog id: read the real header of its published --quant "
       "from Hugging Face", action="store_true"),
    _p("n_prompt", ["-p", "--n-prompt"], tokens, 512, "prompt tokens of a pp test"),
    _p("n_gen", ["-n", "--n-gen"], tokens, 128, "generated tokens of a tg test"),
    _p("n_depth", ["-d", "--n-depth", "--depths"], tokens, 0, "depths: tokens already in the context"),
    _p("repetitions", ["-r", "--repetitions"], positive_int, 3, "repetitions of each test"),
    _p("resume", ["--resume"], on_off, False, "skip tests the results file already holds", action="store_true"),
    _p("dry_run", ["--dry-run"], on_off, False, "print the plan, run nothing", action="store_true"),
    _p("max_depth", ["--max-depth"], tokens, None, "deepest bench depth"),
    _p("matrix", ["--matrix"], on_off, False, "run the whole exactness matrix instead of one cell",
       action="store_true"),
    _p("card", ["--card"], text, None, "a card from the speed table"),
    _p("bandwidth", ["--bandwidth"], positive_float, None, "memory bandwidth in GB/s (instead of --card)"),
    _p("tflops", ["--tflops"], positive_float, None, "FP32 TFLOPS with --bandwidth (default: bytes only)"),
    _p("link", ["--link"], positive_float, None, "several cards (--card A+B): GB/s of the link between them "
       "(default 16, PCIe 4.0 x16 at half its peak; 1.25 for 10 GbE to an RPC host)"),
    _p("link_ms", ["--link-ms"], nonneg_float, 0.0, "several cards: latency per hop in ms (0 on PCIe; a network "
       "round trip, e.g. 0.2, to an RPC host)"),
    _p("ram_bandwidth", ["--ram-bandwidth"], positive_float, None, "with -ngl or --n-cpu-moe: GB/s of the system RAM "
       "that holds the rest (default: this machine's, measured)"),
    _p("bw_eff", ["--bw-eff"], fraction, None, "bandwidth efficiency (default 0.70)"),
    _p("compute_eff", ["--compute-eff"], fraction, None, "compute efficiency (default 0.30)"),
    _p("text_file", ["-f", "--file"], path, None, "the text to score, UTF-8 natural language, as llama-perplexity -f, "
       "4 MiB at most, tokenized within 300 s (default: Python's own documentation topics, pydoc_data.topics: "
       "offline, the same on every machine)", metavar="TEXT"),
    _p("chunks", ["--chunks"], positive_int, None, "score at most this many chunks of -c tokens, as llama-perplexity "
       "(default: all the text holds)"),
    _p("base_model", ["--base-model"], text, None, "reference weights (a GGUF of the same vocabulary, e.g. the BF16 "
       "or Q8_0 the quant was made from): MODEL's weights are compared against its logits, both with f16 KV",
       metavar="REF.gguf"),
    _p("compare", ["--compare"], text, (), "catalog ids to draw beside the model in the KV plot", metavar="ID"),
    _p("calibrate", ["--calibrate"], path, None, "bench results of this model, 64 MiB at most: the speed model scaled "
       "to the median of measured / predicted over its tests (those bench marked noisy left out)", metavar="FILE"),
    _p("result_files", [], path, None, "JSON Lines files written by inspect/verify/fit/bench --results",
       metavar="RESULTS"),
)
SCHEMA: dict[str, Param] = {p.name: p for p in _CONTEXT + _OPTIONS}
