/* bench_model.c - `rewind bench model MODEL [--prompt N] [--gen N]
 * [--threads N] [--kv f32|f16] [--json]`.
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
 * maximum resident set size (getrusage). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/json_writer.h"
#include "base/threadpool.h"
#include "cli/cli.h"
#include "sampler/sampler.h"
#include "kernels/matmul.h"

static const char *CMD = "bench model";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
    fprintf(stderr, "usage: rewind bench model MODEL [--prompt N] [--gen N] [--threads N] [--kv f32|f16] "
                    "[--numerics auto|fast|ggml] [--reps R] [--json]\n");
    return 2;
}

/* One timed run into a fresh sequence; returns seconds or a negative value on error. */
static double run_prefill(rw_model *m, rw_kv_type kv, const int32_t *ids, int64_t n, float *logits,
                          rw_threadpool *pool, rw_error *err) {
    rw_model_seq *s = NULL;
    if (rw_model_seq_new(m, kv, n, &s, err)) return -1.0;
    rw_forward_args a = {.tokens = ids, .n = n, .logits = logits, .pool = pool};
    double t0 = now_s();
    rw_status st = rw_model_forward(m, s, &a, err);
    double t = now_s() - t0;
    rw_model_seq_free(s);
    return st ? -1.0 : t;
}

static double run_decode(rw_model *m, rw_kv_type kv, int64_t n, int64_t n_vocab, float *logits, rw_threadpool *pool,
                         rw_error *err) {
    rw_model_seq *s = NULL;
    if (rw_model_seq_new(m, kv, n, &s, err)) return -1.0;
    int32_t tok = 1 % (int32_t)n_vocab;
    double t0 = now_s();
    rw_status st = RW_OK;
    for (int64_t k = 0; k < n && st == RW_OK; k++) {
        rw_forward_args a = {.tokens = &tok, .n = 1, .logits = logits, .pool = pool};
        st = rw_model_forward(m, s, &a, err);
        tok = rw_argmax(logits, n_vocab);
    }
    double t = now_s() - t0;
    rw_model_seq_free(s);
    return st ? -1.0 : t;
}

