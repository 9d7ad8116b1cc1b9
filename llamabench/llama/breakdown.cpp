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
