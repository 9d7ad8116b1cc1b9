// llama.cpp's own memory breakdown of a context, per buffer type, for llamabench (compiled on first use
// against the installed libllama; see breakdown.py). llama_get_memory_breakdown (src/llama-ext.h) returns a
// std::map, which ctypes cannot read: this turns it into rows of plain C data.
// Under no_alloc (a dry run) the model's sizes are what each buffer type would hold
// (llama_model::memory_breakdown: ggml_backend_alloc_ctx_tensors_from_buft_size per weight context), so
// the rows say which device took which weights, after llama.cpp's own choice of a buffer type per tensor
// (llama_model::load_tensors: select_weight_buft / buft_supported; llama_model_loader::done_getting_tensors).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

struct llama_context;
struct llama_model;
struct ggml_backend_buffer;
struct ggml_backend_buffer_type;
typedef struct ggml_backend_buffer_type * ggml_backend_buffer_type_t;

// src/llama-ext.h, llama.cpp as vendored by llama-cpp-python 0.3.36 (the same definitions)
struct llama_memory_breakdown_data {
    size_t model   = 0;
    size_t context = 0;
    size_t compute = 0;
};
using llama_memory_breakdown = std::map<ggml_backend_buffer_type_t, llama_memory_breakdown_data>;
llama_memory_breakdown llama_get_memory_breakdown(const struct llama_context * ctx);
// src/llama-model.h: every weight tensor by name (a tied output matrix twice: once per device)
const std::vector<std::pair<std::string, struct ggml_tensor *>> & llama_internal_get_tensor_map(const struct llama_model * model);
extern "C" const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft);
extern "C" ggml_backend_buffer_type_t ggml_backend_buffer_get_type(struct ggml_backend_buffer * buffer);
extern "C" bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft);

// ggml.h: struct ggml_tensor begins with its type and its buffer (under no_alloc, the buffer type's dummy buffer)
struct llamabench_tensor_head {
    int                          type;
    struct ggml_backend_buffer * buffer;
};

extern "C" {

struct llamabench_breakdown_row {
    char     name[128];
    uint64_t model;
    uint64_t context;
    uint64_t compute;
};

// Fills up to `cap` rows; returns how many buffer types there are (more than cap: call again), -1 on failure.
int llamabench_memory_breakdown(const struct llama_context * ctx, struct llamabench_breakdown_row * rows, int cap) {
    try {
        const llama_memory_breakdown mb = llama_get_memory_breakdown(ctx);
        int n = 0;
        for (const auto & entry : mb) {
            if (n < cap) {
                const char * name = ggml_backend_buft_name(entry.first);
                std::strncpy(rows[n].name, name ? name : "?", sizeof(rows[n].name) - 1);
                rows[n].name[sizeof(rows[n].name) - 1] = '\0';
                rows[n].model   = entry.second.model;
                rows[n].context = entry.second.context;
                rows[n].compute = entry.second.compute;
            }
            n++;
        }
        return n;
    } catch (...) {
        return -1;
    }
}

struct llamabench_tensor_row {
    char name[128];
    char buft[128];
    int  is_host;
};

// Which buffer type llama.cpp gave each weight tensor of a loaded model; returns the count (more than cap: call
// again with more room), -1 on failure.
int llamabench_tensor_buffers(const struct llama_model * model, struct llamabench_tensor_row * rows, int cap) {
    try {
        const auto & tensors = llama_internal_get_tensor_map(model);
        int n = 0;
        for (const auto & entry : tensors) {
            if (n < cap) {
                const auto * head = reinterpret_cast<const llamabench_tensor_head *>(entry.second);
                ggml_backend_buffer_type_t buft = head && head->buffer ? ggml_backend_buffer_get_type(head->buffer) : nullptr;
                const char * name = buft ? ggml_backend_buft_name(buft) : "";
                std::strncpy(rows[n].name, entry.first.c_str(), sizeof(rows[n].name) - 1);
                rows[n].name[sizeof(rows[n].name) - 1] = '\0';
                std::strncpy(rows[n].buft, name ? name : "", sizeof(rows[n].buft) - 1);
                rows[n].buft[sizeof(rows[n].buft) - 1] = '\0';
                rows[n].is_host = buft ? (ggml_backend_buft_is_host(buft) ? 1 : 0) : -1;
            }
            n++;
        }
        return n;
    } catch (...) {
        return -1;
    }
}

}

// ---- a device's backend rules on an emulated card (llama.cpp's RPC device on 127.0.0.1) ----
// The RPC device answers as a CPU does: no op offload (ggml-rpc.cpp's device interface has offload_op NULL), the CPU's
// alignment and sizes, every op supported. A real GPU's backend differs where the compute buffer is sized: these rows
// set, on one RPC device and its buffer type, what the target backend answers instead, each function a copy of that
// backend's own (file and function named beside it). Compiled only where ggml.h is found (LLAMABENCH_GGML_H).
#ifdef LLAMABENCH_GGML_H
#include "ggml.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <initializer_list>
#include <set>

