// What llama-perplexity computes per scored token, for llamabench quality (compiled on first use; see logprobs.py).
// The arithmetic is llama.cpp's own, copied unchanged from tools/perplexity/perplexity.cpp of the llama.cpp that
// llama-cpp-python 0.3.36 vendors (MIT License, Copyright (c) 2023-2024 The ggml authors):
//   log_softmax(n_vocab, logits, uint16_t * log_prob, tok)         lines 79-107: the base's compact log-probs
//   log_softmax(n_vocab, logits, base_log_prob, tok, kld)          lines 191-252: one token against the base
//   process_logits(...)                                             lines 144-173 and 254-294: rows over threads
// so that the numbers are llama-perplexity's to the float, given the same logits. Pure C++: no llama.cpp call.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

extern "C" {

// kl_divergence_result (perplexity.cpp:175), plain C for ctypes; summed over every token of a run
struct llamabench_kld_sums {
    double sum_nll;
    double sum_nll2;
    double sum_nll_base;
    double sum_nll_base2;
    double sum_nll_nll_base;
    double sum_kld;
    double sum_kld2;
    double sum_p_diff;
    double sum_p_diff2;
    double sum_p_diff4;
    float  max_p_diff;
    uint64_t n_same_top;
    uint64_t count;
};

}

static inline int nearest_int(float fval) {
    float val = fval + 12582912.f;
    int i; memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

static double base_log_softmax(int n_vocab, const float * logits, uint16_t * log_prob, int tok) {
    float max_logit = logits[0];
    float min_logit = logits[0];
    for (int i = 1; i < n_vocab; ++i) {
        max_logit = std::max(max_logit, logits[i]);
        min_logit = std::min(min_logit, logits[i]);
    }
    min_logit = std::max(min_logit, max_logit - 16);
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) {
        sum_exp += expf(logits[i] - max_logit);
    }
    const float log_sum_exp = log(sum_exp);
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit)/65535.f;
    float * d = (float *)log_prob;
    d[0] = scale;
    d[1] = min_log_prob;
    log_prob += 4;
    if (scale) {
        const float inv_scale = 1/scale;
        for (int i = 0; i < n_vocab; ++i) {
            log_prob[i] = logits[i] > min_logit ? nearest_int(inv_scale*(logits[i] - min_logit)) : 0;
        }
    } else {
        std::memset(log_prob, 0, n_vocab*sizeof(uint16_t));
    }
    return max_logit + log_sum_exp - logits[tok];
}

static std::pair<double, float> kld_log_softmax(int n_vocab, const float * logits, const uint16_t * base_log_prob,
                                                int tok, llamabench_kld_sums & kld) {
    float max_logit = logits[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; ++i) {
        if (logits[i] > max_logit) {
            max_logit = logits[i];
            imax = i;
        }
    }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) {
        sum_exp += expf(logits[i] - max_logit);
    }
    const float log_sum_exp = log(sum_exp);
    const float * d = (const float *)base_log_prob;
    const float scale = d[0];
    const float min_log_prob = d[1];
    base_log_prob += 4;

    const float nll = max_logit + log_sum_exp - logits[tok];
    kld.sum_nll  += nll;
    kld.sum_nll2 += nll*nll;

    const float nll_base = -(scale*base_log_prob[tok] + min_log_prob);
    kld.sum_nll_base  += nll_base;
    kld.sum_nll_base2 += nll_base*nll_base;

    kld.sum_nll_nll_base += nll*nll_base;

    max_logit += log_sum_exp;
    double sum = 0;
    int imax_base = -1;
    float p_log_base_max = 0;
    for (int i = 0; i < n_vocab; ++i) {
        const float p_log_base = scale*base_log_prob[i] + min_log_prob;
        if (i == 0 || p_log_base > p_log_base_max) {
            p_log_base_max = p_log_base;
            imax_base = i;
        }
        if (p_log_base > -16.f) {
            const float p_base = expf(p_log_base);
            sum += p_base * (p_log_base - logits[i] + max_logit);
        }
    }
    kld.sum_kld  += sum;
    kld.sum_kld2 += sum*sum;
    ++kld.count;
    if (imax == imax_base) {
        ++kld.n_same_top;
    }

    const float p_base = expf(-nll_base);
    const float p = expf(-nll);
    const float p_diff = p - p_base;
    kld.sum_p_diff  += p_diff;
    const double p_diff2 = p_diff*p_diff;
    kld.sum_p_diff2 += p_diff2;
    kld.sum_p_diff4 += p_diff2*p_diff2;
    kld.max_p_diff = std::max(kld.max_p_diff, std::fabs(p_diff));

    return std::make_pair(sum, p_diff);
}

