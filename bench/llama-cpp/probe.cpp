// Creates llama.cpp contexts over one model and prints every buffer llama.cpp allocates.
//
//   probe MODEL.gguf [--no-alloc] [--no-repack] [--debug] [--ngl N] [--decode N] [--hold MS] < configs
//
// Each stdin line is one context:
//   ID n_ctx n_batch n_ubatch n_seq_max flash(0|1) type_k type_v swa_full kv_unified
//      n_outputs_max n_outputs_max_per_seq
// (type_* as ggml type names: f16, q8_0, ...). For each line the probe prints
//   BEGIN ID, llama.cpp's own log lines ("LOG <text>"), one "MEM <buft> <model> <context>
//   <compute>" per buffer type (exact bytes, llama_get_memory_breakdown), then "END ID ok"
//   or "END ID fail".
// Model-load logs come first, before any BEGIN. --debug passes llama.cpp's debug log through
// (with ggml-alloc built with GGML_ALLOCATOR_DEBUG: the live tensors each time the compute
// buffer grows; bench/llama_cpp_model.py --explain). --hold keeps each context alive MS
// milliseconds after its MEM lines ("HOLD ID" first), for a sampler outside (hmn run, nvidia-smi)
// to see the process at its peak. --decode N runs one batch of n_ubatch tokens and then N
// single-token steps on each context ("DECODE ID ok|fail ..."), as a server's prompt and first
// tokens (kernels, the backend's pools and workspaces allocated). Part of
// bench/llama_cpp_grid.sh and llama_cpp_cuda.sh.
#include "llama.h"
#include "llama-ext.h"
#include "ggml-backend.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <chrono>
#include <thread>

static bool g_debug = false;

static void log_cb(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_DEBUG && !g_debug) {
        return;
    }
    // llama.cpp emits lines in pieces (CONT); print the text as is with a prefix per line start.
    static bool at_start = true;
    for (const char * p = text; *p; ++p) {
        if (at_start) {
            fputs("LOG ", stdout);
            at_start = false;
        }
        fputc(*p, stdout);
        if (*p == '\n') {
            at_start = true;
        }
    }
}

static ggml_type type_by_name(const std::string & s) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * n = ggml_type_name((ggml_type) t);
        if (n && s == n) {
            return (ggml_type) t;
        }
    }
    fprintf(stderr, "unknown type %s\n", s.c_str());
    exit(2);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: probe MODEL.gguf [--no-alloc] [--no-repack] [--debug] [--ngl N] [--hold MS] < configs\n");
        return 2;
    }
    bool no_alloc = false;
    bool repack = true;
    int ngl = 0;  // layers on the GPU (a CUDA build): -ngl
    int hold_ms = 0;
    int decode = -1;  // single-token steps after a full batch; -1: no decode
    for (int i = 2; i < argc; ++i) {
        if (!strcmp(argv[i], "--no-alloc")) no_alloc = true;
        else if (!strcmp(argv[i], "--no-repack")) repack = false;
        else if (!strcmp(argv[i], "--debug")) g_debug = true;
        else if (!strcmp(argv[i], "--ngl") && i + 1 < argc) ngl = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hold") && i + 1 < argc) hold_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--decode") && i + 1 < argc) decode = atoi(argv[++i]);
        else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    llama_log_set(log_cb, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = ngl;
    // no_alloc (the simulated pass) maps nothing: llama.cpp asserts !use_mmap there
    mp.load_mode = no_alloc ? LLAMA_LOAD_MODE_NONE : LLAMA_LOAD_MODE_MMAP;
    mp.use_extra_bufts = repack;
    mp.no_alloc = no_alloc;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        printf("MODEL fail\n");
        return 1;
    }
    printf("MODEL ok\n");

    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        std::istringstream in(line);
        std::string id, tk, tv;
        unsigned n_ctx, n_batch, n_ubatch, n_seq, fa, swa_full, unified, n_out, n_out_seq;
        if (!(in >> id >> n_ctx >> n_batch >> n_ubatch >> n_seq >> fa >> tk >> tv >> swa_full >> unified >> n_out >> n_out_seq)) {
            fprintf(stderr, "bad config line: %s\n", line.c_str());
            return 2;
        }
        printf("BEGIN %s\n", id.c_str());
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = n_ctx;
        cp.n_batch = n_batch;
        cp.n_ubatch = n_ubatch;
        cp.n_seq_max = n_seq;
        cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
        cp.type_k = type_by_name(tk);
        cp.type_v = type_by_name(tv);
        cp.swa_full = swa_full != 0;
        cp.kv_unified = unified != 0;
        cp.n_outputs_max = n_out;
        cp.n_outputs_max_per_seq = n_out_seq;
        cp.n_threads = 2;
        cp.n_threads_batch = 2;
        llama_context * ctx = llama_init_from_model(model, cp);
        if (!ctx) {
            printf("END %s fail\n", id.c_str());
            continue;
        }
        for (const auto & [buft, m] : llama_get_memory_breakdown(ctx)) {
            printf("MEM %s %zu %zu %zu\n", ggml_backend_buft_name(buft), m.model, m.context, m.compute);
        }
        if (decode >= 0) {
            const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
            const int n = (int) llama_n_ubatch(ctx);
            llama_batch b = llama_batch_init(n, 0, 1);
            int rc = 0;
            int pos = 0;
            const auto t0 = std::chrono::steady_clock::now();
            for (int step = 0; step <= decode && rc == 0; ++step) {
                const int len = step == 0 ? n : 1;
                b.n_tokens = len;
                for (int i = 0; i < len; ++i) {
                    b.token[i] = (pos + i) % n_vocab;
                    b.pos[i] = pos + i;
                    b.n_seq_id[i] = 1;
                    b.seq_id[i][0] = 0;
                    b.logits[i] = i == len - 1;
                }
                rc = llama_decode(ctx, b);
                pos += len;
            }
            llama_synchronize(ctx);
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            printf("DECODE %s %s rc %d tokens %d ms %.1f\n", id.c_str(), rc == 0 ? "ok" : "fail", rc, pos, ms);
            llama_batch_free(b);
        }
        if (hold_ms > 0) {
            printf("HOLD %s\n", id.c_str());
            std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
        }
        llama_free(ctx);
        printf("END %s ok\n", id.c_str());
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
