/* bench_spec.c - `rewind bench spec TARGET [--draft DRAFT]
 * [--spec mtp|ngram|mtp,ngram] [--spec-ngram-n N] [--spec-ngram-min-hits N]
 * [--k 1,2,4,8] [--threads N] [--prompt N] [--repeat N] [--repeat-penalty X] [--gen N] [--reps R]
 * [--seqs N] [--kv f32|f16] [--json]`.
 *
 * Speculative decoding (engine/spec.h) on TARGET:
 *   1. verify cost: after a --prompt-token prefill (default 64), the time of
 *      one target pass of K + 1 tokens with every logit row, relative to one
 *      plain decode pass of 1 token, for each K of --k (each pass is rewound
 *      away before the next; the rewind is timed separately). Mean over
 *      --reps (default 5) and best.
 *   2. decode tokens/s over --gen tokens (default 32) after the prompt:
 *      plain (one pass per token), the target drafting for itself at K = 4
 *      (acceptance 100%: the cost of the machinery), and with --draft at
 *      K = 4 fixed and adaptive (spec.h's rule, the draft's cost taken as
 *      its size ratio): acceptance and tokens/s. The draft's first pass
 *      catches up on the prompt and is counted.
 *   3. the same with --seqs sequences (default 8, 0 = skip) decoding
 *      together: plain = one batched pass per step; speculative = batched
 *      draft passes and one batched verify pass (rw_spec_step).
 * Each ratio is also given in process CPU time (the machine may be shared).
 * --spec adds runs with those sources at K = 4 fixed and adaptive, instead
 * of the self-draft one (the
 * rule's costs from the file: rw_spec_params_set_costs); with mtp, part 1 also
 * times one MTP draft token (the block chained on its own row, with the
 * output head) and one catch-up row (the block alone, in a pass of 16)
 * relative to the decode step. --repeat N makes the prompt one block of N
 * tokens said again and again (what n-gram drafts feed on);
 * --repeat-penalty X (< 1 rewards repeats: a random model then loops over
 * the prompt's tokens) goes to every run's sampler, plain ones too.
 * Greedy decoding everywhere; the tokens are the same with and without a
 * draft (tests/engine/test_spec.c), so only the time differs. --json prints
 * all of it as one JSON object instead of the text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json_writer.h"
#include "base/threadpool.h"
#include "cli/cli.h"
#include "sampler/sampler.h"
#include "engine/spec.h"
#include "kernels/matmul.h"

static const char *CMD = "bench spec";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (every thread): on a machine shared with
 * other jobs the wall clock measures them too, the CPU time much less (the
 * pool's workers spin at most 0.1 ms before they sleep) */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
    fprintf(stderr, "usage: rewind bench spec TARGET [--draft DRAFT] [--spec mtp|ngram|mtp,ngram] [--spec-ngram-n N] "
                    "[--spec-ngram-min-hits N] [--k 1,2,4,8] [--threads N] [--kernels TIER] [--prompt N] [--repeat N] "
                    "[--repeat-penalty X] [--gen N] [--reps R] [--seqs N] [--kv f32|f16] [--json]\n");
    return 2;
}

typedef struct {
    rw_model *m, *dm; /* dm may be NULL: plain decoding unless spec */
    bool spec;        /* speculative (with dm, or the params' sources) */
    rw_kv_type kv;
    rw_threadpool *pool;
    const int32_t *prompt;
    int64_t n_prompt, n_gen;
    float repeat_penalty; /* every run's sampler (0: off) */
} setup;

typedef struct {
    double seconds; /* of the generation after the prompt passes */
    double cpu;     /* process CPU seconds of the same */
    rw_spec_stats st;
} result;

/* n sequences, each its own prompt (shifted by its index), decoding n_gen
 * tokens together; dm = NULL decodes plainly. */