// ggml/src/ggml-backend-impl.h, as vendored by llama-cpp-python 0.3.36 (the same definitions, in order)
struct llamabench_buft_i {
    const char * (*get_name)(ggml_backend_buffer_type_t);
    void *       (*alloc_buffer)(ggml_backend_buffer_type_t, size_t);
    size_t       (*get_alignment)(ggml_backend_buffer_type_t);
    size_t       (*get_max_size)(ggml_backend_buffer_type_t);
    size_t       (*get_alloc_size)(ggml_backend_buffer_type_t, const struct ggml_tensor *);
    bool         (*is_host)(ggml_backend_buffer_type_t);
};
struct llamabench_buft {
    struct llamabench_buft_i iface;
    void * device;
    void * context;
};
struct llamabench_device;
struct llamabench_device_i {
    const char * (*get_name)(struct llamabench_device *);
    const char * (*get_description)(struct llamabench_device *);
    void         (*get_memory)(struct llamabench_device *, size_t *, size_t *);
    int          (*get_type)(struct llamabench_device *);
    void         (*get_props)(struct llamabench_device *, void *);
    void *       (*init_backend)(struct llamabench_device *, const char *);
    ggml_backend_buffer_type_t (*get_buffer_type)(struct llamabench_device *);
    ggml_backend_buffer_type_t (*get_host_buffer_type)(struct llamabench_device *);
    void *       (*buffer_from_host_ptr)(struct llamabench_device *, void *, size_t, size_t);
    bool         (*supports_op)(struct llamabench_device *, const struct ggml_tensor *);
    bool         (*supports_buft)(struct llamabench_device *, ggml_backend_buffer_type_t);
    bool         (*offload_op)(struct llamabench_device *, const struct ggml_tensor *);
    void *       (*event_new)(struct llamabench_device *);
    void         (*event_free)(struct llamabench_device *, void *);
    void         (*event_synchronize)(struct llamabench_device *, void *);
};
struct llamabench_device {
    struct llamabench_device_i iface;
    void * reg;
    void * context;
};

extern "C" {

// What the target backend answers (llamabench/memory/backends.py fills it).
struct llamabench_backend_rules {
    int      offload;            // 0: none (RPC, CPU); 1: CUDA / ROCm / Vulkan's batch rule; 2: Metal's (matmuls only)
    int64_t  min_batch;          // op_offload_min_batch_size: GGML_OP_OFFLOAD_MIN_BATCH, 32 by default
    uint64_t max_tensor_bytes;   // the largest tensor an op may touch (Vulkan: maxStorageBufferRange); 0: no limit
    int      cuda_alloc_size;    // 1: ggml-cuda's get_alloc_size of flash attention (f16 copies of a quantized K and V)
    int      vulkan_order;       // 1: ggml-vulkan's order of a split's nodes (its graph_optimize, vk_order above)
};

}  // extern "C"

// ---- Vulkan's order of a split's nodes, on an emulated card answering as Vulkan ----
// ggml-vulkan reorders each split's nodes before the scheduler allocates them (ggml_vk_graph_optimize, the backend's
// graph_optimize), so that independent nodes run together and fusions stay adjacent; the order changes which tensors
// are alive at once, and so the compute buffer (a few percent on small models). What follows is that function and the
// patterns and helpers it uses, copied unchanged from the llama.cpp vendored by llama-cpp-python 0.3.36
// (ggml/src/ggml-vulkan/ggml-vulkan.cpp: ggml_vk_graph_optimize, ggml_vk_can_fuse_unary_mul,
// ggml_vk_unary_mul_op_index; ggml/src/ggml-vulkan/ggml-vulkan-types.h: the patterns). MIT License,
// Copyright (c) 2023-2026 The ggml authors. Only the device's flag (GGML_VK_DISABLE_GRAPH_OPTIMIZE, read as ggml-vulkan
// reads it) and the logging differ.

// ggml/src/ggml-impl.h: the graph's head (only its nodes are read here), and the fusion check ggml-base exports
struct ggml_cgraph {
    int size;
    int n_nodes;
    int n_leafs;
    struct ggml_tensor ** nodes;
};
extern "C" bool ggml_can_fuse_subgraph_ext(const struct ggml_cgraph * cgraph, const int * node_idxs, int count,
                                           const enum ggml_op * ops, const int * outputs, int num_outputs);
// ggml/src/ggml-backend-impl.h
struct ggml_backend_graph_optimize_params {
    void (*add_alloc_dep)(void * user_data, struct ggml_tensor * tensor, struct ggml_tensor * until);
    void * user_data;
};