int rw_bench_model(int argc, char **argv) {
    const char *path = NULL;
    long n_prompt = 512, n_gen = 128, threads = 0, reps = 3;
    bool json = false;
    rw_kv_type kv = RW_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--prompt") && has_val) {
            if (rw_cli_parse_int(CMD, a, argv[++i], 0, 1 << 20, &n_prompt)) return 2;
        } else if (!strcmp(a, "--gen") && has_val) {
            if (rw_cli_parse_int(CMD, a, argv[++i], 0, 1 << 20, &n_gen)) return 2;
        } else if (!strcmp(a, "--reps") && has_val) {
            if (rw_cli_parse_int(CMD, a, argv[++i], 1, 100, &reps)) return 2;
        } else if (!strcmp(a, "--threads") && has_val) {
            if (rw_cli_parse_int(CMD, a, argv[++i], 0, 1024, &threads)) return 2;
        } else if (!strcmp(a, "--kv") && has_val) {
            if (rw_cli_parse_kv(CMD, argv[++i], &kv)) return 2;
        } else if (!strcmp(a, "--numerics") && has_val) {
            if (rw_cli_parse_numerics(CMD, argv[++i])) return 2;
        } else if (!strcmp(a, "--json")) json = true;
        else if (a[0] == '-') {
            rw_cli_error(CMD, "unknown option or missing value: %s", a);
            return usage();
        } else if (!path) path = a;
        else return usage();
    }
    if (!path) return usage();
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    if (rw_cli_open_model(CMD, path, &g, &m)) return 1;
    const rw_model_hparams *hp = rw_model_get_hparams(m);
    rw_error err = {0};
    rw_threadpool *pool = NULL;
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
    if (run_prefill(m, kv, ids, n_prompt > 0 ? n_prompt : 1, logits, pool, &err) < 0) goto fail;
    if (n_gen > 0 && run_decode(m, kv, 1, hp->n_vocab, logits, pool, &err) < 0) goto fail;
    double t_pp = 0.0, t_tg = 0.0, best_pp = 0.0, best_tg = 0.0; /* sums of seconds; best rates */
    for (long r = 0; r < reps; r++) {
        double t;
        if (n_prompt > 0) {
            if ((t = run_prefill(m, kv, ids, n_prompt, logits, pool, &err)) < 0) goto fail;
            t_pp += t;
            if ((double)n_prompt / t > best_pp) best_pp = (double)n_prompt / t;
        }
        if (n_gen > 0) {
            if ((t = run_decode(m, kv, n_gen, hp->n_vocab, logits, pool, &err)) < 0) goto fail;
            t_tg += t;
            if ((double)n_gen / t > best_tg) best_tg = (double)n_gen / t;
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double rss_mib = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
    /* mean rate = tokens of all reps / their total time */
    const double pp = n_prompt > 0 ? (double)(n_prompt * reps) / t_pp : 0.0;
    const double tg = n_gen > 0 ? (double)(n_gen * reps) / t_tg : 0.0;
    const double size_mib = (double)rw_gguf_file_size(g) / (1024.0 * 1024.0);
    const int nt = rw_threadpool_size(pool);
    const char *tier = rw_kernel_tier_name(rw_kernel_tier_current());
    if (json) {
        rw_json_writer jw;
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
        rw_json_key(&jw, "model"), rw_json_cstring(&jw, path);
        rw_json_key(&jw, "arch"), rw_json_cstring(&jw, hp->arch);
        rw_json_key(&jw, "size_mib"), rw_json_double(&jw, size_mib, 6);
        rw_json_key(&jw, "threads"), rw_json_int(&jw, nt);
        rw_json_key(&jw, "kernels"), rw_json_cstring(&jw, tier);
        rw_json_key(&jw, "numerics"), rw_json_cstring(&jw, rw_numerics_name(rw_numerics_current()));
        rw_json_key(&jw, "kv"), rw_json_cstring(&jw, kv == RW_KV_F16 ? "f16" : "f32");
        rw_json_key(&jw, "prompt"), rw_json_int(&jw, n_prompt);
        rw_json_key(&jw, "gen"), rw_json_int(&jw, n_gen);
        rw_json_key(&jw, "reps"), rw_json_int(&jw, reps);
        rw_json_key(&jw, "prefill_tok_s"), rw_json_double(&jw, pp, 6);
        rw_json_key(&jw, "decode_tok_s"), rw_json_double(&jw, tg, 6);
        rw_json_key(&jw, "prefill_tok_s_best"), rw_json_double(&jw, best_pp, 6);
        rw_json_key(&jw, "decode_tok_s_best"), rw_json_double(&jw, best_tg, 6);
        rw_json_key(&jw, "peak_rss_mib"), rw_json_double(&jw, rss_mib, 6);
        rw_json_end_object(&jw);
        printf("\n");
    } else {
        printf("model    %s (%s, %.1f MiB)\n", path, hp->arch, size_mib);
        printf("threads  %d, kernels %s, numerics %s, kv %s\n", nt, tier, rw_numerics_name(rw_numerics_current()),
               kv == RW_KV_F16 ? "f16" : "f32");
        if (n_prompt > 0) printf("pp%-6ld %8.2f tok/s  (best %.2f, %ld reps)\n", n_prompt, pp, best_pp, reps);
        if (n_gen > 0) printf("tg%-6ld %8.2f tok/s  (best %.2f, %ld reps)\n", n_gen, tg, best_tg, reps);
        printf("peak RSS %.1f MiB\n", rss_mib);
    }
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_threadpool_free(pool);
    free(ids);
    free(logits);
    rw_model_free(m);
    rw_gguf_close(g);
    return rc;
}