static rw_status run_decode(const setup *su, const rw_spec_params *pp, int n, result *res, rw_error *err) {
    const int64_t nv = rw_model_get_hparams(su->m)->n_vocab;
    rw_model_seq **seqs = calloc((size_t)n, sizeof *seqs);
    rw_sampler **smp = calloc((size_t)n, sizeof *smp);
    rw_spec_seq **spec = calloc((size_t)n, sizeof *spec);
    rw_batch_item *items = calloc((size_t)n, sizeof *items);
    int32_t *tok = calloc((size_t)n, sizeof *tok);
    int64_t *budget = calloc((size_t)n, sizeof *budget);
    float *logits = malloc((size_t)n * (size_t)nv * sizeof(float));
    rw_sampler_params sp = rw_sampler_params_default();
    if (su->repeat_penalty > 0) sp.repeat_penalty = su->repeat_penalty;
    rw_status st = RW_OK;
    memset(res, 0, sizeof *res);
    if (!seqs || !smp || !spec || !items || !tok || !budget || !logits) {
        st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n && !st; i++) {
        float *row = logits + (size_t)i * (size_t)nv;
        st = rw_model_seq_new(su->m, su->kv, su->n_prompt + i + su->n_gen, &seqs[i], err);
        if (!st) st = rw_sampler_new(&sp, nv, &smp[i], err);
        rw_forward_args fa = {.tokens = su->prompt, .n = su->n_prompt + i, .logits = row, .pool = su->pool};
        if (!st) st = rw_model_forward(su->m, seqs[i], &fa, err);
        if (!st) tok[i] = rw_sampler_sample(smp[i], row);
        if (!st) st = rw_sampler_accept(smp[i], tok[i], err);
        if (!st && su->spec) st = rw_spec_seq_new(su->dm, seqs[i], smp[i], &sp, pp, &spec[i], err);
        if (!st && su->spec) st = rw_spec_seq_start(spec[i], tok[i], err);
    }
    const double t0 = now_s(), c0 = cpu_s();
    if (su->spec && !st) {
        /* each sequence emits its own count per step: step the unfinished ones */
        rw_spec_seq **act = calloc((size_t)n, sizeof *act);
        int64_t *done_k = calloc((size_t)n, sizeof *done_k);
        if (!act || !done_k) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        for (int i = 0; i < n && !st; i++)
            done_k[i] = 1;
        while (!st) {
            int m = 0;
            int idx[256];
            for (int i = 0; i < n; i++)
                if (done_k[i] < su->n_gen) {
                    idx[m] = i;
                    act[m] = spec[i];
                    budget[m] = su->n_gen - done_k[i];
                    m++;
                }
            if (!m) break;
            if ((st = rw_spec_step(su->m, su->dm, act, budget, m, su->pool, err))) break;
            for (int j = 0; j < m; j++) {
                const int32_t *t;
                const float *l;
                done_k[idx[j]] += rw_spec_seq_output(act[j], &t, &l);
            }
        }
        free(act);
        free(done_k);
    } else {
        for (int64_t k = 1; k < su->n_gen && !st; k++) {
            for (int i = 0; i < n; i++)
                items[i] = (rw_batch_item){
                    .seq = seqs[i], .tokens = &tok[i], .n = 1, .logits = logits + (size_t)i * (size_t)nv};
            if ((st = rw_model_forward_batch(su->m, items, n, su->pool, err))) break;
            for (int i = 0; i < n && !st; i++) {
                tok[i] = rw_sampler_sample(smp[i], logits + (size_t)i * (size_t)nv);
                st = rw_sampler_accept(smp[i], tok[i], err);
            }
        }
    }
    res->seconds = now_s() - t0;
    res->cpu = cpu_s() - c0;
    for (int i = 0; su->spec && i < n && spec[i]; i++) {
        rw_spec_stats s = rw_spec_seq_stats(spec[i]);
        res->st.steps += s.steps;
        res->st.drafted += s.drafted;
        res->st.accepted += s.accepted;
        res->st.emitted += s.emitted;
        res->st.ngram_drafted += s.ngram_drafted;
        res->st.ngram_accepted += s.ngram_accepted;
    }
done:
    for (int i = 0; i < n && seqs; i++) {
        if (spec) rw_spec_seq_free(spec[i]);
        if (smp) rw_sampler_free(smp[i]);
        rw_model_seq_free(seqs[i]);
    }
    free(seqs);
    free(smp);
    free(spec);
    free(items);
    free(tok);
    free(budget);
    free(logits);
    return st;
}

