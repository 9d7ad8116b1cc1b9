"""Does it fit? Weights on the card + KV + recurrent state + compute buffer + reserve, per placement,
and what stays in system RAM beside it (mapped weights, host buffers, the runtime's prompt cache and
checkpoints).

Pure: the compute buffers come in through a callable (llama.cpp's dry-run figures of the same
placement, measured elsewhere); everything else is arithmetic on the weights breakdown, the
footprint and the runtime's context (`runtimes`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ...core.errors import ContextRefused, LlamabenchError
from ...core.units import GIB
from ...memory import allocations, speculative
from ...memory.footprint import KV_PAD, compute_footprint, per_layer_bytes
from ...memory.layer_split import first_offloaded_layer, layer_counts, layer_devices
from ...memory.placement import CardParts, FitRow, HostParts, Parts, Placement, PlacementKind
from ...memory.runtimes import RuntimeConfig, server_ram
from ...model.geometry import ModelGeometry
from ...model.weights import WeightsBreakdown
from ...settings.budget import Budget
from ...settings.params import Params
from ...settings.tensor_overrides import LoadMode, Placer
from .compute_split import ComputeSplit, as_split, interpolated  # noqa: F401 (ComputeSplit: the fit's own name)

# what shrinks the system RAM, named when a placement fits the card but not the RAM
RAM_FLAGS = "--cache-ram, --ctx-checkpoints, -np"  # llama-server's
RAM_ADVICE_LLAMA = "more layers on the card (n_gpu_layers) or a smaller n_ctx"  # Llama()'s




class Fitter:
    def __init__(self, geometry: ModelGeometry, weights: WeightsBreakdown,
                 compute_bytes: Callable[[Params], "ComputeSplit | int"], *, reserve: "int | tuple[int, ...]",
                 ram_mode: bool = False, projector: int = 0, host_projector: int = 0,
                 runtime: RuntimeConfig | None = None, ram: Budget | None = None,
                 tensor_split: tuple[float, ...] = (), draft: "tuple[Fitter, Placement] | None" = None,
                 expert_share: float = 1.0, draft_devices: tuple[int, ...] | None = None, maps_file: bool = False,
                 placer: Placer = Placer(), load_mode: LoadMode = LoadMode.AUTO):
        self.geometry = geometry
        self.expert_share = expert_share  # expert_used_count / expert_count: the routed experts a token reads
        self.tensor_split = tensor_split  # -ts given: these proportions, not a searched split
        self.weights = weights
        self.compute_bytes = compute_bytes
        self.reserve = reserve  # one for every card, or one per card in device order
        self.ram_mode = ram_mode
        self.projector = projector
        self.host_projector = host_projector
        self.runtime = runtime or RuntimeConfig()
        self.ram = ram
        self.n_layer_all = weights.n_layer
        self.refused: dict[int, str] = {}  # n_ctx -> why llama.cpp could not create it (searches treat it as no fit)
        self.draft = draft  # llama-server's draft model (-md): its fitter and placement, its parts added to ours
        self.draft_devices = draft_devices  # -devd: the cards the draft is on, () none; None: ours, split as ours
        self.load_mode = LoadMode(load_mode)  # --load-mode: the file mapped or read into buffers, locked or not
        # Metal: the card's weights are the file's span it maps (UnifiedPool.maps_file), where the file is mapped
        self.maps_file = maps_file and self.load_mode.maps
        self.placer = placer  # -ot / --cpu-moe: tensors placed away from their layer, by name

    def places(self, placement: Placement) -> list[int | None]:
        """Each weight tensor's device (None: system RAM), the overrides (-ot, --cpu-moe) applied first."""
        devices = self.layer_devices(placement)
        return self.weights.tensor_devices(lambda il: devices[il] if il < len(devices) else None,
                                           n_cpu_moe=placement.n_cpu_moe, place=self.placer.place)

    def device_weights(self, placement: Placement, devices: tuple[int | None, ...], n: int) -> tuple[int, ...]:
        """Each card's weights, tensor by tensor, where the backend takes every tensor type."""
        if self.placer:
            return self.weights.placed_on_devices(self.places(placement), n)
        return self.weights.on_devices(devices, n, n_cpu_moe=placement.n_cpu_moe)

    def ram_read_bytes(self, placement: Placement) -> int:
        """Weight bytes one decoded token reads from system RAM (the routed experts, expert_share of them)."""
        if self.placer:
            return sum(self.weights.placed_host_read(self.places(placement), expert_share=self.expert_share).values())
        return self.weights.host_read_per_token(n_gpu_layers=placement.n_gpu_layers(self.n_layer_all),
                                                n_cpu_moe=placement.n_cpu_moe, expert_share=self.expert_share)

    def reserve_of(self, device: int) -> int:
        return self.reserve[device] if isinstance(self.reserve, tuple) else self.reserve

    def first_card_layer(self, placement: Placement) -> int:
        """i_gpu_start: layers from here on (the output layer too) are on the card(s)."""
        return first_offloaded_layer(self.n_layer_all, placement.n_gpu_layers(self.n_layer_all))

    def layer_devices(self, placement: Placement) -> tuple[int | None, ...]:
        """Each layer's device (the output layer last), as llama.cpp assigns it for this placement's -ts."""
        proportions = tuple(float(n) for n in placement.split) if len(placement.split) > 1 else (1.0,)
        if not any(proportions):  # nothing offloaded (-ngl 0): no card holds a layer
            return (None,) * (self.n_layer_all + 1)
        return layer_devices(self.n_layer_all, placement.n_gpu_layers(self.n_layer_all), proportions)

    def compute(self, settings: Params, placement: Placement) -> ComputeSplit:
        """llama.cpp's compute buffers of this placement, card(s) and host (a dry run over the same devices)."""
        return as_split(self.compute_bytes(placement.params(settings, self.n_layer_all)))

    def parts(self, settings: Params, placement: Placement, compute: ComputeSplit | None = None) -> Parts:
        """What this placement puts on the card(s) (everything, with --cpu-only)."""
        return self.evaluate(settings, placement, compute)[0]

    def evaluate(self, settings: Params, placement: Placement,
                 compute: ComputeSplit | None = None) -> tuple[Parts, HostParts]:
        """The card's parts (the sum over the cards) and the host's, for the runtime's context `settings`."""
        parts, host, _ = self.evaluate_devices(settings, placement, compute)
        return parts, host

    def evaluate_devices(self, settings: Params, placement: Placement, compute: ComputeSplit | None = None,
                         *, projector_device: int = 0, mapped: bool = True
                         ) -> tuple[Parts, HostParts, tuple[Parts, ...]]:
        """The parts of each card (in device order), their sum, and the host's; `mapped=False`: a Mac's card weights
        as the tensors copied (what an emulated card allocates), not the file's span Metal maps."""
        fp = compute_footprint(self.geometry, settings)  # a clear UsageError before any dry run
        split = self.compute(settings, placement) if compute is None else as_split(compute)
        grows = server_ram(self.geometry, fp, self.runtime)
        growing = dict(prompt_cache=grows.prompt_cache, checkpoints=grows.checkpoints,
                       prompt_cache_unlimited=grows.prompt_cache_unlimited)
        if self.ram_mode:
            kv, rec = fp.kv_bytes, fp.recurrent_state_bytes
            if self.geometry.no_rule:  # llama.cpp's own caches, wherever it put them
                cards, (kv, rec) = self.measured_caches(split, len(split.caches))
                kv, rec = kv + sum(c[0] for c in cards), rec + sum(c[1] for c in cards)
            parts = Parts(self.weights.total_bytes, kv, rec, split.total,
                          reserve=self.reserve_of(0), projector=self.projector)
            if self.draft is not None:  # the draft model in system RAM too
                parts = plus(parts, self.draft_parts(settings, placement)[0][0])
            return parts, HostParts(**growing), (parts,)
        n = max(1, len(placement.split))
        devices = self.layer_devices(placement)
        weights = split.weights if len(split.weights) == n else self.device_weights(placement, devices, n)
        if self.maps_file and mapped and n == 1:
            weights = (self.mapped_card_weights(settings, placement, weights[0]),)
        caches, (host_kv, host_rec) = (self.measured_caches(split, n) if self.geometry.no_rule
                                       else self.cache_split(settings, placement, devices, n))
        computes = split.per_device(n)
        cards = tuple(Parts(weights[i], caches[i][0], caches[i][1], computes[i], reserve=self.reserve_of(i),
                            projector=self.projector if i == projector_device else 0) for i in range(n))
        host = HostParts(self.host_weights(placement, split), host_kv, host_rec, split.host,
                         projector=self.host_projector, **growing)
        if self.draft is not None:  # on the same cards, split in the same proportions (-ts), and the host
            on_cards, on_host = self.draft_parts(settings, placement)
            cards, host = tuple(plus(c, d) for c, d in zip(cards, on_cards)), plus(host, on_host)
        total = cards[0] if n == 1 else Parts.add_up(cards)
        return total, host, cards

    def mapped_card_weights(self, settings: Params, placement: Placement, placed: int) -> int:
        """Metal's model buffer: the span of the file it maps for the card's tensors (where the offsets are known,
        else the tensors' bytes); with --spec-type draft-mtp the MTP layer's tensors are among them (the target loads
        them, load_mtp), and the MTP context runs on that same model: nothing is mapped again."""
        ngl, n_cpu_moe = placement.n_gpu_layers(self.n_layer_all), placement.n_cpu_moe
        if self.placer:
            span = self.weights.placed_card_span(self.places(placement))
        else:
            span = self.weights.card_mapped(n_gpu_layers=ngl, n_cpu_moe=n_cpu_moe) if ngl else 0
        return placed if span is None else span

    def shared_pages(self, settings: Params, placement: Placement, card_weights: int, host_weights: int) -> int:
        """Bytes of the file counted both in the card's weights and the host's (Metal maps one set of pages into
        both): what the RAM holds once."""
        if not self.maps_file:
            return 0
        ngl, n_cpu_moe = placement.n_gpu_layers(self.n_layer_all), placement.n_cpu_moe
        if self.placer:
            union = self.weights.placed_union(self.places(placement))
        else:
            union = self.weights.mapped_union(n_gpu_layers=ngl, n_cpu_moe=n_cpu_moe) if ngl else None
        return 0 if union is None else max(0, card_weights + host_weights - union)

    def pool_bytes(self, settings: Params, placement: Placement, parts: Parts, host: HostParts,
                   compute: ComputeSplit | None = None) -> int:
        """A unified machine's RAM: the device's buffers (not its reserve: the OS's share is the pool's) and the
        host's, the file's pages once."""
        target_card = self.mapped_card_weights(settings, placement, parts.weights) if self.maps_file else 0
        target_host = self.host_weights(placement, compute) if self.maps_file else 0
        shared = self.shared_pages(settings, placement, target_card, target_host)
        return parts.total - parts.reserve + host.total - shared

    def draft_parts(self, settings: Params, placement: Placement
                    ) -> tuple[tuple[allocations.Parts, ...], allocations.Parts]:
        """The draft model's (-md) parts beside this context, on each card (in system RAM with --cpu-only), and on
        the host; its context at our cells and slots (speculative.draft_context), re-sized at each n_ctx. llama-server
        loads it on the target's devices with the target's -ts (common_base_params_to_speculative copies the
        target's parameters: common/speculative.cpp:2446-2462), so its layers are split in the same proportions."""
        fitter, own = self.draft
        n = max(1, len(placement.split))
        chosen = tuple(range(n)) if self.draft_devices is None else self.draft_devices
        parts, host, per_card = fitter.evaluate_devices(speculative.draft_context(settings),
                                                        draft_placement(own, placement, self.draft_devices))
        if self.ram_mode:
            return (parts.buffers,), allocations.Parts()
        cards = [allocations.Parts()] * n
        if not chosen:  # -devd none: every part in system RAM (the draft fitter sizes it as --cpu-only)
            return tuple(cards), parts.buffers
        for position, p in zip(chosen, per_card):
            cards[position] = p.buffers
        return tuple(cards), host.buffers

    def cache_split(self, settings: Params, placement: Placement, devices: tuple[int | None, ...] | None = None,
                    n_devices: int = 1) -> tuple[tuple[tuple[int, int], ...], tuple[int, int]]:
        """((KV, recurrent) of each card, (KV, recurrent) in system RAM): each layer's with its layer."""
        devices = self.layer_devices(placement) if devices is None else devices
        cards, host = [[0, 0] for _ in range(n_devices)], [0, 0]
        for il, (kv, rec) in per_layer_bytes(self.geometry, settings).items():
            side = host if devices[il] is None else cards[devices[il]]
            side[0] += kv
            side[1] += rec
        return tuple((c[0], c[1]) for c in cards), (host[0], host[1])

    @staticmethod
    def measured_caches(split: ComputeSplit, n_devices: int
                        ) -> tuple[tuple[tuple[int, int], ...], tuple[int, int]]:
        """((KV, recurrent) of each card, (KV, recurrent) in system RAM) as llama.cpp allocated them in the dry run
        (a model without a layout rule)."""
        if len(split.caches) != n_devices:
            raise LlamabenchError(f"llama.cpp's dry run reported caches on {len(split.caches)} devices, not "
                                  f"{n_devices}: this model has no layout rule to size them with")
        return split.caches, split.host_caches

    def host_weights(self, placement: Placement, split: ComputeSplit | None = None) -> int:
        """Weights llama.cpp reports in system RAM for this placement: the mapped span of the file where the
        tensor offsets are known, else the bytes of the tensors not on the card(s); at least what the backend
        left on the host in the dry run (tensors it refused, where it refused any). Read into buffers (--load-mode
        none, mlock): the bytes of the tensors kept there, each once."""
        ngl, n_cpu_moe = placement.n_gpu_layers(self.n_layer_all), placement.n_cpu_moe
        maps = self.load_mode.maps
        if split is not None and split.host_tensors is not None:
            if not maps and split.host_weights is not None:
                return split.host_weights  # the dry run reads into buffers too (no_alloc, load mode none)
            mapped = self.weights.mapped_span(split.host_tensors)  # the backend's own choice, tensor by tensor
            if mapped is not None:
                return mapped
        if self.placer or not maps:
            own = self.weights.placed_on_host(self.places(placement), mapped=maps)
            backend = split.host_weights if split is not None else None
            return own if backend is None else max(own, backend)
        mapped = self.weights.host_mapped(n_gpu_layers=ngl, n_cpu_moe=n_cpu_moe)
        if mapped is None:
            on_card = self.weights.on_card(n_gpu_layers=ngl, n_cpu_moe=n_cpu_moe)
            mapped = self.weights.total_bytes - on_card + (self.weights.tied_output_bytes if ngl > 0 else 0)
        backend = split.host_weights if split is not None else None
        return mapped if backend is None else max(mapped, backend)

    def theory_weights(self, placement: Placement) -> tuple[int, ...]:
        """Each card's weights tensor by tensor, for a backend that takes every tensor type (no dry run)."""
        n = max(1, len(placement.split))
        return self.device_weights(placement, self.layer_devices(placement), n)

    @staticmethod
    def _budget(budget: "int | Budget") -> Budget:
        return budget if isinstance(budget, Budget) else Budget("", budget)

    def projector_device(self, budget: Budget) -> int:
        """The projector goes to the first card of this machine (not a remote host) where there is one."""
        return next((i for i, c in enumerate(budget.devices) if not c.remote), 0)

    def _row_of(self, budget: "int | Budget", settings: Params, placement: Placement,
                compute: ComputeSplit | None = None, *, card_only: bool = False) -> FitRow:
        """One placement's row without its max-n_ctx search (what the searches compare)."""
        budget = self._budget(budget)
        parts, host, per_card = self.evaluate_devices(settings, placement, compute,
                                                      projector_device=self.projector_device(budget))
        cards = ()
        if not self.ram_mode:
            counts = layer_counts(self.layer_devices(placement), len(per_card))
            cards = tuple(CardParts(c.label, c.bytes, p, k, c.endpoint)
                          for c, p, k in zip(budget.devices, per_card, counts))
        ram_read = 0 if self.ram_mode else self.ram_read_bytes(placement)
        ram, pool = (None if card_only else self.ram), 0
        if budget.pool is not None and not self.ram_mode:
            pool_of = budget.pool
            ram = None if card_only else Budget(f"{pool_of.ram / GIB:g} GiB RAM less {pool_of.os_reserve / GIB:g} GiB "
                                                "for the OS", pool_of.usable)
            pool = self.pool_bytes(settings, placement, parts, host, compute)
        return FitRow(budget, settings, placement, parts, 0, host, ram, self.ram_mode, cards, ram_read, pool)

    def _fits(self, budget: "int | Budget", settings: Params, placement: Placement, *, card_only: bool = False) -> bool:
        """Whether it fits; a context llama.cpp cannot create on these devices (a dry run that failed: a tensor
        the backend does not take, say) does not fit, and the reason is kept."""
        compute = self._compute_or_none(settings, placement)
        return compute is not None and self._row_of(budget, settings, placement, compute, card_only=card_only).fits

    def _compute_or_none(self, settings: Params, placement: Placement) -> ComputeSplit | None:
        try:
            return self.compute(settings, placement)
        except ContextRefused as exc:
            self.refused.setdefault(settings.n_ctx, str(exc))
            return None

    def max_n_ctx(self, budget: "int | Budget", settings: Params, placement: Placement) -> int:
        """Largest n_ctx (a multiple of 256) whose card(s) and host totals fit, by dry runs.

        The compute buffers grow with n_ctx, so compute(256) bounds them from below and compute(n_upper)
        from above for every n <= n_upper: two cheap arithmetic searches bracket the answer, and real
        dry runs settle the few steps in between.
        """
        # up to the trained length, or the asked n_ctx where that is longer (the answer then agrees with `-c`)
        hi = max(KV_PAD, max(self.geometry.n_ctx_train, settings.n_ctx) // KV_PAD * KV_PAD)
        at = lambda n: settings.replace(n_ctx=n)  # noqa: E731

        def largest(ok, lo_steps: int, hi_steps: int) -> int:
            """Largest step in [lo_steps, hi_steps] with ok(step * 256), given ok(lo_steps); monotone."""
            while hi_steps > lo_steps:
                mid = (lo_steps + hi_steps + 1) // 2
                if ok(mid * KV_PAD):
                    lo_steps = mid
                else:
                    hi_steps = mid - 1
            return lo_steps

        def fits_with(compute: ComputeSplit):
            return lambda n: self._row_of(budget, at(n), placement, compute).fits

        c_low = self._compute_or_none(at(KV_PAD), placement)
        if c_low is None or not fits_with(c_low)(KV_PAD):
            return 0
        upper = largest(fits_with(c_low), 1, hi // KV_PAD)  # no n above this can fit
        c_up = self._compute_or_none(at(upper * KV_PAD), placement)
        # not creatable that long on these devices: the exact search from the bottom (refusals grow with n_ctx)
        lower = 1 if c_up is None else largest(fits_with(c_up), 1, upper) if fits_with(c_up)(KV_PAD) else 1

        def real(n: int) -> bool:  # a dry run at n
            return self._fits(budget, at(n), placement)

        if not real(lower * KV_PAD):
            return 0
        guess = lower
        if c_up is not None and upper > lower and not self.geometry.no_rule:
            # compute between its two dry runs, interpolated: the guess a dry run or two then confirm
            def estimated(n: int) -> bool:
                return self._row_of(budget, at(n), placement, interpolated(c_low, c_up, KV_PAD, upper * KV_PAD, n)).fits

            guess = largest(estimated, lower, upper)
        if guess > lower and not real(guess * KV_PAD):  # the estimate was too high: below it
            return largest(real, lower, guess - 1) * KV_PAD
        if guess == upper or not real((guess + 1) * KV_PAD):
            return guess * KV_PAD
        return largest(real, guess + 1, upper) * KV_PAD

    def _row(self, budget: Budget, settings: Params, placement: Placement) -> FitRow:
        return replace(self._row_of(budget, settings, placement),
                       max_n_ctx=self.max_n_ctx(budget, settings, placement))

    # several cards: the -ts of a placement ---------------------------------------------------------
    MAX_SPLIT_ROUNDS = 3

    def layer_costs(self, settings: Params, placement: Placement) -> list[tuple[int, int]]:
        """(layer, bytes on its card: weights + KV + recurrent) for every offloaded layer, the output layer last."""
        caches = per_layer_bytes(self.geometry, settings)
        staying = self.layer_weights_staying(placement) if self.placer else None
        out = []
        for il in range(self.first_card_layer(placement), self.n_layer_all + 1):
            kv, rec = caches.get(il, (0, 0))
            weights = (staying.get(il, 0) if staying is not None
                       else self.weights.layer_bytes(il, n_cpu_moe=placement.n_cpu_moe))
            out.append((il, weights + kv + rec))
        return out

    def layer_weights_staying(self, placement: Placement) -> dict[int, int]:
        """Each layer's weights that go where the layer goes (the overrides send the others elsewhere); the output
        layer's under n_layer."""
        layer = object()  # a layer's own device, whichever it is
        places = self.weights.tensor_devices(lambda il: layer, n_cpu_moe=placement.n_cpu_moe,  # type: ignore
                                             place=self.placer.place)
        out: dict[int, int] = {}
        classes = list(self.weights.tensor_classes) + ([(None, "output")] if self.weights.tied_output_bytes else [])
        for where, (il, _), n in zip(places, classes, self.weights.place_sizes()):
            if where is layer:
                key = self.n_layer_all if il is None else il
                out[key] = out.get(key, 0) + n
        return out

    def split_for(self, budget: Budget, settings: Params, placement: Placement, estimate: ComputeSplit) -> Placement:
        """The placement with the -ts that holds the largest n_ctx on these cards (the asked n_ctx first).

        Each card's room is its memory less its reserve, projector and (estimated) compute; the layers are
        dealt in device order, each card taking as many as it holds at a trial n_ctx (a greedy deal is
        feasible whenever any split in device order is). The largest n_ctx some deal holds gives the split;
        where none holds the asked n_ctx, the layers are shared in proportion to the rooms.
        """
        cards = budget.devices
        n = len(cards)
        if n == 1 or self.ram_mode:
            return placement.with_split(())
        computes = estimate.per_device(n)
        p_dev = self.projector_device(budget)
        rooms = [c.bytes - self.reserve_of(i) - computes[i] - (self.projector if i == p_dev else 0)
                 for i, c in enumerate(cards)]

        def deal(n_ctx: int) -> tuple[int, ...] | None:
            costs = [c for _, c in self.layer_costs(settings.replace(n_ctx=n_ctx), placement)]
            counts, i = [], 0
            for d in range(n):
                used, k = 0, 0
                if d == n - 1:  # the last card takes the rest
                    rest = sum(costs[i:])
                    return tuple(counts + [len(costs) - i]) if rest <= rooms[d] else None
                while i < len(costs) and used + costs[i] <= rooms[d]:
                    used += costs[i]
                    i += 1
                    k += 1
                counts.append(k)
            return None  # pragma: no cover - the loop returns at the last card

        lo = settings.n_ctx
        if deal(lo) is None:
            n_layers = len(self.layer_costs(settings, placement))
            return placement.with_split(proportional(n_layers, [max(r, 0) for r in rooms]))
        hi = max(lo, max(self.geometry.n_ctx_train, lo) // KV_PAD * KV_PAD)
        if deal(hi) is not None:
            # room to spare at the longest context: share the layers by room where that holds it too
            share = proportional(len(self.layer_costs(settings, placement)), [max(r, 0) for r in rooms])
            costs = [c for _, c in self.layer_costs(settings.replace(n_ctx=hi), placement)]
            bounds = [sum(share[:i]) for i in range(n + 1)]
            if all(sum(costs[bounds[i]:bounds[i + 1]]) <= rooms[i] for i in range(n)):
                return placement.with_split(share)
            return placement.with_split(deal(hi))
        lo_steps, hi_steps = -(-lo // KV_PAD), hi // KV_PAD - 1  # deal(lo) holds, deal(hi) does not
        while hi_steps > lo_steps:
            mid = (lo_steps + hi_steps + 1) // 2
            if deal(mid * KV_PAD) is not None:
                lo_steps = mid
            else:
                hi_steps = mid - 1
        best = deal(max(lo, lo_steps * KV_PAD)) or deal(lo)
        return placement.with_split(best)

    def placed(self, budget: Budget, settings: Params, placement: Placement,
               estimate: ComputeSplit | None = None) -> Placement:
        """A placement with its split settled by dry runs: deal with the estimate, then again with the split's
        own compute buffers until the cards hold it (compute moves with the split: pipeline parallelism)."""
        if not budget.multi or self.ram_mode:
            return placement
        n = len(budget.devices)
        if self.tensor_split:  # the user's -ts, as whole layers of this placement
            if placement.n_gpu_layers(self.n_layer_all) == 0:
                return placement.with_split((0,) * n)
            devices = layer_devices(self.n_layer_all, placement.n_gpu_layers(self.n_layer_all), self.tensor_split)
            return placement.with_split(layer_counts(devices, n))
        if estimate is None:
            estimate = self.compute(settings, placement.with_split(proportional(
                len(self.layer_costs(settings, placement)), [c.bytes for c in budget.devices])))
        chosen = self.split_for(budget, settings, placement, estimate)
        for _ in range(self.MAX_SPLIT_ROUNDS):
            exact = self.compute(settings, chosen)
            if self._row_of(budget, settings, chosen, exact, card_only=True).card_fits:
                return chosen
            again = self.split_for(budget, settings, placement, ComputeSplit(exact.card, exact.host,
                                                                             exact.per_device(n)))
            if again == chosen:
                return chosen
            chosen = again
        return chosen

    def rows(self, budget: Budget, settings: Params,
             placements: list[Placement] | None = None) -> list[FitRow]:
        """All on the card(s); if that misses, the fewest expert layers in RAM and the most layers on the card(s)
        that fit; over several cards, each with the -ts that holds the most context.

        The search places by the card alone (moving layers off the card cannot make the host smaller);
        each row then says whether the host part fits --ram too. With `placements`, exactly those are
        evaluated (`fit -ngl N`, `fit --n-cpu-moe N`, with -ts when given): no placement search.
        """
        if placements:
            return [self._row(budget, settings, p if p.split else self.placed(budget, settings, p))
                    for p in placements]
        if self.ram_mode:
            return [self._row(budget, settings, Placement(PlacementKind.RAM))]
        first = self.placed(budget, settings, Placement(PlacementKind.ALL))
        rows = [self._row(budget, settings, first)]
        if rows[0].card_fits:
            return rows
        # each placement's compute is a dry run of a model loaded with that placement (about 1 s for a big
        # file): search with the all-on-card compute (one model), then settle on the exact answer nearby
        # the estimate's compute only: the weights the backend took belong to `first`, not to the placements tried
        estimate = replace(self.compute(settings, first), weights=(), host_weights=None, host_tensors=None)

        def near(p: Placement) -> bool:
            if budget.multi:
                p = (self.placed(budget, settings, p) if self.tensor_split
                     else self.split_for(budget, settings, p, estimate))
            return self._row_of(budget, settings, p, estimate, card_only=True).fits

        def exact(p: Placement) -> bool:
            return self._fits(budget, settings, self.placed(budget, settings, p, estimate), card_only=True)

        if self.weights.has_experts() and self.runtime.is_server:  # Llama() has no tensor overrides
            moe = lambda k: Placement(PlacementKind.N_CPU_MOE, k)  # noqa: E731
            guess = self._smallest(lambda k: near(moe(k)), self.n_layer_all)
            n = self._settle(guess, lambda k: exact(moe(k)), better=-1, lo=1, hi=self.n_layer_all,
                             search=lambda: self._smallest(lambda k: exact(moe(k)), self.n_layer_all))
            chosen = moe(n if n is not None else self.n_layer_all)
            rows.append(self._row(budget, settings, self.placed(budget, settings, chosen, estimate)))
        ngl = lambda k: Placement(PlacementKind.NGL, k)  # noqa: E731
        guess = self._largest(lambda k: near(ngl(k)), self.n_layer_all, lowest=1)
        k = self._settle(guess, lambda k: exact(ngl(k)), better=+1, lo=1, hi=self.n_layer_all,
                         search=lambda: self._largest(lambda k: exact(ngl(k)), self.n_layer_all, lowest=1))
        chosen = ngl(k if k is not None else 1)
        rows.append(self._row(budget, settings, self.placed(budget, settings, chosen, estimate)))
        return rows

    MAX_SETTLE_STEPS = 3

    def _settle(self, guess: int | None, ok: Callable[[int], bool], *, better: int, lo: int, hi: int,
                search: Callable[[], int | None]) -> int | None:
        """The exact best k near an estimated one: step toward worse until ok, then toward better while ok;
        past MAX_SETTLE_STEPS steps (a poor estimate) the exact search itself."""
        k = guess if guess is not None else (hi if better < 0 else lo)  # no estimate: start at the worst end
        steps = 0
        while not ok(k):
            k -= better
            steps += 1
            if not lo <= k <= hi:
                return None
            if steps > self.MAX_SETTLE_STEPS:
                return search()
        while lo <= k + better <= hi and ok(k + better):
            k += better
            steps += 1
            if steps > self.MAX_SETTLE_STEPS:
                return search()
        return k

    @staticmethod
    def _smallest(ok: Callable[[int], bool], n_max: int) -> int | None:
        """Smallest k in 1..n_max with ok(k), ok monotone rising; None if none."""
        if not ok(n_max):
            return None
        lo, hi = 0, n_max  # ok(hi), not known for lo
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return hi

    @staticmethod
    def _largest(ok: Callable[[int], bool], n_max: int, lowest: int = 0) -> int | None:
        """Largest k in lowest..n_max with ok(k), ok monotone falling; None if none."""
        if not ok(lowest):
            return None
        lo, hi = lowest, n_max + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid
        return lo


def draft_placement(own: Placement, target: Placement, devices: tuple[int, ...] | None) -> Placement:
    """The draft model's placement beside the target's: split over the target's cards in its -ts proportions, or,
    with -devd, over those devices by the first entries of -ts (llama.cpp copies the target's tensor_split); one
    device (or none): no split."""
    split = target.split if devices is None else target.split[:len(devices)]
    return own.with_split(split if len(split) > 1 and (devices is None or len(devices) > 1) else ())


def plus(a, b: allocations.Parts):
    """`a` (Parts, HostParts) with `b`'s four parts added."""
    return replace(a, weights=a.weights + b.weights, kv=a.kv + b.kv, recurrent=a.recurrent + b.recurrent,
                   compute=a.compute + b.compute)


def proportional(n_layers: int, weights: list[int]) -> tuple[int, ...]:
    """n_layers shared in proportion to weights, whole layers (largest remainders); equal shares if all are 0."""
    total = sum(weights)
    if total <= 0:
        weights, total = [1] * len(weights), len(weights)
    shares = [n_layers * w / total for w in weights]
    counts = [int(x) for x in shares]
    for i in sorted(range(len(weights)), key=lambda i: shares[i] - counts[i], reverse=True)[:n_layers - sum(counts)]:
        counts[i] += 1
    return tuple(counts)
