/* bench_sampler.c - `rewind bench sampler [--vocab N] [--reps R] [--json]`.
 *
 * Time per token of the sampler (sampler/sampler.h) on rows of N logits
 * (default 151936, Qwen3's vocabulary): sample + accept for each setting,
 * logprobs, and a speculative verify of 4 drafted tokens. Two kinds of rows:
 * "peaked" (a few tokens far above the rest, as a trained model's; see
 * make_rows) and
 * "flat" (logits within +-0.3, as a random-weight model's, where top-p has to
 * sort most of the vocabulary). Each setting runs R tokens (default 200)
 * after one warm-up; reported: mean and best microseconds per token. The
 * one-pass argmax loop that rw_argmax replaced is timed beside it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json_writer.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "sampler/sampler.h"

static const char *CMD = "bench sampler";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* rw_argmax as it was before commit 2522770: one pass, one dependent chain. */
static int32_t argmax_one_pass(const float *l, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (l[i] > l[best] || (l[best] != l[best] && l[i] == l[i])) best = i;
    return (int32_t)best;
}

typedef enum { RUN_ARGMAX_OLD, RUN_ARGMAX, RUN_SAMPLE, RUN_LOGPROBS_RAW, RUN_LOGPROBS_SAMPLED, RUN_VERIFY4 } run_kind;

typedef struct {
    const char *name;
    run_kind kind;
    float temp;
    int32_t top_k;
    float top_p, min_p, presence, frequency;
} setting;

static const setting settings[] = {
    {"argmax, one pass (before 2522770)", RUN_ARGMAX_OLD, 0, 0, 1, 0, 0, 0},
    {"rw_argmax", RUN_ARGMAX, 0, 0, 1, 0, 0, 0},
    {"greedy", RUN_SAMPLE, 0, 0, 1, 0, 0, 0},
    {"T 0.8", RUN_SAMPLE, 0.8f, 0, 1, 0, 0, 0},
    {"T 0.8 top-k 40", RUN_SAMPLE, 0.8f, 40, 1, 0, 0, 0},
    {"T 0.8 top-p 0.95", RUN_SAMPLE, 0.8f, 0, 0.95f, 0, 0, 0},
    {"T 0.8 min-p 0.05", RUN_SAMPLE, 0.8f, 0, 1, 0.05f, 0, 0},
    {"llama.cpp defaults (k 40, p .95, min-p .05, T .8)", RUN_SAMPLE, 0.8f, 40, 0.95f, 0.05f, 0, 0},
    {"T 0.8 presence .5 frequency .5", RUN_SAMPLE, 0.8f, 0, 1, 0, 0.5f, 0.5f},
    {"greedy + raw logprobs, top 20", RUN_LOGPROBS_RAW, 0, 0, 1, 0, 0, 0},
    {"llama.cpp defaults + sampled logprobs, top 20", RUN_LOGPROBS_SAMPLED, 0.8f, 40, 0.95f, 0.05f, 0, 0},
    {"verify 4 greedy drafts, T 0.8 (per verify)", RUN_VERIFY4, 0.8f, 0, 1, 0, 0, 0},
};

static int usage(void) {
    fprintf(stderr, "usage: rewind bench sampler [--vocab N] [--reps R] [--json]\n");
    return 2;
}

/* Rows of n logits: [0] peaked, [1] flat; deterministic. rows holds 5 rows
 * of each kind (the verify setting reads five). */
static void make_rows(float *rows, int64_t n) {
    uint64_t x = 42;
    for (int kind = 0; kind < 2; kind++)
        for (int r = 0; r < 5; r++) {
            float *row = rows + (size_t)(kind * 5 + r) * (size_t)n;
            for (int64_t i = 0; i < n; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                const double u = (double)(x >> 11) * 0x1.0p-53;
                row[i] = (float)(kind == 0 ? 8.0 * u - 8.0 : 0.6 * u - 0.3);
            }
            /* peaked: 16 tokens in [8, 12) and 256 in [2, 6) over a floor
             * in [-8, 0) - on 151936 tokens about 93%, 4% and 3% of the mass */
            for (int j = 0; kind == 0 && j < 16 + 256; j++)
                row[((int64_t)j * 9973 + r * 131) % n] =
                    j < 16 ? 8.0f + 0.25f * (float)j : 2.0f + (float)(j - 16) / 64.0f;
        }
}