namespace vk_order {

static constexpr std::initializer_list<ggml_op> topk_moe_early_softmax_norm{ GGML_OP_SOFT_MAX, GGML_OP_RESHAPE,  GGML_OP_ARGSORT,
                                                                             GGML_OP_VIEW,     GGML_OP_GET_ROWS, GGML_OP_RESHAPE,
                                                                             GGML_OP_SUM_ROWS, GGML_OP_CLAMP,    GGML_OP_DIV,
                                                                             GGML_OP_RESHAPE };

static constexpr std::initializer_list<ggml_op> topk_moe_sigmoid_norm_bias{ GGML_OP_UNARY,    GGML_OP_RESHAPE,  GGML_OP_ADD,
                                                                            GGML_OP_ARGSORT,  GGML_OP_VIEW,     GGML_OP_GET_ROWS,
                                                                            GGML_OP_RESHAPE,  GGML_OP_SUM_ROWS, GGML_OP_CLAMP,
                                                                            GGML_OP_DIV,      GGML_OP_RESHAPE };

static constexpr std::initializer_list<ggml_op> topk_moe_sqrt_softplus_norm_bias{ GGML_OP_UNARY,    GGML_OP_SQRT,
                                                                                  GGML_OP_RESHAPE,  GGML_OP_ADD,
                                                                                  GGML_OP_ARGSORT,  GGML_OP_VIEW,
                                                                                  GGML_OP_GET_ROWS, GGML_OP_RESHAPE,
                                                                                  GGML_OP_SUM_ROWS, GGML_OP_CLAMP,
                                                                                  GGML_OP_DIV,      GGML_OP_RESHAPE };

static constexpr std::initializer_list<ggml_op> topk_moe_early_softmax     { GGML_OP_SOFT_MAX, GGML_OP_RESHAPE,  GGML_OP_ARGSORT,
                                                                             GGML_OP_VIEW,     GGML_OP_GET_ROWS };

static constexpr std::initializer_list<ggml_op> topk_moe_late_softmax      { GGML_OP_ARGSORT,  GGML_OP_VIEW,
                                                                             GGML_OP_GET_ROWS, GGML_OP_RESHAPE,
                                                                             GGML_OP_SOFT_MAX, GGML_OP_RESHAPE };

static constexpr std::initializer_list<ggml_op> snake_pattern              { GGML_OP_MUL,      GGML_OP_SIN,
                                                                             GGML_OP_SQR,      GGML_OP_MUL,
                                                                             GGML_OP_ADD };

static constexpr std::initializer_list<ggml_op> topk_qsa_pattern { GGML_OP_GET_ROWS, GGML_OP_PERMUTE,
                                                                   GGML_OP_CONT,     GGML_OP_CPY,
                                                                   GGML_OP_RESHAPE,  GGML_OP_ADD,
                                                                   GGML_OP_TOP_K };


static constexpr std::initializer_list<ggml_op> rms_norm_mul_add_mul_pattern { GGML_OP_RMS_NORM, GGML_OP_MUL, GGML_OP_ADD, GGML_OP_MUL };

static constexpr std::initializer_list<ggml_op> rms_norm_mul_add_pattern     { GGML_OP_RMS_NORM, GGML_OP_MUL, GGML_OP_ADD };

static constexpr std::initializer_list<ggml_op> rms_norm_mul_rope_view_set_rows_pattern { GGML_OP_RMS_NORM, GGML_OP_MUL, GGML_OP_ROPE, GGML_OP_VIEW, GGML_OP_SET_ROWS };

static constexpr std::initializer_list<ggml_op> rms_norm_view_set_rows_pattern { GGML_OP_RMS_NORM, GGML_OP_VIEW, GGML_OP_SET_ROWS };

static constexpr std::initializer_list<ggml_op> rope_view_set_rows_pattern { GGML_OP_ROPE, GGML_OP_VIEW, GGML_OP_SET_ROWS };

// scale_out*sigmoid(scale_in*x) as the hc_post weights (qwen4exp hc_combine)
static constexpr std::initializer_list<ggml_op> hc_post_gate_pattern { GGML_OP_SCALE, GGML_OP_UNARY, GGML_OP_SCALE, GGML_OP_DSV4_HC_POST };

static int ggml_vk_unary_mul_op_index(ggml_unary_op op) {
    switch (op) {
        case GGML_UNARY_OP_GELU:     return 0;
        case GGML_UNARY_OP_SIGMOID:  return 1;
        case GGML_UNARY_OP_SILU:     return 2;
        case GGML_UNARY_OP_SOFTPLUS: return 3;
        default:                     return -1;
    }
}

static bool ggml_vk_can_fuse_unary_mul(const struct ggml_cgraph * cgraph, int unary_idx, int mul_idx) {
    const ggml_tensor * unary = cgraph->nodes[unary_idx];
    const ggml_tensor * mul = cgraph->nodes[mul_idx];

    if (ggml_vk_unary_mul_op_index(ggml_get_unary_op(unary)) < 0) {
        return false;
    }
    if (unary->type != GGML_TYPE_F32 && unary->type != GGML_TYPE_F16) {
        return false;
    }
    if (unary->type != mul->type) {
        return false;
    }
    if (mul->src[0] != unary && mul->src[1] != unary) {
        return false;
    }
    const ggml_tensor * other = (mul->src[0] == unary) ? mul->src[1] : mul->src[0];
    if (other == nullptr || other->type != unary->type) {
        return false;
    }
    if (!ggml_is_contiguous_1(other) || !ggml_is_contiguous_1(unary->src[0])) {
        return false;
    }
    // fastmod needs src to tile into dst
    if (mul->src[0] == unary) {
        return ggml_can_repeat(other, unary);
    }
    return ggml_can_repeat(unary, mul->src[0]);
}

static void ggml_vk_graph_optimize(void * backend, struct ggml_cgraph * graph, struct ggml_backend_graph_optimize_params * params)
{
    (void) backend;
    if (getenv("GGML_VK_DISABLE_GRAPH_OPTIMIZE") != nullptr) {  // ggml_vk_get_device: disable_graph_optimize
        return;
    }

    auto const &is_empty = [](const ggml_tensor * node) -> bool {
        return node->op == GGML_OP_NONE || node->op == GGML_OP_RESHAPE || node->op == GGML_OP_TRANSPOSE || node->op == GGML_OP_VIEW || node->op == GGML_OP_PERMUTE;
    };

    auto const &is_src_of = [&is_empty](const ggml_tensor *dst, const ggml_tensor *src) -> bool {
        auto const &base = [](const ggml_tensor * tensor) {
            return tensor->view_src ? tensor->view_src : tensor;
        };
        for (uint32_t s = 0; s < GGML_MAX_SRC; ++s) {
            if (dst->src[s] == src) {
                return true;
            }
            if (is_empty(dst) || is_empty(src)) {
                continue;
            }
            // A source view of dst may read storage written through a different view by src.
            if (dst->src[s] && base(dst->src[s]) == base(src)) {
                return true;
            }
            // Moving dst forward may overwrite storage still read through a view by src.
            if (src->src[s] && base(dst) == base(src->src[s])) {
                return true;
            }
        }
        // implicit dependency if they view the same tensor
        if (base(dst) == base(src)) {
            return true;
        }
        return false;
    };

    std::vector<ggml_tensor *> new_order;
    std::vector<bool> used(graph->n_nodes, false);
    std::set<ggml_tensor *> used_node_set;

    int first_unused = 0;

    // scheduled or zero-compute nodes in [lo, hi)
    auto const &empty_or_scheduled_between = [&](int lo, int hi) -> bool {
        for (int v = lo; v < hi; ++v) {
            if (!used[v] && !is_empty(graph->nodes[v])) {
                return false;
            }
        }
        return true;
    };
    while (first_unused < graph->n_nodes) {
        std::vector<int> current_set;

        // Check for fusion patterns and avoid reordering them
        auto const &match_pattern = [&](const std::initializer_list<ggml_op> &pattern, int start) -> bool {
            if (start + (int)pattern.size() <= graph->n_nodes) {
                bool is_pattern = true;
                for (size_t j = 0; j < pattern.size(); ++j) {
                    if (graph->nodes[start + j]->op != pattern.begin()[j] || used[start + j]) {
                        is_pattern = false;
                    }
                }
                return is_pattern;
            }
            return false;
        };

        auto const &keep_pattern = [&](const std::initializer_list<ggml_op> &pattern) -> bool {
            if (match_pattern(pattern, first_unused)) {
                for (size_t j = 0; j < pattern.size(); ++j) {
                    new_order.push_back(graph->nodes[first_unused + j]);
                    used_node_set.insert(graph->nodes[first_unused + j]);
                    used[first_unused + j] = true;
                }
                while (first_unused < graph->n_nodes && used[first_unused]) {
                    first_unused++;
                }
                return true;
            }
            return false;
        };

        auto const &add_pattern_alloc_deps = [&](const std::initializer_list<ggml_op> &pattern, int last_node) {
            // Keep external inputs alive through the fused output.
            std::set<ggml_tensor *> seen;
            for (size_t j = 0; j < pattern.size(); ++j) {
                ggml_tensor * node = graph->nodes[first_unused + j];
                for (uint32_t s = 0; s < GGML_MAX_SRC; ++s) {
                    ggml_tensor * src = node->src[s];
                    if (src && seen.insert(src).second) {
                        params->add_alloc_dep(params->user_data, src, graph->nodes[last_node]);
                    }
                }
                seen.insert(node);
            }
        };

        auto const &keep_topk_moe_pattern = [&](const std::initializer_list<ggml_op> &pattern) -> bool {
            if (!match_pattern(pattern, first_unused)) {
                return false;
            }

            int last_node = first_unused + (int) pattern.size() - 1;
            // Some TOPK_MOE variants fuse a trailing scale.
            if (last_node + 1 < graph->n_nodes && graph->nodes[last_node + 1]->op == GGML_OP_SCALE) {
                last_node++;
            }

            add_pattern_alloc_deps(pattern, last_node);

            return keep_pattern(pattern);
        };

        if (keep_topk_moe_pattern(topk_moe_early_softmax_norm)) {
            continue;
        }
        if (keep_topk_moe_pattern(topk_moe_sigmoid_norm_bias)) {
            continue;
        }
        if (keep_topk_moe_pattern(topk_moe_sqrt_softplus_norm_bias)) {
            continue;
        }
        if (keep_topk_moe_pattern(topk_moe_early_softmax)) {
            continue;
        }
        if (keep_topk_moe_pattern(topk_moe_late_softmax)) {
            continue;
        }
        if (keep_pattern(snake_pattern)) {
            continue;
        }
        if (keep_pattern(topk_qsa_pattern)) {
            continue;
        }

        if (keep_pattern(rms_norm_mul_add_mul_pattern)) {
            continue;
        }
        if (keep_pattern(rms_norm_mul_add_pattern)) {
            continue;
        }
        if (keep_pattern(rms_norm_mul_rope_view_set_rows_pattern)) {
            continue;
        }
        if (keep_pattern(rms_norm_view_set_rows_pattern)) {
            continue;
        }
        if (keep_pattern(rope_view_set_rows_pattern)) {
            continue;
        }
        if (match_pattern(hc_post_gate_pattern, first_unused)) {
            add_pattern_alloc_deps(hc_post_gate_pattern, first_unused + (int) hc_post_gate_pattern.size() - 1);
            keep_pattern(hc_post_gate_pattern);
            continue;
        }

        // First, grab the next unused node.
        current_set.push_back(first_unused);

        // Loop through the next N nodes. Grab any that don't depend on other nodes that
        // haven't already been run. Nodes that have already been run have used[i] set
        // to true. Allow nodes that depend on the previous node if it's a fusion pattern
        // that we support (e.g. RMS_NORM + MUL).
        // This first pass only grabs "real" (non-view nodes). Second pass grabs view nodes.
        // The goal is to not interleave real and view nodes in a way that breaks fusion.
        const int NUM_TO_CHECK = 20;
        for (int j = first_unused+1; j < std::min(first_unused + NUM_TO_CHECK, graph->n_nodes); ++j) {
            if (used[j]) {
                continue;
            }
            if (is_empty(graph->nodes[j])) {
                continue;
            }
            // Protect every interior QSA node (not just the start): the mask branch is
            // independent, so it gets pulled out and breaks keep_pattern otherwise.
            auto const &in_qsa_pattern = [&](int n) -> bool {
                for (int o = 0; o < (int) topk_qsa_pattern.size(); ++o) {
                    if (n - o >= 0 && match_pattern(topk_qsa_pattern, n - o)) {
                        return true;
                    }
                }
                return false;
            };
            if (match_pattern(topk_moe_early_softmax_norm, j) ||
                match_pattern(topk_moe_sigmoid_norm_bias, j) ||
                match_pattern(topk_moe_sqrt_softplus_norm_bias, j) ||
                match_pattern(topk_moe_early_softmax, j) ||
                match_pattern(topk_moe_late_softmax, j) ||
                match_pattern(snake_pattern, j) ||
                in_qsa_pattern(j) ||
                match_pattern(rms_norm_mul_add_mul_pattern, j) ||
                match_pattern(rms_norm_mul_add_pattern, j) ||
                match_pattern(rms_norm_mul_rope_view_set_rows_pattern, j) ||
                match_pattern(rms_norm_view_set_rows_pattern, j) ||
                match_pattern(rope_view_set_rows_pattern, j) ||
                match_pattern(hc_post_gate_pattern, j)) {
                continue;
            }
            bool ok = true;
            for (int c = first_unused; c < j; ++c) {
                if (!used[c] &&
                    is_src_of(graph->nodes[j], graph->nodes[c]) &&
                    !(c == current_set.back() && graph->nodes[c]->op == GGML_OP_RMS_NORM && graph->nodes[j]->op == GGML_OP_MUL && empty_or_scheduled_between(c+1, j)) &&
                    !(c == current_set.back() && graph->nodes[c]->op == GGML_OP_UNARY && graph->nodes[j]->op == GGML_OP_MUL && empty_or_scheduled_between(c+1, j)) &&
                    !(j == c+1 && c == current_set.back() && graph->nodes[c]->op == GGML_OP_MUL_MAT && graph->nodes[j]->op == GGML_OP_ADD) &&
                    !(j == c+1 && c == current_set.back() && graph->nodes[c]->op == GGML_OP_MUL_MAT_ID && graph->nodes[j]->op == GGML_OP_ADD_ID) &&
                    !(j == c+1 && c == current_set.back() && graph->nodes[c]->op == GGML_OP_MUL_MAT_ID && graph->nodes[j]->op == GGML_OP_MUL) &&
                    !(j == c+1 && c == current_set.back() && graph->nodes[c]->op == GGML_OP_ADD && graph->nodes[j]->op == GGML_OP_ADD) &&
                    !(j == c+1 && c == current_set.back() && graph->nodes[c]->op == GGML_OP_SSM_CONV && graph->nodes[j]->op == GGML_OP_ADD) &&
                    !(j == c+1 && c == current_set.back() && graph->nodes[c]->op == GGML_OP_SSM_CONV && graph->nodes[j]->op == GGML_OP_UNARY)) {
                    ok = false;
                    break;
                }
            }
            if (ok) {
                current_set.push_back(j);

                int rope_idx = j;

                // When we've found RMS_NORM + MUL, try to find a ROPE that uses it
                if (j > 0 &&
                    graph->nodes[j]->op == GGML_OP_MUL &&
                    graph->nodes[j-1]->op == GGML_OP_RMS_NORM) {
                    for (int k = j + 1; k < std::min(j + 15, graph->n_nodes); ++k) {
                        if (graph->nodes[k]->op == GGML_OP_ROPE &&
                            graph->nodes[k]->src[0] == graph->nodes[j] &&
                            // Check that other srcs are already valid
                            graph->nodes[k]->src[1]->op == GGML_OP_NONE &&
                            (graph->nodes[k]->src[2] == nullptr || graph->nodes[k]->src[2]->op == GGML_OP_NONE)) {
                            rope_idx = k;
                            current_set.push_back(rope_idx);
                            used[rope_idx] = true;
                            break;
                        }
                    }
                }
                // Look for ROPE/RMS_NORM + VIEW + SET_ROWS and make them consecutive
                if (graph->nodes[rope_idx]->op == GGML_OP_ROPE || graph->nodes[rope_idx]->op == GGML_OP_RMS_NORM) {
                    int view_idx = -1;
                    int set_rows_idx = -1;
                    for (int k = rope_idx + 1; k < std::min(rope_idx + 15, graph->n_nodes); ++k) {
                        if (used[k]) {
                            continue;
                        }
                        if (view_idx == -1 && graph->nodes[k]->op == GGML_OP_VIEW && graph->nodes[k]->src[0] == graph->nodes[rope_idx]) {
                            view_idx = k;
                            continue;
                        }
                        if (view_idx != -1 && graph->nodes[k]->op == GGML_OP_SET_ROWS && graph->nodes[k]->src[0] == graph->nodes[view_idx]) {
                            set_rows_idx = k;
                            break;
                        }
                    }
                    if (set_rows_idx != -1) {
                        const int node_idxs[] = { rope_idx, view_idx, set_rows_idx };
                        const ggml_op ops[] = { graph->nodes[rope_idx]->op, GGML_OP_VIEW, GGML_OP_SET_ROWS };
                        bool can_pull = ggml_can_fuse_subgraph_ext(graph, node_idxs, 3, ops, &set_rows_idx, 1);

                        for (int c = rope_idx + 1; can_pull && c < set_rows_idx; ++c) {
                            if (!used[c] && c != view_idx && !is_empty(graph->nodes[c]) &&
                                is_src_of(graph->nodes[set_rows_idx], graph->nodes[c])) {
                                can_pull = false;
                            }
                        }

                        if (can_pull) {
                            current_set.push_back(view_idx);
                            current_set.push_back(set_rows_idx);
                            used[view_idx] = true;
                            used[set_rows_idx] = true;
                        }
                    }
                }
                // Look for MUL_MAT_ID + ADD_ID + MUL
                if (j > 0 &&
                    graph->nodes[j]->op == GGML_OP_ADD_ID &&
                    graph->nodes[j-1]->op == GGML_OP_MUL_MAT_ID) {
                    for (int k = j + 1; k < std::min(j + 15, graph->n_nodes); ++k) {
                        if (graph->nodes[k]->op == GGML_OP_MUL &&
                            graph->nodes[k]->src[0] == graph->nodes[j] &&
                            // src1 must either be weights or already processed
                            (graph->nodes[k]->src[1]->op == GGML_OP_NONE || used_node_set.find(graph->nodes[k]->src[1]) != used_node_set.end())) {
                            current_set.push_back(k);
                            used[k] = true;
                            break;
                        }
                    }
                }
                // Look for MUL_MAT + ADD + ADD
                if (j > 0 &&
                    graph->nodes[j]->op == GGML_OP_ADD &&
                    graph->nodes[j-1]->op == GGML_OP_MUL_MAT) {
                    for (int k = j + 1; k < std::min(j + 15, graph->n_nodes); ++k) {
                        if (graph->nodes[k]->op == GGML_OP_ADD &&
                            graph->nodes[k]->src[0] == graph->nodes[j] &&
                            // src1 must either be weights or already processed
                            (graph->nodes[k]->src[1]->op == GGML_OP_NONE || used_node_set.find(graph->nodes[k]->src[1]) != used_node_set.end())) {
                            current_set.push_back(k);
                            used[k] = true;
                            break;
                        }
                    }
                }
                // SSM_CONV + ADD + UNARY: pull the consuming UNARY forward
                if (j > 0 &&
                    graph->nodes[j]->op == GGML_OP_ADD &&
                    graph->nodes[j-1]->op == GGML_OP_SSM_CONV) {
                    for (int k = j + 1; k < std::min(j + 15, graph->n_nodes); ++k) {
                        if (graph->nodes[k]->op == GGML_OP_UNARY &&
                            graph->nodes[k]->src[0] == graph->nodes[j]) {
                            current_set.push_back(k);
                            used[k] = true;
                            break;
                        }
                    }
                }
                // UNARY + MUL: pull the consuming MUL forward
                if (j > 0 &&
                    graph->nodes[j]->op == GGML_OP_UNARY) {
                    for (int k = j + 1; k < std::min(j + 15, graph->n_nodes); ++k) {
                        ggml_tensor * mul = graph->nodes[k];
                        if (mul->op != GGML_OP_MUL || (mul->src[0] != graph->nodes[j] && mul->src[1] != graph->nodes[j])) {
                            continue;
                        }
                        ggml_tensor * other = (mul->src[0] == graph->nodes[j]) ? mul->src[1] : mul->src[0];
                        // the other src must either be weights or already processed
                        if (!(other->op == GGML_OP_NONE || used_node_set.find(other) != used_node_set.end())) {
                            continue;
                        }
                        if (!ggml_vk_can_fuse_unary_mul(graph, j, k)) {
                            continue;
                        }
                        current_set.push_back(k);
                        used[k] = true;
                        break;
                    }
                }
            }
        }
        // Second pass grabs view nodes.
        // Skip this if it would break a fusion optimization (don't split up add->rms_norm or add->add).
        if (graph->nodes[current_set.back()]->op != GGML_OP_ADD) {
            for (int j = first_unused+1; j < std::min(first_unused + NUM_TO_CHECK, graph->n_nodes); ++j) {
                if (used[j]) {
                    continue;
                }
                if (!is_empty(graph->nodes[j])) {
                    continue;
                }
                bool ok = true;
                for (int c = first_unused; c < j; ++c) {
                    bool c_in_current_set = std::find(current_set.begin(), current_set.end(), c) != current_set.end();
                    // skip views whose srcs haven't been processed.
                    if (!used[c] &&
                        is_src_of(graph->nodes[j], graph->nodes[c]) &&
                        !c_in_current_set) {
                        ok = false;
                        break;
                    }
                }
                if (ok) {
                    current_set.push_back(j);
                }
            }
        }

        // Push the current set into new_order
        for (auto c : current_set) {
            new_order.push_back(graph->nodes[c]);
            used_node_set.insert(graph->nodes[c]);
            used[c] = true;
        }
        while (first_unused < graph->n_nodes && used[first_unused]) {
            first_unused++;
        }
    }
    // Replace the graph with the new order.
    for (int i = 0; i < graph->n_nodes; ++i) {
        graph->nodes[i] = new_order[i];
    }
}

}  // namespace vk_order

