/* bench_state.c - `rewind bench state MODEL [--prompt N] [--threads N]
 * [--kv f32|f16] [--json]`: what a sequence's state costs (the cache
 * layer, models/model.h): bytes per token of KV, bytes of one recurrent
 * checkpoint and of one logged token, what is held after an N-token prompt,
 * and the measured cost of rewinds of several distances (recurrence replay
 * or recompute, and the wall time), next to one decode step.
 *
 * `rewind bench chat MODEL [--turns N] [--system-tokens N] [--gen N]
 * [--threads N] [--json]`: a multi-turn conversation (a long system prompt,
 * growing history, every 4th turn regenerated (the same prompt again) and
 * every 5th an edit of the last user message) run with and without the
 * prefix cache (pcache/pcache.h), in process: time to first token per
 * turn, cached / recomputed prompt tokens, cache bytes. Message boundaries
 * are marked as the server marks them. Token ids are random (the model's
 * weights are too, for synth models): the workload is about state, not
 * text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threadpool.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "pcache/pcache.h"
#include "sampler/sampler.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rs = 12345;
static int32_t rand_tok(int64_t V) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)(1 + (rs >> 33) % (uint64_t)(V - 1));
}

typedef struct {
    const char *model;
    long prompt, threads, turns, sys, gen, checkpoints;
    rw_kv_type kv;
    bool json;
} opts;

static int parse(const char *cmd, int argc, char **argv, opts *o) {
    const rw_cli_opt table[] = {
        {"--prompt", RW_OPT_INT, &o->prompt, 16, 1 << 20, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&o->threads),
        RW_OPT_KERNELS_TIER,
        {"--turns", RW_OPT_INT, &o->turns, 1, 1000, 0, 0, NULL, NULL, NULL},
        {"--system-tokens", RW_OPT_INT, &o->sys, 1, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--gen", RW_OPT_INT, &o->gen, 1, 4096, 0, 0, NULL, NULL, NULL},
        {"--checkpoints", RW_OPT_INT, &o->checkpoints, 0, 1 << 20, 0, 0, NULL, NULL, NULL},
        RW_OPT_KV_TYPE(&o->kv),
        {"--json", RW_OPT_FLAG, &o->json, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    if (rw_cli_parse_opts(cmd, argc, argv, table, &o->model, 1, NULL)) return 2;
    if (!o->model) {
        rw_cli_error(cmd, "needs a MODEL");
        return 2;
    }
    return 0;
}

int rw_bench_state(int argc, char **argv) {
    const char *CMD = "bench state";
    opts o = {.prompt = 1024, .threads = 0, .kv = RW_KV_F16};
    if (parse(CMD, argc, argv, &o)) return 2;
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    if (rw_cli_open_model(CMD, o.model, &g, &m)) return 1;
    const int64_t V = rw_model_get_hparams(m)->n_vocab, N = o.prompt;
    rw_error err = {0};
    rw_threadpool *pool = NULL;
    rw_model_seq *s = NULL, *c = NULL;
    int32_t *t = malloc((size_t)(N + 1) * sizeof *t);
    float *logits = malloc((size_t)V * sizeof *logits);
    int rc = 1;
    if (!t || !logits || rw_threadpool_new((int)o.threads, &pool, &err) ||
        rw_model_seq_new(m, o.kv, N + 1, &s, &err))
        goto fail;
    for (int64_t i = 0; i <= N; i++) t[i] = rand_tok(V);
    double t0 = now_s();
    rw_forward_args a = {.tokens = t, .n = N, .logits = logits, .pool = pool};
    if (rw_model_forward(m, s, &a, &err)) goto fail;
    const double prefill = now_s() - t0;
    /* one decode step, on a clone */
    if (rw_model_seq_clone(s, &c, &err)) goto fail;
    t0 = now_s();
    rw_forward_args d = {.tokens = t + N, .n = 1, .logits = logits, .pool = pool};
    if (rw_model_forward(m, c, &d, &err)) goto fail;
    const double decode = now_s() - t0;
    rw_model_seq_free(c);
    c = NULL;
    size_t kv, rec;
    rw_model_seq_bytes_by_kind(s, &kv, &rec);
    int64_t ck[256];
    const int n_ck = rw_model_seq_checkpoints(s, ck, 256);
    const size_t ckb = rw_model_seq_checkpoint_bytes(s), logb = rw_model_seq_log_bytes_per_token(s);
    if (o.json)
        printf("{\"model\": \"%s\", \"prompt\": %lld, \"kv_bytes_per_token\": %.1f, \"checkpoint_bytes\": %zu, "
               "\"log_bytes_per_token\": %zu, \"checkpoints\": %d, \"recurrent_bytes\": %zu, \"kv_bytes\": %zu, "
               "\"prefill_s\": %.4f, \"decode_step_s\": %.4f, \"rewinds\": [",
               o.model, (long long)N, (double)kv / (double)N, ckb, logb, n_ck, rec, kv, prefill, decode);
    else {
        printf("model %s, %lld-token prompt, kv %s\n", o.model, (long long)N, o.kv == RW_KV_F16 ? "f16" : "f32");
        printf("  KV (allocated)            %.1f bytes per token (%.1f MiB)\n", (double)kv / (double)N,
               (double)kv / 1048576.0);
        printf("  one recurrent checkpoint  %.2f MiB (every recurrent layer)\n", (double)ckb / 1048576.0);
        printf("  logged recurrence inputs  %.1f KiB per token\n", (double)logb / 1024.0);
        printf("  held after the prompt     %d checkpoints at", n_ck);
        for (int i = 0; i < n_ck && i < 12; i++) printf(" %lld", (long long)ck[i]);
        printf("%s; recurrent state total %.1f MiB\n", n_ck > 12 ? " ..." : "", (double)rec / 1048576.0);
        printf("  prefill %.1f tok/s, one decode step %.1f ms\n", (double)N / prefill, decode * 1e3);
        printf("  %-10s %8s %10s %10s %10s\n", "rewind by", "replay", "recompute", "ms", "decode steps");
    }
    const int64_t dist[] = {1, 4, 16, 17, 64, 256, 512, N / 2, N};
    bool first = true;
    for (size_t i = 0; i < sizeof dist / sizeof *dist; i++) {
        if (dist[i] > N || (i && dist[i] == dist[i - 1])) continue;
        int64_t rep, recmp;
        rw_model_seq_rewind_cost(s, N - dist[i], &rep, &recmp);
        if (rw_model_seq_clone(s, &c, &err)) goto fail;
        t0 = now_s();
        if (rw_model_seq_rewind(c, N - dist[i], pool, &err)) goto fail;
        const double dt = now_s() - t0;
        rw_model_seq_free(c);
        c = NULL;
        if (o.json)
            printf("%s{\"by\": %lld, \"replay\": %lld, \"recompute\": %lld, \"s\": %.5f}", first ? "" : ", ",
                   (long long)dist[i], (long long)rep, (long long)recmp, dt);
        else
            printf("  %-10lld %8lld %10lld %10.2f %10.2f\n", (long long)dist[i], (long long)rep, (long long)recmp,
                   dt * 1e3, dt / decode);
        first = false;
    }
    if (o.json) printf("]}\n");
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_model_seq_free(c);
    rw_model_seq_free(s);
    rw_threadpool_free(pool);
    free(t), free(logits);
    rw_model_free(m);
    rw_gguf_close(g);
    return rc;
}