/* --repeat-penalty: a float in (0, 100] (an open interval: RW_OPT_FLOAT's
 * are closed) into the float at ctx. */
static int opt_repeat_penalty(void *ctx, const char *cmd, const char *name, const char *v) {
    char *end;
    const float x = strtof(v, &end);
    if (end == v || *end || !(x > 0 && x <= 100)) {
        rw_cli_error(cmd, "%s needs a number in (0, 100], not \"%s\"", name, v);
        return 2;
    }
    *(float *)ctx = x;
    return 0;
}

int rw_bench_spec(int argc, char **argv) {
    const char *path = NULL, *draft_path = NULL, *klist = "1,2,4,8";
    long threads = 0, n_prompt = 64, n_gen = 32, reps = 5, n_seqs = 8, repeat = 0;
    float repeat_penalty = 0;
    rw_spec_params spp = rw_spec_params_default();
    rw_kv_type kv = RW_KV_F16;
    bool json = false;
    const rw_cli_opt opts[] = {
        {"--draft", RW_OPT_STR, &draft_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--k", RW_OPT_STR, &klist, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        {"--prompt", RW_OPT_INT, &n_prompt, 1, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--gen", RW_OPT_INT, &n_gen, 2, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--reps", RW_OPT_INT, &reps, 1, 1000, 0, 0, NULL, NULL, NULL},
        {"--seqs", RW_OPT_INT, &n_seqs, 0, 256, 0, 0, NULL, NULL, NULL},
        RW_OPT_KV_TYPE(&kv),
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--repeat-penalty", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_repeat_penalty, &repeat_penalty},
        {"--repeat", RW_OPT_INT, &repeat, 1, 1 << 20, 0, 0, NULL, NULL, NULL},
        RW_OPT_SPEC(&spp),
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &path, 1, NULL);
    if (prc) return prc == RW_CLI_BAD_LINE ? usage() : 2;
    if (!path) return usage();
    int ks[16], n_k = 0;
    for (const char *p = klist; *p;) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 0 || k > RW_SPEC_MAX_K || n_k == 16 || (*end && *end != ',')) {
            rw_cli_error(CMD, "--k needs a list of integers in [0, %d], not \"%s\"", RW_SPEC_MAX_K, klist);
            return 2;
        }
        ks[n_k++] = (int)k;
        p = *end ? end + 1 : end;
    }
    rw_gguf *g = NULL, *dg = NULL;
    rw_model *m = NULL, *dm = NULL;
    rw_tokenizer *tv = NULL, *dv = NULL;
    if (rw_cli_open_model(CMD, path, &g, &m)) return 1;
    rw_error err = {0};
    int rc = 1;
    if ((spp.sources & RW_SPEC_MTP) && rw_model_enable_mtp(m, &err)) {
        rw_cli_error(CMD, "%s: %s", path, err.msg);
        rw_model_free(m);
        rw_gguf_close(g);
        return 1;
    }
    rw_threadpool *pool = NULL;
    rw_model_seq *s = NULL;
    const int64_t nv = rw_model_get_hparams(m)->n_vocab;
    int32_t *ids = malloc((size_t)(n_prompt + 256 + RW_SPEC_MAX_K + 1) * sizeof *ids);
    float *logits = malloc((size_t)(RW_SPEC_MAX_K + 1) * (size_t)nv * sizeof(float));
    if (!ids || !logits) {
        rw_cli_error(CMD, "out of memory");
        goto done;
    }
    if (draft_path) {
        if (rw_cli_open_model(CMD, draft_path, &dg, &dm)) goto done;
        if (rw_tokenizer_load(g, &tv, &err) || rw_tokenizer_load(dg, &dv, &err) || rw_spec_check_vocab(tv, dv, &err))
            goto fail;
    }
    if (rw_threadpool_new((int)threads, &pool, &err)) goto fail;
    for (long i = 0; i < n_prompt + 256 + RW_SPEC_MAX_K + 1; i++)
        ids[i] = (int32_t)(((repeat && i < n_prompt ? i % repeat : i) * 7919 + 13) % nv);
    const char *tier = rw_get_kernels();
    rw_json_writer jw;
    if (json) {
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
        rw_json_key(&jw, "target"), rw_json_cstring(&jw, path);
        rw_json_key(&jw, "target_arch"), rw_json_cstring(&jw, rw_model_get_hparams(m)->arch);
        rw_json_key(&jw, "target_bytes"), rw_json_uint(&jw, (uint64_t)rw_gguf_file_size(g));
        rw_json_key(&jw, "draft");
        if (dm) rw_json_cstring(&jw, draft_path);
        else rw_json_null(&jw);
        if (dm) {
            rw_json_key(&jw, "draft_arch"), rw_json_cstring(&jw, rw_model_get_hparams(dm)->arch);
            rw_json_key(&jw, "draft_layers"), rw_json_int(&jw, rw_model_get_hparams(dm)->n_layer);
            rw_json_key(&jw, "draft_bytes"), rw_json_uint(&jw, (uint64_t)rw_gguf_file_size(dg));
        }
        rw_json_key(&jw, "threads"), rw_json_int(&jw, rw_threadpool_size(pool));
        rw_json_key(&jw, "kernels"), rw_json_cstring(&jw, tier);
        rw_json_key(&jw, "numerics"), rw_json_cstring(&jw, rw_get_numerics());
        rw_json_key(&jw, "kv"), rw_json_cstring(&jw, kv == RW_KV_F16 ? "f16" : "f32");
        rw_json_key(&jw, "prompt"), rw_json_int(&jw, n_prompt);
        rw_json_key(&jw, "gen"), rw_json_int(&jw, n_gen);
        rw_json_key(&jw, "reps"), rw_json_int(&jw, reps);
        rw_json_key(&jw, "repeat"), rw_json_int(&jw, repeat);
        rw_json_key(&jw, "repeat_penalty"), rw_json_double(&jw, repeat_penalty, 4);
        rw_json_key(&jw, "spec_mtp"), rw_json_bool(&jw, (spp.sources & RW_SPEC_MTP) != 0);
        rw_json_key(&jw, "spec_ngram"), rw_json_bool(&jw, (spp.sources & RW_SPEC_NGRAM) != 0);
    } else {
        printf("target   %s (%s, %.1f MiB)\n", path, rw_model_get_hparams(m)->arch,
               (double)rw_gguf_file_size(g) / (1024.0 * 1024.0));
        if (dm)
            printf("draft    %s (%s, %d layers, %.1f MiB)\n", draft_path, rw_model_get_hparams(dm)->arch,
                   rw_model_get_hparams(dm)->n_layer, (double)rw_gguf_file_size(dg) / (1024.0 * 1024.0));
        printf("threads  %d, kernels %s, numerics %s, kv %s, prompt %ld%s, gen %ld, reps %ld\n",
               rw_threadpool_size(pool), tier, rw_get_numerics(), kv == RW_KV_F16 ? "f16" : "f32",
               n_prompt, repeat ? " (repeating)" : "", n_gen, reps);
    }

    /* 1. verify pass cost */
    if (rw_model_seq_new(m, kv, n_prompt + RW_SPEC_MAX_K + 1, &s, &err)) goto fail;
    rw_forward_args fa = {.tokens = ids, .n = n_prompt, .logits = logits, .pool = pool};
    if (rw_model_forward(m, s, &fa, &err)) goto fail;
    double t_sum[17] = {0}, t_best[17], t_rw[17] = {0}, c_sum[17] = {0};
    for (int j = 0; j <= n_k; j++)
        t_best[j] = 1e30;
    for (long r = -1; r < reps; r++) { /* r = -1: warm-up */
        for (int j = 0; j <= n_k; j++) {
            const int n = j == 0 ? 1 : ks[j - 1] + 1; /* j = 0: the plain decode step */
            fa = (rw_forward_args){
                .tokens = ids + n_prompt, .n = n, .logits = logits, .all_logits = j > 0, .pool = pool};
            double t0 = now_s(), c0 = cpu_s();
            if (rw_model_forward(m, s, &fa, &err)) goto fail;
            double t1 = now_s(), c1 = cpu_s();
            if (rw_model_seq_rewind(s, n_prompt, pool, &err)) goto fail;
            double t2 = now_s();
            if (r < 0) continue;
            t_sum[j] += t1 - t0;
            c_sum[j] += c1 - c0;
            t_rw[j] += t2 - t1;
            if (t1 - t0 < t_best[j]) t_best[j] = t1 - t0;
        }
    }
    /* the MTP block: one chained draft token (one row with the head), and
     * one catch-up row (in a pass of 16, no head), each with the block's KV
     * cut back after */
    double t_mtp = 0, t_mtp_best = 1e30, t_cu = 0, c_mtp = 0, c_cu = 0;
    const bool mtp_cost = (spp.sources & RW_SPEC_MTP) && n_prompt > 16;
    if (mtp_cost) {
        const int64_t E = rw_model_get_hparams(m)->n_embd;
        float *h = calloc((size_t)E, sizeof *h);
        if (!h) {
            rw_cli_error(CMD, "out of memory");
            goto done;
        }
        /* the block's KV over the prompt first (as drafting catches up) */
        rw_mtp_item ci = {.seq = s, .tokens = ids, .n = n_prompt - 16};
        if (rw_model_mtp_forward(m, &ci, 1, pool, &err)) {
            free(h);
            goto fail;
        }
        for (long r = -1; r < reps; r++) {
            rw_mtp_item cu = {.seq = s, .tokens = ids + n_prompt - 16, .n = 16, .h_out = h};
            double t0 = now_s(), c0 = cpu_s();
            if (rw_model_mtp_forward(m, &cu, 1, pool, &err)) break;
            double t1 = now_s(), c1 = cpu_s();
            rw_mtp_item dr = {.seq = s, .tokens = ids + n_prompt, .n = 1, .h = h, .h_out = h, .logits = logits};
            if (rw_model_mtp_forward(m, &dr, 1, pool, &err)) break;
            double t2 = now_s(), c2 = cpu_s();
            if (rw_model_seq_mtp_rewind(s, n_prompt - 16, &err)) break;
            if (r < 0) continue;
            t_cu += (t1 - t0) / 16;
            t_mtp += t2 - t1;
            c_cu += (c1 - c0) / 16;
            c_mtp += c2 - c1;
            if (t2 - t1 < t_mtp_best) t_mtp_best = t2 - t1;
        }
        free(h);
        if (err.msg[0]) goto fail;
    }
    if (json) {
        if (mtp_cost) {
            rw_json_key(&jw, "mtp_draft_ms_mean"), rw_json_double(&jw, 1e3 * t_mtp / (double)reps, 4);
            rw_json_key(&jw, "mtp_draft_vs_decode_mean"), rw_json_double(&jw, t_mtp / t_sum[0], 4);
            rw_json_key(&jw, "mtp_draft_vs_decode_best"), rw_json_double(&jw, t_mtp_best / t_best[0], 4);
            rw_json_key(&jw, "mtp_catch_up_row_vs_decode"), rw_json_double(&jw, t_cu / t_sum[0], 4);
            rw_json_key(&jw, "mtp_draft_vs_decode_cpu"), rw_json_double(&jw, c_mtp / c_sum[0], 4);
            rw_json_key(&jw, "mtp_catch_up_row_vs_decode_cpu"), rw_json_double(&jw, c_cu / c_sum[0], 4);
        }
        rw_json_key(&jw, "decode_step_ms_mean"), rw_json_double(&jw, 1e3 * t_sum[0] / (double)reps, 4);
        rw_json_key(&jw, "decode_step_ms_best"), rw_json_double(&jw, 1e3 * t_best[0], 4);
        rw_json_key(&jw, "verify");
        rw_json_begin_array(&jw);
        for (int j = 1; j <= n_k; j++) {
            rw_json_begin_object(&jw);
            rw_json_key(&jw, "k"), rw_json_int(&jw, ks[j - 1]);
            rw_json_key(&jw, "tokens"), rw_json_int(&jw, ks[j - 1] + 1);
            rw_json_key(&jw, "ms_mean"), rw_json_double(&jw, 1e3 * t_sum[j] / (double)reps, 4);
            rw_json_key(&jw, "ms_best"), rw_json_double(&jw, 1e3 * t_best[j], 4);
            rw_json_key(&jw, "vs_decode_mean"), rw_json_double(&jw, t_sum[j] / t_sum[0], 4);
            rw_json_key(&jw, "vs_decode_best"), rw_json_double(&jw, t_best[j] / t_best[0], 4);
            rw_json_key(&jw, "vs_decode_cpu"), rw_json_double(&jw, c_sum[j] / c_sum[0], 4);
            rw_json_key(&jw, "rewind_ms_mean"), rw_json_double(&jw, 1e3 * t_rw[j] / (double)reps, 4);
            rw_json_end_object(&jw);
        }
        rw_json_end_array(&jw);
        rw_json_key(&jw, "decode");
        rw_json_begin_array(&jw);
    } else {
        printf("\nverify pass of K+1 tokens (all logits) vs one decode step (1 token): mean / best\n");
        printf("  decode step   %8.2f ms  / %8.2f ms\n", 1e3 * t_sum[0] / (double)reps, 1e3 * t_best[0]);
        for (int j = 1; j <= n_k; j++)
            printf("  K=%-2d (%2d tok) %8.2f ms  / %8.2f ms   = %.3fx / %.3fx, cpu %.3fx   (rewind back %.3f ms)\n",
                   ks[j - 1], ks[j - 1] + 1, 1e3 * t_sum[j] / (double)reps, 1e3 * t_best[j], t_sum[j] / t_sum[0],
                   t_best[j] / t_best[0], c_sum[j] / c_sum[0], 1e3 * t_rw[j] / (double)reps);
        if (mtp_cost) {
            printf("  MTP draft token %6.2f ms  / %8.2f ms   = %.3fx / %.3fx, cpu %.3fx of a decode step\n",
                   1e3 * t_mtp / (double)reps, 1e3 * t_mtp_best, t_mtp / t_sum[0], t_mtp_best / t_best[0],
                   c_mtp / c_sum[0]);
            printf("  MTP catch-up row %5.3f ms               = %.3fx, cpu %.3fx (in a pass of 16)\n",
                   1e3 * t_cu / (double)reps, t_cu / t_sum[0], c_cu / c_sum[0]);
        }
    }

    /* 2 and 3. decoding */
    setup su = {.m = m, .kv = kv, .pool = pool, .prompt = ids, .n_prompt = n_prompt, .n_gen = n_gen,
                .repeat_penalty = repeat_penalty};
    rw_spec_params srcf = spp, srca = spp; /* --spec: K = 4 fixed and adaptive */
    rw_spec_params_set_costs(&srca, m, false);
    srcf.k_max = srca.k_max = 4;
    srcf.adaptive = false;
    rw_spec_params fixed4 = rw_spec_params_default();
    fixed4.k_max = 4;
    fixed4.adaptive = false;
    rw_spec_params adapt = rw_spec_params_default();
    adapt.k_max = 4;
    if (dm) adapt.draft_cost = rw_cli_draft_cost(dg, g);
    for (int pass = 0; pass < 2; pass++) {
        const int n = pass == 0 ? 1 : (int)n_seqs;
        if (n <= 0) continue;
        if (json) {
            rw_json_begin_object(&jw);
            rw_json_key(&jw, "seqs"), rw_json_int(&jw, n);
            rw_json_key(&jw, "runs");
            rw_json_begin_array(&jw);
        } else
            printf("\ndecode, %d sequence%s, %ld tokens each (tok/s over all sequences)\n", n, n == 1 ? "" : "s",
                   n_gen);
        struct {
            const char *name;
            rw_model *draft;
            const rw_spec_params *pp;
            bool spec;
        } runs[] = {{"plain", NULL, NULL, false},
                    {"self-draft K=4", m, &fixed4, spp.sources == 0}, /* skipped with --spec: its runs are the point */
                    {"draft K=4 fixed", dm, &fixed4, dm != NULL},
                    {"draft adaptive<=4", dm, &adapt, dm != NULL},
                    {"--spec K=4 fixed", NULL, &srcf, spp.sources != 0},
                    {"--spec adaptive<=4", NULL, &srca, spp.sources != 0}};
        double plain_rate = 0, plain_crate = 0;
        {
            /* an untimed plain run first: the first run would otherwise also
             * pay for the process's first touch of its state memory (page
             * faults), which later runs reuse, and look slower than it is */
            su.dm = NULL;
            su.spec = false;
            result warm;
            if (run_decode(&su, NULL, n, &warm, &err)) goto fail;
        }
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
            if (!runs[r].spec && r > 0) continue;
            su.dm = runs[r].draft;
            su.spec = runs[r].spec;
            result res;
            if (run_decode(&su, runs[r].pp, n, &res, &err)) goto fail;
            const double rate = (double)(n * (n_gen - 1)) / res.seconds;
            const double crate = (double)(n * (n_gen - 1)) / res.cpu; /* tokens per CPU second */
            if (r == 0) plain_rate = rate, plain_crate = crate;
            const double acc = res.st.drafted ? (double)res.st.accepted / (double)res.st.drafted : 0.0;
            const double per_pass = res.st.steps ? (double)res.st.emitted / (double)res.st.steps : 0.0;
            if (json) {
                rw_json_begin_object(&jw);
                rw_json_key(&jw, "name"), rw_json_cstring(&jw, runs[r].name);
                rw_json_key(&jw, "tok_s"), rw_json_double(&jw, rate, 4);
                rw_json_key(&jw, "vs_plain"), rw_json_double(&jw, rate / plain_rate, 4);
                if (r > 0) {
                    rw_json_key(&jw, "drafted"), rw_json_int(&jw, res.st.drafted);
                    rw_json_key(&jw, "accepted"), rw_json_int(&jw, res.st.accepted);
                    rw_json_key(&jw, "acceptance"), rw_json_double(&jw, acc, 6);
                    rw_json_key(&jw, "verify_passes"), rw_json_int(&jw, res.st.steps);
                    rw_json_key(&jw, "tokens_per_verify_pass"), rw_json_double(&jw, per_pass, 4);
                    rw_json_key(&jw, "ngram_drafted"), rw_json_int(&jw, res.st.ngram_drafted);
                    rw_json_key(&jw, "ngram_accepted"), rw_json_int(&jw, res.st.ngram_accepted);
                }
                rw_json_key(&jw, "vs_plain_cpu"), rw_json_double(&jw, crate / plain_crate, 4);
                rw_json_end_object(&jw);
                continue;
            }
            printf("  %-18s %8.2f tok/s  (%.3fx plain, cpu %.3fx)", runs[r].name, rate, rate / plain_rate,
                   crate / plain_crate);
            if (r > 0)
                printf("  acceptance %.1f%% (%lld of %lld), %.2f tokens per verify pass", 100.0 * acc,
                       (long long)res.st.accepted, (long long)res.st.drafted, per_pass);
            printf("\n");
            fflush(stdout);
        }
        if (json) {
            rw_json_end_array(&jw);
            rw_json_end_object(&jw);
        }
    }
    if (json) {
        rw_json_end_array(&jw);
        rw_json_end_object(&jw);
        printf("\n");
    }
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_model_seq_free(s);
    rw_threadpool_free(pool);
    free(ids);
    free(logits);
    rw_tokenizer_free(tv);
    rw_tokenizer_free(dv);
    rw_model_free(dm);
    rw_gguf_close(dg);
    rw_model_free(m);
    rw_gguf_close(g);
    return rc;
}