// ggml/src/ggml-backend-impl.h: a backend (stream) and its interface, up to graph_optimize (the last member)
struct llamabench_backend_i {
    void * before_graph_optimize[15];  // get_name ... event_wait
    void (*graph_optimize)(void * backend, struct ggml_cgraph * cgraph, struct ggml_backend_graph_optimize_params * params);
};
struct llamabench_backend {
    void * guid;
    struct llamabench_backend_i iface;
    void * device;
    void * context;
};

namespace {

struct emulated_device {
    llamabench_backend_rules rules;
    llamabench_device_i original;
};
struct emulated_buft {
    llamabench_backend_rules rules;
    llamabench_buft_i original;
};
std::map<const void *, emulated_device> g_devices;
std::map<const void *, emulated_buft> g_bufts;

// ggml-cuda.cu get_op_batch_size and ggml-vulkan-debug.cpp ggml_vk_get_op_batch_size (the same rule)
int64_t gpu_op_batch_size(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_GET_ROWS:   return 0;
        case GGML_OP_MUL_MAT:    return op->ne[1];
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_ROPE:
        case GGML_OP_ROPE_BACK:  return op->ne[2];
        default:                 return ggml_nrows(op);
    }
}

// ggml-cuda.cu ggml_backend_cuda_device_offload_op, ggml-vulkan.cpp ggml_backend_vk_device_offload_op,
// ggml-metal.cpp ggml_backend_metal_device_offload_op (matmuls only, its get_op_batch_size has no ROPE case)
bool emulated_offload_op(llamabench_device * dev, const ggml_tensor * op) {
    auto it = g_devices.find(dev);
    if (it == g_devices.end()) {
        return false;
    }
    const llamabench_backend_rules & r = it->second.rules;
    if (r.offload == 2) {
        return (op->op == GGML_OP_MUL_MAT || op->op == GGML_OP_MUL_MAT_ID) && gpu_op_batch_size(op) >= r.min_batch;
    }
    return r.offload == 1 && gpu_op_batch_size(op) >= r.min_batch;
}