// rows [0, n_rows) handed out one at a time to n_threads threads, as process_logits does
template <typename F>
static void over_rows(int n_rows, int n_threads, F && compute_row) {
    std::mutex mutex;
    int counter = 0;
    auto work = [&]() {
        while (true) {
            int i;
            {
                std::lock_guard<std::mutex> lock(mutex);
                i = counter++;
            }
            if (i >= n_rows) {
                break;
            }
            compute_row(i);
        }
    };
    std::vector<std::thread> workers(std::max(0, n_threads - 1));
    for (auto & w : workers) {
        w = std::thread(work);
    }
    work();
    for (auto & w : workers) {
        w.join();
    }
}

extern "C" {

// The base's rows: log-probs in llama-perplexity's compact form (nv = 2*((n_vocab+1)/2) + 4 uint16 per row) and
// each row's negative log-likelihood of its next token (into nll[i]).
void llamabench_base_rows(int n_vocab, const float * logits, const int32_t * next_tokens, int n_rows,
                          uint16_t * log_probs, double * nll, int n_threads) {
    const int nv = 2*((n_vocab + 1)/2) + 4;
    over_rows(n_rows, n_threads, [&](int i) {
        nll[i] = base_log_softmax(n_vocab, logits + size_t(i)*n_vocab, log_probs + size_t(i)*nv, next_tokens[i]);
    });
}

// A choice's rows against the base's: added to `sums`; each token's KLD and Δp into kld_values[i] / p_diff[i].
void llamabench_kld_rows(int n_vocab, const float * logits, const int32_t * next_tokens, int n_rows,
                         const uint16_t * base_log_probs, struct llamabench_kld_sums * sums, float * kld_values,
                         float * p_diff_values, int n_threads) {
    const int nv = 2*((n_vocab + 1)/2) + 4;
    std::vector<llamabench_kld_sums> partial(static_cast<size_t>(n_rows));
    over_rows(n_rows, n_threads, [&](int i) {
        llamabench_kld_sums & local = partial[size_t(i)];
        std::memset(&local, 0, sizeof(local));
        std::pair<double, float> v = kld_log_softmax(n_vocab, logits + size_t(i)*n_vocab,
                                                     base_log_probs + size_t(i)*nv, next_tokens[i], local);
        kld_values[i] = (float)v.first;
        p_diff_values[i] = v.second;
    });
    for (const auto & local : partial) {  // in row order: the same sums whatever the threads
        sums->sum_nll          += local.sum_nll;
        sums->sum_nll2         += local.sum_nll2;
        sums->sum_nll_base     += local.sum_nll_base;
        sums->sum_nll_base2    += local.sum_nll_base2;
        sums->sum_nll_nll_base += local.sum_nll_nll_base;
        sums->sum_kld          += local.sum_kld;
        sums->sum_kld2         += local.sum_kld2;
        sums->sum_p_diff       += local.sum_p_diff;
        sums->sum_p_diff2      += local.sum_p_diff2;
        sums->sum_p_diff4      += local.sum_p_diff4;
        sums->n_same_top       += local.n_same_top;
        sums->max_p_diff        = std::max(sums->max_p_diff, local.max_p_diff);
        sums->count            += local.count;
    }
}

}