/* ---- bench chat ---- */

typedef struct {
    int32_t *t;
    int64_t n, cap;
    int64_t marks[512];
    int n_marks;
} history;

static void push(history *h, int32_t v) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 4096;
        h->t = realloc(h->t, (size_t)h->cap * sizeof *h->t);
    }
    h->t[h->n++] = v;
}

static void end_message(history *h) {
    if (h->n_marks < 512) h->marks[h->n_marks++] = h->n;
}

/* One request: the prompt h (with its message marks), gen greedy tokens;
 * returns the time to the first token and fills the answer. */
static double request(rw_model *m, rw_pcache *c, const history *h, int gen, int32_t *answer, rw_threadpool *pool,
                      rw_kv_type kv, int64_t ctx, long checkpoints, rw_pcache_usage *u, rw_error *err) {
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits), *prompt_logits = malloc((size_t)V * sizeof *logits);
    rw_model_seq *s = NULL;
    int64_t reused = 0;
    double t0 = now_s(), ttft = -1;
    rw_status st = c ? rw_pcache_acquire(c, h->t, h->n, pool, &s, &reused, logits, u, err)
                     : rw_model_seq_new(m, kv, ctx, &s, err);
    if (!st) {
        /* as rewind serve's engine (engine_seq.c): the messages' ends and
         * the prompt's are marks, and --checkpoints bounds the rest */
        for (int i = 0; i < h->n_marks; i++) rw_model_seq_mark(s, h->marks[i], NULL);
        rw_model_seq_mark(s, h->n, NULL);
        rw_model_seq_limit_checkpoints(s, (int)checkpoints);
        if (reused < h->n) {
            rw_forward_args a = {.tokens = h->t + reused, .n = h->n - reused, .logits = logits, .pool = pool};
            st = rw_model_forward(m, s, &a, err);
        }
    }
    if (!st) {
        memcpy(prompt_logits, logits, (size_t)V * sizeof *logits);
        answer[0] = rw_argmax(logits, V);
        ttft = now_s() - t0;
        for (int g = 1; g < gen && !st; g++) {
            rw_forward_args a = {.tokens = &answer[g - 1], .n = 1, .logits = logits, .pool = pool};
            st = rw_model_forward(m, s, &a, err);
            answer[g] = rw_argmax(logits, V);
        }
        /* the sequence holds prompt + gen-1 answer tokens; its last logits chose answer[gen-1] */
    }
    if (!st && c) rw_pcache_insert(c, s, gen > 1 ? logits : NULL, h->n, prompt_logits);
    else rw_model_seq_free(s);
    free(logits), free(prompt_logits);
    return st ? -1 : ttft;
}