// the RPC backend (stream) the scheduler computes with, given Vulkan's node order where the rules say so
void * emulated_init_backend(llamabench_device * dev, const char * params) {
    auto it = g_devices.find(dev);
    if (it == g_devices.end() || !it->second.original.init_backend) {
        return nullptr;
    }
    auto * backend = static_cast<llamabench_backend *>(it->second.original.init_backend(dev, params));
    if (backend && it->second.rules.vulkan_order) {
        backend->iface.graph_optimize = vk_order::ggml_vk_graph_optimize;
    }
    return backend;
}

// ggml-vulkan.cpp ggml_backend_vk_device_supports_op: no tensor of an op over maxStorageBufferRange
bool emulated_supports_op(llamabench_device * dev, const ggml_tensor * op) {
    auto it = g_devices.find(dev);
    if (it == g_devices.end()) {
        return true;
    }
    const uint64_t limit = it->second.rules.max_tensor_bytes;
    if (limit) {
        for (int i = 0; i < GGML_MAX_SRC; i++) {
            if (op->src[i] && ggml_nbytes(op->src[i]) > limit) {
                return false;
            }
        }
        if (ggml_nbytes(op) > limit) {
            return false;
        }
    }
    return it->second.original.supports_op ? it->second.original.supports_op(dev, op) : true;
}