/* Seconds for one token (or one verify) of setting st on row set rows. */
static double run_once(const setting *st, rw_sampler *s, const float *rows, int64_t n, rw_error *err, int *bad) {
    rw_token_logprob top[RW_MAX_TOP_LOGPROBS];
    float lp;
    int32_t out[5], n_out, drafts[4];
    volatile int32_t sink;
    double t0 = now_s(), t;
    switch (st->kind) {
    case RUN_ARGMAX_OLD:
        sink = argmax_one_pass(rows, n);
        break;
    case RUN_ARGMAX:
        sink = rw_argmax(rows, n);
        break;
    case RUN_SAMPLE:
        sink = rw_sampler_sample(s, rows);
        break;
    case RUN_LOGPROBS_RAW:
    case RUN_LOGPROBS_SAMPLED:
        sink = rw_sampler_sample(s, rows);
        rw_sampler_logprobs(s, rows, st->kind == RUN_LOGPROBS_RAW ? RW_LOGPROBS_RAW : RW_LOGPROBS_SAMPLED, sink, 20,
                            &lp, top);
        break;
    case RUN_VERIFY4:
        for (int i = 0; i < 4; i++) drafts[i] = rw_argmax(rows + (size_t)i * (size_t)n, n);
        if (rw_spec_verify(s, rows, NULL, drafts, 4, out, &n_out, err)) *bad = 1;
        sink = out[0];
        break;
    }
    t = now_s() - t0;
    if (s && st->kind != RUN_VERIFY4 && rw_sampler_accept(s, sink, err)) *bad = 1;
    if (s && st->kind == RUN_VERIFY4) rw_sampler_rewind(s, 0); /* keep the history short */
    return t;
}

int rw_bench_sampler(int argc, char **argv) {
    long n_vocab = 151936, reps = 200;
    bool json = false;
    const rw_cli_opt opts[] = {
        {"--vocab", RW_OPT_INT, &n_vocab, 16, 1 << 24, 0, 0, NULL, NULL, NULL},
        {"--reps", RW_OPT_INT, &reps, 1, 100000, 0, 0, NULL, NULL, NULL},
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, NULL, 0, NULL);
    if (prc) return prc == RW_CLI_HELP ? 0 : usage();
    const int64_t n = n_vocab;
    float *rows = malloc((size_t)10 * (size_t)n * sizeof *rows);
    if (!rows) {
        rw_cli_error(CMD, "out of memory");
        return 1;
    }
    make_rows(rows, n);
    rw_json_writer jw;
    if (json) {
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
        rw_json_key(&jw, "vocab"), rw_json_int(&jw, n);
        rw_json_key(&jw, "reps"), rw_json_int(&jw, reps);
        rw_json_key(&jw, "results"), rw_json_begin_array(&jw);
    } else {
        printf("sampler, %ld-token rows, %ld tokens per setting (one thread)\n", n_vocab, reps);
        printf("%-50s %-6s %10s %10s\n", "setting", "rows", "mean us", "best us");
    }
    int rc = 0;
    for (size_t k = 0; k < sizeof settings / sizeof settings[0] && rc == 0; k++) {
        const setting *st = &settings[k];
        for (int kind = 0; kind < 2 && rc == 0; kind++) {
            rw_sampler *s = NULL;
            rw_error err = {0};
            if (st->kind != RUN_ARGMAX_OLD && st->kind != RUN_ARGMAX) {
                rw_sampler_params sp = rw_sampler_params_default();
                sp.temperature = st->temp;
                sp.top_k = st->top_k;
                sp.top_p = st->top_p;
                sp.min_p = st->min_p;
                sp.presence_penalty = st->presence;
                sp.frequency_penalty = st->frequency;
                sp.seed = 1;
                if (rw_sampler_new(&sp, n, &s, &err)) {
                    rw_cli_error(CMD, "%s", err.msg);
                    rc = 1;
                    break;
                }
            }
            const float *r = rows + (size_t)kind * 5 * (size_t)n;
            int bad = 0;
            run_once(st, s, r, n, &err, &bad); /* warm-up */
            double sum = 0.0, best = 1e30;
            for (long i = 0; i < reps && !bad; i++) {
                const double t = run_once(st, s, r, n, &err, &bad);
                sum += t;
                if (t < best) best = t;
            }
            rw_sampler_free(s);
            if (bad) {
                rw_cli_error(CMD, "%s", err.msg);
                rc = 1;
                break;
            }
            const char *kname = kind == 0 ? "peaked" : "flat";
            if (json) {
                rw_json_begin_object(&jw);
                rw_json_key(&jw, "setting"), rw_json_cstring(&jw, st->name);
                rw_json_key(&jw, "rows"), rw_json_cstring(&jw, kname);
                rw_json_key(&jw, "mean_us"), rw_json_double(&jw, 1e6 * sum / (double)reps, 6);
                rw_json_key(&jw, "best_us"), rw_json_double(&jw, 1e6 * best, 6);
                rw_json_end_object(&jw);
            } else {
                printf("%-50s %-6s %10.1f %10.1f\n", st->name, kname, 1e6 * sum / (double)reps, 1e6 * best);
            }
        }
    }
    if (json) {
        rw_json_end_array(&jw);
        rw_json_end_object(&jw);
        printf("\n");
    }
    free(rows);
    return rc;
}