int rw_bench_chat(int argc, char **argv) {
    const char *CMD = "bench chat";
    opts o = {.threads = 0, .turns = 8, .sys = 1950, .gen = 32, .checkpoints = RW_ENGINE_CHECKPOINTS, .kv = RW_KV_F16};
    if (parse(CMD, argc, argv, &o)) return 2;
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    if (rw_cli_open_model(CMD, o.model, &g, &m)) return 1;
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    const int64_t ctx = o.sys + o.turns * (80 + o.gen) + 64;
    rw_error err = {0};
    rw_threadpool *pool = NULL;
    rw_pcache *c = NULL;
    int rc = 1;
    int32_t *answer = malloc((size_t)o.gen * sizeof *answer), *answer2 = malloc((size_t)o.gen * sizeof *answer2);
    history h = {0}, prev = {0};
    const rw_pcache_config cfg = {.mem_bytes = (size_t)8 << 30};
    if (rw_threadpool_new((int)o.threads, &pool, &err) || rw_pcache_new(m, o.kv, ctx, &cfg, &c, &err)) goto fail;
    for (int64_t i = 0; i < o.sys; i++) push(&h, rand_tok(V));
    end_message(&h);
    if (!o.json)
        printf("%-5s %-12s %8s %8s %10s %12s %12s\n", "turn", "kind", "prompt", "cached", "recomputed", "TTFT cached",
               "TTFT plain");
    else
        printf("{\"model\": \"%s\", \"turns\": [", o.model);
    double sum_c = 0, sum_p = 0;
    int64_t sum_cached = 0, sum_prompt = 0;
    for (int turn = 1; turn <= o.turns; turn++) {
        const char *kind = "new turn";
        if (turn > 1 && turn % 4 == 0) { /* regenerate: the same prompt again */
            kind = "regenerate";
            h.n = prev.n, h.n_marks = prev.n_marks;
            memcpy(h.t, prev.t, (size_t)prev.n * sizeof *h.t);
            memcpy(h.marks, prev.marks, sizeof h.marks);
        } else if (turn > 1 && turn % 5 == 0) { /* edit the last user message */
            kind = "edit";
            h.n = prev.n, h.n_marks = prev.n_marks;
            memcpy(h.t, prev.t, (size_t)prev.n * sizeof *h.t);
            memcpy(h.marks, prev.marks, sizeof h.marks);
            h.n = h.n_marks >= 2 ? h.marks[h.n_marks - 2] : h.n;
            h.n_marks = h.n_marks >= 2 ? h.n_marks - 1 : h.n_marks;
            for (int i = 0; i < 30; i++) push(&h, rand_tok(V));
            end_message(&h);
        } else {
            if (turn > 1) { /* the previous answer joins the history */
                for (int i = 0; i < o.gen; i++) push(&h, answer[i]);
                end_message(&h);
            }
            for (int i = 0, k = 20 + (int)(rand_tok(V) % 40); i < k; i++) push(&h, rand_tok(V));
            end_message(&h);
        }
        prev.n = 0;
        for (int64_t i = 0; i < h.n; i++) push(&prev, h.t[i]);
        prev.n_marks = h.n_marks;
        memcpy(prev.marks, h.marks, sizeof h.marks);
        rw_pcache_usage u = {0};
        const double tc = request(m, c, &h, (int)o.gen, answer, pool, o.kv, ctx, o.checkpoints, &u, &err);
        const double tp = request(m, NULL, &h, (int)o.gen, answer2, pool, o.kv, ctx, o.checkpoints, NULL, &err);
        if (tc < 0 || tp < 0) goto fail;
        if (memcmp(answer, answer2, (size_t)o.gen * sizeof *answer)) {
            rw_cli_error(CMD, "turn %d: the cached answer differs from the plain one", turn);
            goto done;
        }
        sum_c += tc, sum_p += tp, sum_cached += u.from_memory + u.from_disk, sum_prompt += h.n;
        if (o.json)
            printf("%s{\"turn\": %d, \"kind\": \"%s\", \"prompt\": %lld, \"cached\": %lld, \"recomputed\": %lld, "
                   "\"reason\": \"%s\", \"ttft_cached_s\": %.4f, \"ttft_plain_s\": %.4f}",
                   turn > 1 ? ", " : "", turn, kind, (long long)h.n, (long long)(u.from_memory + u.from_disk),
                   (long long)u.recomputed, rw_pcache_reason_name(u.reason), tc, tp);
        else
            printf("%-5d %-12s %8lld %8lld %10lld %10.3f s %10.3f s\n", turn, kind, (long long)h.n,
                   (long long)(u.from_memory + u.from_disk), (long long)u.recomputed, tc, tp);
    }
    rw_pcache_stats st;
    rw_pcache_get_stats(c, &st);
    rw_model_seq *probe = NULL;
    size_t ckb = 0;
    if (!rw_model_seq_new(m, o.kv, 16, &probe, &err)) ckb = rw_model_seq_checkpoint_bytes(probe);
    rw_model_seq_free(probe);
    if (o.json)
        printf("], \"ttft_cached_total_s\": %.4f, \"ttft_plain_total_s\": %.4f, \"cached_tokens\": %lld, "
               "\"prompt_tokens\": %lld, \"cache_bytes_kv\": %llu, \"cache_bytes_recurrent\": %llu, "
               "\"cache_bytes_logits\": %llu, \"cache_bytes\": %llu, \"cache_bytes_unshared\": %llu, "
               "\"checkpoint_bytes\": %zu, \"entries\": %llu}\n",
               sum_c, sum_p, (long long)sum_cached, (long long)sum_prompt, (unsigned long long)st.bytes_kv,
               (unsigned long long)st.bytes_recurrent, (unsigned long long)st.bytes_logits,
               (unsigned long long)st.bytes_kv_and_state, (unsigned long long)st.bytes_unshared, ckb,
               (unsigned long long)st.entries);
    else
        printf("total TTFT %.3f s cached vs %.3f s plain; %lld of %lld prompt tokens from the cache; cache: %llu "
               "entries, KV %.1f MiB, recurrent %.1f MiB (one checkpoint %.2f MiB), logits %.1f MiB; %.1f MiB in "
               "all, shared pages and checkpoints counted once (%.1f MiB with every entry counted alone)\n",
               sum_c, sum_p, (long long)sum_cached, (long long)sum_prompt, (unsigned long long)st.entries,
               (double)st.bytes_kv / 1048576.0, (double)st.bytes_recurrent / 1048576.0, (double)ckb / 1048576.0,
               (double)st.bytes_logits / 1048576.0, (double)st.bytes_kv_and_state / 1048576.0,
               (double)st.bytes_unshared / 1048576.0);
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_pcache_free(c);
    rw_threadpool_free(pool);
    free(h.t), free(prev.t), free(answer), free(answer2);
    rw_model_free(m);
    rw_gguf_close(g);
    return rc;
}