// ggml-cuda/fattn.cu ggml_cuda_get_best_fattn_kernel: whether the kernel a prefill batch takes (MMA or tile, not the
// vector kernel) converts a non-f16 K and V to f16 first, into room after the op's output
bool cuda_fattn_converts(const ggml_tensor * dst) {
    const ggml_tensor * Q = dst->src[0];
    const ggml_tensor * K = dst->src[1];
    const bool vector_kernel_fits = Q->ne[0] <= 256 && Q->ne[0] % 64 == 0 && Q->ne[0] != 192 && K->ne[1] % 256 == 0;
    return !(vector_kernel_fits && Q->ne[1] == 1);  // one token a sequence: the vector kernel reads K and V as they are
}

// ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alloc_size for flash attention, and fattn-common.cuh
// ggml_cuda_flash_attn_ext_get_f16_extra_data (the f16 copies 128-aligned). Its other rule, a quantized matrix's last
// row padded to 512 elements (MATRIX_ROW_PADDING), adds at most a row of bytes a tensor and is left out: the weights
// stay the file's tensors, as the fit places them.
size_t cuda_fattn_alloc_size(const ggml_tensor * tensor) {
    size_t size = ggml_nbytes(tensor);
    {
        const ggml_tensor * K = tensor->src[1];
        const ggml_tensor * V = tensor->src[2];
        const bool V_is_K_view = V->view_src && (V->view_src == K || (V->view_src == K->view_src && V->view_offs == K->view_offs));
        size_t end = size;
        if (K->type != GGML_TYPE_F16) {
            end = (end + 127) / 128 * 128 + ggml_nelements(K) * ggml_type_size(GGML_TYPE_F16);
        }
        if (V->type != GGML_TYPE_F16 && !V_is_K_view) {
            end = (end + 127) / 128 * 128 + ggml_nelements(V) * ggml_type_size(GGML_TYPE_F16);
        }
        size = end;
    }
    return size;
}

