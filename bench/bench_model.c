/* bench_model.c - `rewind bench model MODEL [--prompt N] [--gen N]
 * [--depth N] [--threads N] [--kv f32|f16] [--json]`.
 *
 * Measures what llama-bench calls pp and tg: prefill = N prompt tokens in one
 * forward pass into an empty sequence (logits of the last token only), and
 * decode = N tokens generated one forward pass each, greedily, from an empty
 * sequence. Both are preceded by an untimed warm-up as llama-bench's (a
 * prefill of the same length and one decode step: the mapped weights and
 * the sequence memory are faulted in before the clock runs), repeated
 * --reps times (default 3) and reported in
 * tokens per second of wall time, mean and best (a shared machine's
 * hiccups show as a gap between the two); peak memory is the process's
 * maximum resident set size (getrusage). The sequences are llama-bench's:
 * one each, never rewound, so they keep no recurrent checkpoints
 * (rw_model_seq_set_rewindable: a server's prefix cache, speculation and
 * rewinds use them; the --depth sequence keeps them, it is rewound).
 * --depth N: every run starts after N tokens of context (llama-bench's -d),
 * prefilled once, untimed, and rewound to after each run.
 * Also printed: the weights resident (the model file's pages in memory:
 * weights are held once, in the mapping) and, for decode, the weight bytes a
 * token reads times tokens per second beside the best read bandwidth. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/json_writer.h"
#include "base/threadpool.h"
#include "cli/cli.h"
#include "sampler/sampler.h"
#include "kernels/matmul.h"
#include "models/model.h"

static const char *CMD = "bench model";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
    fprintf(stderr, "usage: rewind bench model MODEL [--prompt N] [--gen N] [--depth N] [--threads N] [--kernels TIER] "
                    "[--kv f32|f16] [--numerics auto|fast|ggml] [--reps R] [--json]\n");
    return 2;
}

/* The sequence a timed run works on: a fresh one (depth 0), or the depth
 * sequence rewound to its depth (exact; the checkpoint at the depth is
 * marked), so every run starts from the same N tokens of context, as
 * llama-bench's -d. NULL on error. */
static rw_model_seq *run_seq(rw_model *m, rw_kv_type kv, int64_t n, rw_model_seq *deep, int64_t depth,
                             rw_threadpool *pool, rw_error *err) {
    if (deep) return rw_model_seq_rewind(deep, depth, pool, err) ? NULL : deep;
    rw_model_seq *s = NULL;
    if (rw_model_seq_new(m, kv, n, &s, err)) return NULL;
    rw_model_seq_set_rewindable(s, false); /* see the file head */
    return s;
}

/* One timed run; returns seconds or a negative value on error. */
static double run_prefill(rw_model *m, rw_kv_type kv, const int32_t *ids, int64_t n, float *logits, rw_model_seq *deep,
                          int64_t depth, rw_threadpool *pool, rw_error *err) {
    rw_model_seq *s = run_seq(m, kv, n, deep, depth, pool, err);
    if (!s) return -1.0;
    rw_forward_args a = {.tokens = ids, .n = n, .logits = logits, .pool = pool};
    double t0 = now_s();
    rw_status st = rw_model_forward(m, s, &a, err);
    double t = now_s() - t0;
    if (s != deep) rw_model_seq_free(s);
    return st ? -1.0 : t;
}

static double run_decode(rw_model *m, rw_kv_type kv, int64_t n, int64_t n_vocab, float *logits, rw_model_seq *deep,
                         int64_t depth, rw_threadpool *pool, rw_error *err) {
    rw_model_seq *s = run_seq(m, kv, n, deep, depth, pool, err);
    if (!s) return -1.0;
    int32_t tok = 1 % (int32_t)n_vocab;
    double t0 = now_s();
    rw_status st = RW_OK;
    for (int64_t k = 0; k < n && st == RW_OK; k++) {
        rw_forward_args a = {.tokens = &tok, .n = 1, .logits = logits, .pool = pool};
        st = rw_model_forward(m, s, &a, err);
        tok = rw_argmax(logits, n_vocab);
    }
    double t = now_s() - t0;
    if (s != deep) rw_model_seq_free(s);
    return st ? -1.0 : t;
}

/* Bytes of the file's mapping in memory (mincore): the weights resident. */
static uint64_t resident_bytes(const void *data, size_t size) {
    const long page = sysconf(_SC_PAGESIZE);
    if (!data || page <= 0) return 0;
    const uintptr_t a0 = (uintptr_t)data / (uintptr_t)page * (uintptr_t)page;
    const size_t len = (size_t)((uintptr_t)data + size - a0), n = (len + (size_t)page - 1) / (size_t)page;
    unsigned char *vec = malloc(n); /* freed below */
    if (!vec) return 0;
    uint64_t res = 0;
    if (mincore((void *)a0, len, vec) == 0)
        for (size_t i = 0; i < n; i++) res += vec[i] & 1;
    free(vec);
    return res * (uint64_t)page;
}

