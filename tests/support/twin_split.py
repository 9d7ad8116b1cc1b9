"""Split a GGUF into a set of parts as llama.cpp's gguf-split writes them (split.no / split.count /
split.tensors.count, names NAME-00001-of-0000N.gguf): metadata in the first part, tensors spread over all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter, Keys

from llamabench.model.split_name import split_path


def write_split(source: Path, out_dir: Path, n_parts: int) -> list[Path]:
    reader = GGUFReader(source, "r")
    arch = str(reader.fields["general.architecture"].contents())
    stem = source.name.removesuffix(".gguf")
    tensors = list(reader.tensors)
    per_part = -(-len(tensors) // n_parts)
    paths = []
    for part in range(n_parts):
        path = out_dir / split_path(stem, part + 1, n_parts)
        writer = GGUFWriter(path, arch)
        if part == 0:
            for name, field in reader.fields.items():
                if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
                    continue
                value_type = field.types[0]
                if value_type == GGUFValueType.ARRAY:
                    writer.add_key_value(name, field.contents(), value_type, sub_type=field.types[-1])
                else:
                    writer.add_key_value(name, field.contents(), value_type)
        writer.add_uint16(Keys.Split.LLM_KV_SPLIT_NO, part)
        writer.add_uint16(Keys.Split.LLM_KV_SPLIT_COUNT, n_parts)
        writer.add_int32(Keys.Split.LLM_KV_SPLIT_TENSORS_COUNT, len(tensors))
        chunk = tensors[part * per_part:(part + 1) * per_part]
        for t in chunk:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, raw_dtype=t.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for t in chunk:
            writer.write_tensor_data(np.asarray(t.data))
        writer.close()
        paths.append(path)
    return paths