size_t emulated_alloc_size(ggml_backend_buffer_type_t buft, const ggml_tensor * tensor) {
    auto it = g_bufts.find(buft);
    if (it != g_bufts.end() && it->second.rules.cuda_alloc_size && tensor->op == GGML_OP_FLASH_ATTN_EXT &&
        cuda_fattn_converts(tensor)) {
        return cuda_fattn_alloc_size(tensor);
    }
    if (it != g_bufts.end() && it->second.original.get_alloc_size) {
        return it->second.original.get_alloc_size(buft, tensor);
    }
    return ggml_nbytes(tensor);
}

}  // namespace

extern "C" {

// Gives one RPC device (and its buffer type) the target backend's rules; `rules` NULL puts the RPC device's own back.
// Returns 0, or -1 where the device has no buffer type.
int llamabench_emulate_backend(void * device, const struct llamabench_backend_rules * rules) {
    auto * dev = static_cast<llamabench_device *>(device);
    ggml_backend_buffer_type_t buft = dev->iface.get_buffer_type ? dev->iface.get_buffer_type(dev) : nullptr;
    if (!buft) {
        return -1;
    }
    auto * b = reinterpret_cast<llamabench_buft *>(buft);
    auto d_it = g_devices.find(dev);
    auto b_it = g_bufts.find(buft);
    if (d_it != g_devices.end()) {  // first the RPC device's own functions back
        dev->iface = d_it->second.original;
        g_devices.erase(d_it);
    }
    if (b_it != g_bufts.end()) {
        b->iface = b_it->second.original;
        g_bufts.erase(b_it);
    }
    if (!rules) {
        return 0;
    }
    g_devices[dev] = emulated_device{*rules, dev->iface};
    g_bufts[buft] = emulated_buft{*rules, b->iface};
    dev->iface.offload_op = rules->offload ? emulated_offload_op : nullptr;
    dev->iface.supports_op = emulated_supports_op;
    dev->iface.init_backend = emulated_init_backend;
    b->iface.get_alloc_size = emulated_alloc_size;
    return 0;
}

}  // extern "C"
#endif  // LLAMABENCH_GGML_H
