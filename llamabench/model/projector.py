"""A vision projector (`--mmproj`, a `clip` GGUF): its weights from the tensor infos, its compute buffer
estimated from its vision-encoder metadata. Pure apart from reading the file.

llama-server puts the projector on the card unless --no-mmproj-offload. Its compute buffer holds, for
one image, the encoder's attention scores (n_head x P^2 f32 for P patches; clip runs without flash
attention by default) and the widest activations (P x (3 x hidden + FFN) f32): an estimate, labelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import BadModelFile
from .metadata import ModelMetadata

F32 = 4


@dataclass(frozen=True)
class Projector:
    source: str
    weights_bytes: int
    compute_bytes: int
    n_patches: int
    basis: str

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.compute_bytes


# the ranges a projector's vision-encoder values may take; llama.cpp's clip.cpp refuses an image_size
# over 8192 (n_patches would overflow an int32) and a patch_size outside 1..65535; the other caps are far
# above any published encoder (ViT-g: 1664 wide, 8192 FFN, 16 heads) and keep the estimate a sane number
MAX_IMAGE_SIZE = 8192
MAX_EMBEDDING = 65536
MAX_FFN = 4 * MAX_EMBEDDING
MAX_HEADS = 1024


def _key(meta: ModelMetadata, name: str, top: int) -> int:
    """A positive integer key up to `top`; one BadModelFile line otherwise."""
    value = meta.keys.get(name)
    if isinstance(value, tuple):
        value = value[0] if value else None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= top:
        raise BadModelFile(f"{meta.source}: a vision projector needs {name} from 1 to {top:,} (it is {_shown(value)})")
    return value


def _shown(value) -> str:
    if value is None:
        return "absent"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) < 10**15 else f"a {len(str(abs(value)))}-digit number"
    return f"a {type(value).__name__}"


def projector_from_metadata(meta: ModelMetadata) -> Projector:
    if meta.architecture != "clip":
        raise BadModelFile(f"{meta.source}: not a vision projector (general.architecture is "
                           f"{meta.architecture!r}, a projector's is 'clip')")
    image = _key(meta, "clip.vision.image_size", MAX_IMAGE_SIZE)
    patch = _key(meta, "clip.vision.patch_size", MAX_IMAGE_SIZE)
    if patch > image:
        raise BadModelFile(f"{meta.source}: clip.vision.patch_size {patch} is larger than clip.vision.image_size "
                           f"{image}: an image of no patch")
    hidden = _key(meta, "clip.vision.embedding_length", MAX_EMBEDDING)
    ffn = _key(meta, "clip.vision.feed_forward_length", MAX_FFN)
    heads = _key(meta, "clip.vision.attention.head_count", MAX_HEADS)
    n_patches = (image // patch) ** 2
    scores = heads * n_patches * n_patches * F32
    activations = n_patches * (3 * hidden + ffn) * F32
    weights = meta.weights_bytes
    return Projector(meta.source, weights, scores + activations, n_patches,
                     f"{meta.source}: weights {weights / 2**20:.2f} MiB from its tensor infos; compute buffer "
                     f"estimated for one {image}x{image} image ({n_patches} patches: {heads} heads x {n_patches}^2 "
                     f"f32 attention scores + activations), not llama.cpp's own figure")
