"""GGUF metadata key spellings, once, from gguf.Keys: the part after `{arch}.`.

`ModelMetadata.arch_key(suffix)` and the catalog use these suffixes. Keys gguf.Keys does not name
(llama.cpp reads them all the same) are spelled here, with where llama.cpp reads them.
"""

from __future__ import annotations

from gguf import Keys


def _suffix(template: str) -> str:
    return template.removeprefix("{arch}.")


BLOCK_COUNT = _suffix(Keys.LLM.BLOCK_COUNT)
CONTEXT_LENGTH = _suffix(Keys.LLM.CONTEXT_LENGTH)
EMBEDDING_LENGTH = _suffix(Keys.LLM.EMBEDDING_LENGTH)
FEED_FORWARD_LENGTH = _suffix(Keys.LLM.FEED_FORWARD_LENGTH)
EXPERT_COUNT = _suffix(Keys.LLM.EXPERT_COUNT)
EXPERT_USED_COUNT = _suffix(Keys.LLM.EXPERT_USED_COUNT)
EXPERT_FEED_FORWARD_LENGTH = _suffix(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH)
EXPERT_SHARED_FEED_FORWARD_LENGTH = _suffix(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH)
NEXTN_PREDICT_LAYERS = _suffix(Keys.LLM.NEXTN_PREDICT_LAYERS)
FULL_ATTENTION_INTERVAL = _suffix(Keys.LLM.FULL_ATTENTION_INTERVAL)
HEAD_COUNT = _suffix(Keys.Attention.HEAD_COUNT)
HEAD_COUNT_KV = _suffix(Keys.Attention.HEAD_COUNT_KV)
KEY_LENGTH = _suffix(Keys.Attention.KEY_LENGTH)
VALUE_LENGTH = _suffix(Keys.Attention.VALUE_LENGTH)
KEY_LENGTH_SWA = _suffix(Keys.Attention.KEY_LENGTH_SWA)
VALUE_LENGTH_SWA = _suffix(Keys.Attention.VALUE_LENGTH_SWA)
KEY_LENGTH_MLA = _suffix(Keys.Attention.KEY_LENGTH_MLA)
VALUE_LENGTH_MLA = _suffix(Keys.Attention.VALUE_LENGTH_MLA)
KV_LORA_RANK = _suffix(Keys.Attention.KV_LORA_RANK)
SLIDING_WINDOW = _suffix(Keys.Attention.SLIDING_WINDOW)
SLIDING_WINDOW_PATTERN = _suffix(Keys.Attention.SLIDING_WINDOW_PATTERN)
RECURRENT_LAYERS = "attention.recurrent_layers"  # LLM_KV_ATTENTION_RECURRENT_LAYERS (src/llama-arch.cpp:305)
SSM_CONV_KERNEL = _suffix(Keys.SSM.CONV_KERNEL)
SSM_INNER_SIZE = _suffix(Keys.SSM.INNER_SIZE)
SSM_STATE_SIZE = _suffix(Keys.SSM.STATE_SIZE)
SSM_TIME_STEP_RANK = _suffix(Keys.SSM.TIME_STEP_RANK)
SSM_GROUP_COUNT = _suffix(Keys.SSM.GROUP_COUNT)
SHORTCONV_L_CACHE = _suffix(Keys.ShortConv.L_CACHE)
WKV_HEAD_SIZE = _suffix(Keys.WKV.HEAD_SIZE)
TOKEN_SHIFT_COUNT = _suffix(Keys.LLM.TOKEN_SHIFT_COUNT)
KDA_HEAD_DIM = _suffix(Keys.KDA.HEAD_DIM)
SHARED_KV_LAYERS = _suffix(Keys.Attention.SHARED_KV_LAYERS)
LEADING_DENSE_BLOCK_COUNT = _suffix(Keys.LLM.LEADING_DENSE_BLOCK_COUNT)
INDEXER_KEY_LENGTH = _suffix(Keys.Attention.Indexer.KEY_LENGTH)
INDEXER_TOP_K = _suffix(Keys.Attention.Indexer.TOP_K)
# the keys below are newer than the gguf package: LLM_KV_NAMES in src/llama-arch.cpp spells them
INDEXER_TYPES = "attention.indexer.types"  # LLM_KV_ATTENTION_INDEXER_TYPES (src/llama-arch.cpp:297)
INDEXER_KPOOL = "attention.indexer.kpool"  # LLM_KV_ATTENTION_INDEXER_KPOOL (src/llama-arch.cpp:298)
HYPER_CONNECTION_COUNT = "hyper_connection.count"  # LLM_KV_HYPER_CONNECTION_COUNT (src/llama-arch.cpp:307)
PLE_LAYERS = "ple.layers"  # LLM_KV_PLE_LAYERS (src/llama-arch.cpp:313)
PLE_NGRAM_SIZE = "ple.ngram_size"  # LLM_KV_PLE_NGRAM_SIZE (src/llama-arch.cpp:314)
PLE_CONV_KERNEL = "ple.conv_kernel"  # LLM_KV_PLE_CONV_KERNEL (src/llama-arch.cpp:316)
NUM_LOOPS = "num_loops"  # LLM_KV_NUM_LOOPS (src/llama-arch.cpp:251)
ROPE_SCALING_PREFIX = _suffix(Keys.Rope.SCALING_TYPE).removesuffix("type")  # "rope.scaling."