/* Bytes of the file's mapping [data, data + size) that the kernel maps
 * with huge pages (FilePmdMapped of the mappings over it in
 * /proc/self/smaps; 0 where there is none): a file whose page cache holds
 * small folios is streamed with 4 KiB pages, more TLB misses for the same
 * bytes. */
static uint64_t huge_mapped_bytes(const void *data, size_t size) {
    if (!data) return 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    const uintptr_t lo = (uintptr_t)data, hi = lo + size;
    char line[512];
    bool in = false;
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        unsigned long long v;
        const char *dash = strchr(line, '-'), *space = strchr(line, ' ');
        if (dash && space && dash < space && sscanf(line, "%lx-%lx ", &a, &b) == 2) /* a mapping's first line */
            in = a < hi && b > lo;
        else if (in && sscanf(line, "FilePmdMapped: %llu kB", &v) == 1) kb += v;
    }
    fclose(f);
    return kb * 1024;
}

int rw_bench_model(int argc, char **argv) {
    const char *path = NULL;
    long n_prompt = 512, n_gen = 128, threads = 0, reps = 3, depth = 0;
    bool json = false;
    rw_kv_type kv = RW_KV_F16;
    const rw_cli_opt opts[] = {
        {"--prompt", RW_OPT_INT, &n_prompt, 0, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--gen", RW_OPT_INT, &n_gen, 0, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--depth", RW_OPT_INT, &depth, 0, 1 << 22, 0, 0, NULL, NULL, NULL},
        {"--reps", RW_OPT_INT, &reps, 1, 100, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        RW_OPT_KV_TYPE(&kv),
        RW_OPT_NUMERICS_MODE,
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &path, 1, NULL);
    if (prc) return prc == RW_CLI_BAD_LINE ? usage() : 2;
    if (!path) return usage();
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    if (rw_cli_open_model(CMD, path, &g, &m)) return 1;
    const rw_model_hparams *hp = rw_model_get_hparams(m);
    rw_error err = {0};
    rw_threadpool *pool = NULL;
    rw_model_seq *deep = NULL; /* --depth: the context runs start from; freed at the end */
    int rc = 1;
    int32_t *ids = malloc((size_t)(n_prompt + 1) * sizeof *ids);
    float *logits = malloc((size_t)hp->n_vocab * sizeof(float));
    if (!ids || !logits) {
        rw_cli_error(CMD, "out of memory");
        goto done;
    }
    if (rw_threadpool_new((int)threads, &pool, &err)) goto fail;
    for (long i = 0; i <= n_prompt; i++) ids[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
    /* warm-up, as llama-bench's: one untimed prefill of the same length (it
     * faults in the weights, and the sequence memory the timed runs then
     * find in the pool) and one decode step */
    if (depth > 0) { /* the context every run starts from, prefilled once (untimed) */
        int32_t *dids = malloc((size_t)depth * sizeof *dids); /* freed below */
        if (!dids) {
            rw_cli_error(CMD, "out of memory");
            goto done;
        }
        for (long i = 0; i < depth; i++) dids[i] = (int32_t)((i * 104729 + 7) % hp->n_vocab);
        const int64_t run_max = n_prompt > n_gen ? n_prompt : n_gen;
        rw_status dst = rw_model_seq_new(m, kv, depth + (run_max > 0 ? run_max : 1), &deep, &err);
        rw_forward_args a = {.tokens = dids, .n = depth, .logits = logits, .pool = pool};
        if (!dst) dst = rw_model_forward(m, deep, &a, &err);
        if (!dst) dst = rw_model_seq_mark(deep, depth, &err);
        free(dids);
        if (dst) goto fail;
    }
    if (run_prefill(m, kv, ids, n_prompt > 0 ? n_prompt : 1, logits, deep, depth, pool, &err) < 0) goto fail;
    if (n_gen > 0 && run_decode(m, kv, 1, hp->n_vocab, logits, deep, depth, pool, &err) < 0) goto fail;
    double t_pp = 0.0, t_tg = 0.0, best_pp = 0.0, best_tg = 0.0; /* sums of seconds; best rates */
    for (long r = 0; r < reps; r++) {
        double t;
        if (n_prompt > 0) {
            if ((t = run_prefill(m, kv, ids, n_prompt, logits, deep, depth, pool, &err)) < 0) goto fail;
            t_pp += t;
            if ((double)n_prompt / t > best_pp) best_pp = (double)n_prompt / t;
        }
        if (n_gen > 0) {
            if ((t = run_decode(m, kv, n_gen, hp->n_vocab, logits, deep, depth, pool, &err)) < 0) goto fail;
            t_tg += t;
            if ((double)n_gen / t > best_tg) best_tg = (double)n_gen / t;
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double rss_mib = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
    const double wres_mib = (double)resident_bytes(rw_gguf_file_data(g), rw_gguf_file_size(g)) / (1024.0 * 1024.0);
    const double whuge_mib = (double)huge_mapped_bytes(rw_gguf_file_data(g), rw_gguf_file_size(g)) / (1024.0 * 1024.0);
    /* decode against the memory limit: the weights one step reads times
     * steps per second, beside the best a read loop gets over the same
     * resident weights (the mapped file, or where the model keeps stored
     * panels, whose rows' pages it gave back, the largest of them: no
     * memory added to the peak) */
    const double wbytes = (double)rw_model_matrix_bytes(m);
    size_t pbytes = 0;
    const void *pan = rw_model_largest_panels(m, &pbytes);
    const double bw = n_gen <= 0 ? 0.0
                      : pan      ? rw_cli_read_bandwidth_over(pool, pan, pbytes, 3)
                                 : rw_cli_read_bandwidth_over(pool, rw_gguf_file_data(g), rw_gguf_file_size(g), 3);
    /* mean rate = tokens of all reps / their total time */
    const double pp = n_prompt > 0 ? (double)(n_prompt * reps) / t_pp : 0.0;
    const double tg = n_gen > 0 ? (double)(n_gen * reps) / t_tg : 0.0;
    const double size_mib = (double)rw_gguf_file_size(g) / (1024.0 * 1024.0);
    const int nt = rw_threadpool_size(pool);
    const char *tier = rw_get_kernels();
    if (json) {
        rw_json_writer jw;
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
        rw_json_key(&jw, "model"), rw_json_cstring(&jw, path);
        rw_json_key(&jw, "arch"), rw_json_cstring(&jw, hp->arch);
        rw_json_key(&jw, "size_mib"), rw_json_double(&jw, size_mib, 6);
        rw_json_key(&jw, "threads"), rw_json_int(&jw, nt);
        rw_json_key(&jw, "kernels"), rw_json_cstring(&jw, tier);
        rw_json_key(&jw, "numerics"), rw_json_cstring(&jw, rw_get_numerics());
        rw_json_key(&jw, "kv"), rw_json_cstring(&jw, kv == RW_KV_F16 ? "f16" : "f32");
        rw_json_key(&jw, "prompt"), rw_json_int(&jw, n_prompt);
        rw_json_key(&jw, "gen"), rw_json_int(&jw, n_gen);
        rw_json_key(&jw, "reps"), rw_json_int(&jw, reps);
        rw_json_key(&jw, "prefill_tok_s"), rw_json_double(&jw, pp, 6);
        rw_json_key(&jw, "decode_tok_s"), rw_json_double(&jw, tg, 6);
        rw_json_key(&jw, "prefill_tok_s_best"), rw_json_double(&jw, best_pp, 6);
        rw_json_key(&jw, "decode_tok_s_best"), rw_json_double(&jw, best_tg, 6);
        rw_json_key(&jw, "depth"), rw_json_int(&jw, depth);
        rw_json_key(&jw, "peak_rss_mib"), rw_json_double(&jw, rss_mib, 6);
        rw_json_key(&jw, "weights_resident_mib"), rw_json_double(&jw, wres_mib, 6);
        rw_json_key(&jw, "weights_huge_page_mib"), rw_json_double(&jw, whuge_mib, 6);
        rw_json_key(&jw, "weight_bytes_per_token"), rw_json_uint(&jw, (uint64_t)wbytes);
        rw_json_key(&jw, "decode_weight_gbs"), rw_json_double(&jw, wbytes * tg / 1e9, 6);
        rw_json_key(&jw, "read_bandwidth_gbs"), rw_json_double(&jw, bw, 6);
        rw_json_end_object(&jw);
        printf("\n");
    } else {
        printf("model    %s (%s, %.1f MiB)\n", path, hp->arch, size_mib);
        printf("threads  %d, kernels %s, numerics %s, kv %s\n", nt, tier, rw_get_numerics(),
               kv == RW_KV_F16 ? "f16" : "f32");
        char at[32] = "";
        if (depth > 0) snprintf(at, sizeof at, " @ d%ld", depth);
        if (n_prompt > 0) printf("pp%ld%s %8.2f tok/s  (best %.2f, %ld reps)\n", n_prompt, at, pp, best_pp, reps);
        if (n_gen > 0) printf("tg%ld%s %8.2f tok/s  (best %.2f, %ld reps)\n", n_gen, at, tg, best_tg, reps);
        printf("peak RSS %.1f MiB, of which weights resident %.1f MiB (the file's mapped pages, %.0f%% of them in huge "
               "pages)\n",
               rss_mib, wres_mib, wres_mib > 0 ? 100.0 * whuge_mib / wres_mib : 0.0);
        if (n_gen > 0)
            printf("decode reads %.1f MiB of weights a token: %.1f GB/s at the mean rate (best read loop %.1f GB/s)\n",
                   wbytes / (1024.0 * 1024.0), wbytes * tg / 1e9, bw);
    }
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_model_seq_free(deep);
    rw_threadpool_free(pool);
    free(ids);
    free(logits);
    rw_model_free(m);
    rw_gguf_close(g);
    return rc;
}
