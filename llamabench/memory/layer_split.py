"""Which device holds which layer: llama.cpp's layer split over several devices (`-ts`, `-sm layer`). Pure.

`llama_model_base::load_tensors` (src/llama-model.cpp, vendored llama.cpp of llama-cpp-python 0.3.36):
- the input layer (token embeddings) stays on the CPU;
- layers from `i_gpu_start = max(n_layer_all + 1 - n_gpu_layers, 0)` on are offloaded, the output
  layer (index n_layer_all) counting as one, `act_gpu_layers = min(n_gpu_layers, n_layer_all + 1)`;
- the split points are the running sums of `tensor_split` (or of each device's free memory when it is
  all zero), normalised, in float;
- offloaded layer `il` goes to the first device whose split point is above
  `float(il - i_gpu_start) / act_gpu_layers` (`std::upper_bound`).
The arithmetic is float32, as llama.cpp's; a split given as whole layer counts (what `fit` prints) puts
exactly that many layers on each device.
"""

from __future__ import annotations

import bisect

import numpy as np

CPU = None  # the device of a layer that is not offloaded


def first_offloaded_layer(n_layer_all: int, n_gpu_layers: int) -> int:
    """i_gpu_start: layers from here on, and the output layer (index n_layer_all), are offloaded."""
    return max(n_layer_all + 1 - n_gpu_layers, 0)


def split_points(proportions: tuple[float, ...]) -> list[float]:
    """llama.cpp's normalised running sums of the proportions, in float32."""
    f32 = np.float32
    sums, total = [], f32(0.0)
    for value in proportions:
        total = f32(total + f32(value))
        sums.append(total)
    return [float(f32(s / total)) for s in sums]


def layer_devices(n_layer_all: int, n_gpu_layers: int, proportions: tuple[float, ...]) -> tuple[int | None, ...]:
    """The device index of every layer 0..n_layer_all (the last is the output layer); None: the CPU.

    `proportions` has one entry per device (a single device: (1.0,)); they may not all be zero.
    """
    n_devices = len(proportions)
    if n_devices == 0:
        return (CPU,) * (n_layer_all + 1)
    if not any(proportions):
        raise ValueError("a tensor split needs a proportion above 0")
    points = split_points(proportions)
    start = first_offloaded_layer(n_layer_all, n_gpu_layers)
    act = min(n_gpu_layers, n_layer_all + 1)
    out: list[int | None] = []
    for il in range(n_layer_all + 1):
        if il < start or il - start >= act:
            out.append(CPU)
            continue
        position = float(np.float32(np.float32(il - start) / np.float32(act)))
        out.append(min(bisect.bisect_right(points, position), n_devices - 1))
    return tuple(out)


def layer_counts(devices: tuple[int | None, ...], n_devices: int) -> tuple[int, ...]:
    """Layers on each device (the output layer counting as one)."""
    return tuple(sum(1 for d in devices if d == i) for i in range(n_devices))
