/* bench_serve.c - `rewind bench serve MODEL [--clients 1,4,16] [--requests N]
 * [--prompt N] [--gen N] [--parallel N] [--threads N] [--json]
 * [--draft DRAFT.gguf [--draft-max K] [--draft-fixed]]`.
 *
 * Starts the engine and the HTTP server in this process on 127.0.0.1 (a free
 * port) and, for each client count C, runs C client threads that send
 * streaming /v1/completions requests over real sockets, one after another,
 * until N requests (default max(C, 4)) have completed. Every request has its
 * own random prompt of --prompt token ids (so no two share a prefix) and
 * generates exactly --gen tokens (greedy, ignore_eos). Reported per C:
 * generated tokens per second over the wall time of the level, and time to
 * first token (request sent -> first SSE chunk carrying a token) p50 / p99
 * (nearest rank; with few requests p99 is the maximum). With --draft the
 * engine decodes speculatively (as `rewind serve --draft`) and each level
 * also reports the draft's acceptance (accepted / drafted tokens) and the
 * tokens per verify pass (per sequence and step). An untimed warm-up round
 * at the largest C runs first. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json_writer.h"
#include "chat/chat.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "engine/spec.h"
#include "kernels/matmul.h"
#include "tools/http_client.h"
#include "server/server.h"

static const char *CMD = "bench serve";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    int port, n_prompt, n_gen;
    int32_t n_vocab;
    pthread_mutex_t *mu;
    int *next_req, n_req; /* shared counter of requests handed out */
    double *ttft;         /* [n_req] */
    long long tokens;     /* this client's generated tokens */
    int errors;
} bclient;

typedef struct {
    double t0, first;
    long long tokens;
    bool bad;
} bstream;

static bool on_event(void *user, const char *data, size_t n) {
    bstream *b = user;
    if (n == 6 && !memcmp(data, "[DONE]", 6)) return true;
    json_t *j = json_loadb(data, n, JSON_ALLOW_NUL, NULL);
    if (!j) {
        b->bad = true;
        return false;
    }
    size_t k = json_array_size(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "token_ids"));
    if (k && b->first == 0) b->first = now_s();
    b->tokens += (long long)k;
    if (json_object_get(j, "error")) b->bad = true;
    json_decref(j);
    return true;
}

static bool on_data(void *user, const char *d, size_t n) { return rw_sse_feed(user, d, n); }

static void *client_main(void *arg) {
    bclient *c = arg;
    size_t cap = (size_t)c->n_prompt * 12 + 256;
    char *body = malloc(cap);
    if (!body) {
        c->errors++;
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(c->mu);
        int r = (*c->next_req)++;
        pthread_mutex_unlock(c->mu);
        if (r >= c->n_req) break;
        uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1); /* the request's own prompt */
        size_t off = (size_t)snprintf(body, cap, "{\"prompt\":[");
        for (int i = 0; i < c->n_prompt; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            off += (size_t)snprintf(body + off, cap - off, "%s%d", i ? "," : "", (int)(x % (uint64_t)c->n_vocab));
        }
        off += (size_t)snprintf(body + off, cap - off,
                                "],\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true,"
                                "\"stream\":true}",
                                c->n_gen);
        bstream b = {.t0 = now_s()};
        rw_sse_parser p = {.on_event = on_event, .user = &b};
        rw_http_request rq = {.port = c->port, .method = "POST", .path = "/v1/completions", .body = body,
                              .body_len = off, .on_data = on_data, .user = &p, .timeout_ms = 600000};
        rw_http_response resp;
        rw_error err = {0};
        rw_status st = rw_http_do(&rq, &resp, &err);
        if (st || resp.status != 200 || b.bad || b.tokens != c->n_gen) {
            c->errors++;
            fprintf(stderr, "rewind bench serve: request %d failed: %s (status %d, %lld tokens)\n", r,
                    st ? err.msg : "", resp.status, b.tokens);
        }
        c->ttft[r] = b.first > 0 ? b.first - b.t0 : 0;
        c->tokens += b.tokens;
        rw_http_response_free(&resp);
        rw_sse_free(&p);
    }
    free(body);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double nearest_rank(const double *sorted, int n, double q) {
    int k = (int)(q * n + 0.999999);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1];
}

typedef struct {
    int clients, requests, errors;
    long long tokens;
    double wall, tok_s, ttft_p50, ttft_p99, mean_batch;
    long long verify, drafted, accepted, emitted; /* speculative decoding, this level */
} level_result;

static int usage(void) {
    fprintf(stderr, "usage: rewind bench serve MODEL [--clients 1,4,16] [--requests N] [--prompt N] [--gen N] "
                    "[--parallel N] [--threads N] [--kernels TIER] [--json] [--draft DRAFT.gguf [--draft-max K] "
                    "[--draft-fixed]]\n");
    return 2;
}

int rw_bench_serve(int argc, char **argv) {
    const char *path = NULL, *clients_arg = "1,4,16";
    long requests = 0, n_prompt = 32, n_gen = 32, threads = 0, parallel = 16;
    bool json = false, draft_fixed = false;
    const char *draft_path = NULL;
    long draft_max = 4;
    const rw_cli_opt opts[] = {
        {"--clients", RW_OPT_STR, &clients_arg, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--requests", RW_OPT_INT, &requests, 1, 100000, 0, 0, NULL, NULL, NULL},
        {"--prompt", RW_OPT_INT, &n_prompt, 1, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--gen", RW_OPT_INT, &n_gen, 1, 1 << 20, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        {"--parallel", RW_OPT_INT, &parallel, 1, 1024, 0, 0, NULL, NULL, NULL},
        RW_OPT_DRAFT(&draft_path, &draft_max, 1, &draft_fixed),
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &path, 1, NULL);
    if (prc) return prc == RW_CLI_BAD_LINE ? usage() : 2;
    if (!path) return usage();
    int levels[16], n_levels = 0;
    for (const char *p = clients_arg; *p && n_levels < 16;) {
        char *end;
        long c = strtol(p, &end, 10);
        if (end == p || c < 1 || c > 256 || (*end && *end != ',')) {
            rw_cli_error(CMD, "--clients needs a list like 1,4,16 (each 1..256), not \"%s\"", clients_arg);
            return 2;
        }
        levels[n_levels++] = (int)c;
        p = *end ? end + 1 : end;
    }

    rw_cli_served sv;
    if (rw_cli_served_open(CMD, path, draft_path, &sv)) return 1;
    rw_model *const m = sv.m, *const dm = sv.dm;
    rw_tokenizer *const tok = sv.tok;
    rw_engine *e = NULL;
    rw_server *s = NULL;
    rw_error err = {0};
    int rc = 1;
    level_result res[16];
    const rw_engine_config ec = {
        .n_threads = (int)threads,
        .max_running = (int)parallel,
        .max_queued = 1024,
        .n_ctx = n_prompt + n_gen,
        .prefill_chunk = 256,
        .kv_type = RW_KV_F16,
        .draft = dm,
        .draft_tok = sv.dtok,
        .draft_max = (int)draft_max,
        .draft_fixed = draft_fixed,
        .draft_cost = rw_cli_draft_cost(sv.dg, sv.g),
        .max_checkpoints = RW_ENGINE_CHECKPOINTS}; /* as rewind serve */
    if (rw_engine_new(m, tok, &ec, &e, &err)) goto fail;
    const rw_server_config sc = {.model_id = "bench", .port = 0};
    if (rw_server_start(e, tok, sv.tmpl, sv.bos, sv.eos, &sc, &s, &err)) goto fail;
    const int32_t n_vocab = rw_model_n_vocab(m);
    /* li = -1: an untimed warm-up at the largest client count, so that
     * every level meets memory the process has touched before (first touch
     * is expensive on some machines, and would otherwise fall on whichever
     * level runs first) */
    int max_level = 1;
    for (int li = 0; li < n_levels; li++)
        if (levels[li] > max_level) max_level = levels[li];
    const char *tier = rw_get_kernels();
    const char *numerics = rw_get_numerics();
    if (!json) printf("kernels %s, numerics %s, kv f16, prompt %ld, gen %ld\n", tier, numerics, n_prompt, n_gen);
    for (int li = -1; li < n_levels; li++) {
        const int nc = li < 0 ? max_level : levels[li];
        const int nr = requests ? (int)requests : (nc > 4 ? nc : 4);
        double *ttft = calloc((size_t)nr, sizeof *ttft);
        bclient *cl = calloc((size_t)nc, sizeof *cl);
        pthread_t *th = calloc((size_t)nc, sizeof *th);
        pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        int next = 0;
        if (!ttft || !cl || !th) {
            free(ttft);
            free(cl);
            free(th);
            rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
            goto fail;
        }
        rw_engine_stats st0, st1;
        rw_engine_stats_full(e, &st0, sizeof st0, NULL);
        const double t0 = now_s();
        for (int i = 0; i < nc; i++) {
            cl[i] = (bclient){.port = rw_server_port(s), .n_prompt = (int)n_prompt, .n_gen = (int)n_gen,
                              .n_vocab = n_vocab, .mu = &mu, .next_req = &next, .n_req = nr, .ttft = ttft};
            pthread_create(&th[i], NULL, client_main, &cl[i]);
        }
        level_result warm, *r = li < 0 ? &warm : &res[li];
        *r = (level_result){.clients = nc, .requests = nr};
        for (int i = 0; i < nc; i++) {
            pthread_join(th[i], NULL);
            r->tokens += cl[i].tokens;
            r->errors += cl[i].errors;
        }
        r->wall = now_s() - t0;
        rw_engine_stats_full(e, &st1, sizeof st1, NULL);
        qsort(ttft, (size_t)nr, sizeof *ttft, cmp_double);
        r->tok_s = (double)r->tokens / r->wall;
        r->ttft_p50 = nearest_rank(ttft, nr, 0.50);
        r->ttft_p99 = nearest_rank(ttft, nr, 0.99);
        uint64_t steps = st1.batch_size.count - st0.batch_size.count;
        r->mean_batch = steps ? (st1.batch_size.sum - st0.batch_size.sum) / (double)steps : 0;
        r->verify = (long long)(st1.spec_verify - st0.spec_verify);
        r->drafted = (long long)(st1.spec_drafted - st0.spec_drafted);
        r->accepted = (long long)(st1.spec_accepted - st0.spec_accepted);
        r->emitted = (long long)(st1.spec_emitted - st0.spec_emitted);
        if (!json && li >= 0) {
            printf("clients %3d  requests %4d  generated %6lld tok in %7.2f s  %8.2f tok/s  TTFT p50 %7.3f s  p99 "
                   "%7.3f s  mean batch %5.2f seqs%s",
                   nc, nr, r->tokens, r->wall, r->tok_s, r->ttft_p50, r->ttft_p99, r->mean_batch,
                   r->errors ? "  (errors!)" : "");
            if (dm)
                printf("  draft: %lld drafted, acceptance %.1f%%, %.2f tok/verify pass", r->drafted,
                       r->drafted ? 100.0 * (double)r->accepted / (double)r->drafted : 0.0,
                       r->verify ? (double)r->emitted / (double)r->verify : 0.0);
            printf("\n");
        }
        fflush(stdout);
        free(ttft);
        free(cl);
        free(th);
    }
    if (json) {
        rw_json_writer jw;
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
        rw_json_key(&jw, "model"), rw_json_cstring(&jw, path);
        rw_json_key(&jw, "prompt"), rw_json_int(&jw, n_prompt);
        rw_json_key(&jw, "gen"), rw_json_int(&jw, n_gen);
        rw_json_key(&jw, "parallel"), rw_json_int(&jw, parallel);
        rw_json_key(&jw, "kernels"), rw_json_cstring(&jw, tier);
        rw_json_key(&jw, "numerics"), rw_json_cstring(&jw, numerics);
        rw_json_key(&jw, "draft");
        if (dm) rw_json_cstring(&jw, draft_path);
        else rw_json_null(&jw);
        rw_json_key(&jw, "levels");
        rw_json_begin_array(&jw);
        for (int li = 0; li < n_levels; li++) {
            const level_result *r = &res[li];
            rw_json_begin_object(&jw);
            rw_json_key(&jw, "clients"), rw_json_int(&jw, r->clients);
            rw_json_key(&jw, "requests"), rw_json_int(&jw, r->requests);
            rw_json_key(&jw, "errors"), rw_json_int(&jw, r->errors);
            rw_json_key(&jw, "generated_tokens"), rw_json_int(&jw, r->tokens);
            rw_json_key(&jw, "wall_s"), rw_json_double(&jw, r->wall, 6);
            rw_json_key(&jw, "gen_tok_s"), rw_json_double(&jw, r->tok_s, 6);
            rw_json_key(&jw, "ttft_p50_s"), rw_json_double(&jw, r->ttft_p50, 6);
            rw_json_key(&jw, "ttft_p99_s"), rw_json_double(&jw, r->ttft_p99, 6);
            rw_json_key(&jw, "mean_batch_seqs"), rw_json_double(&jw, r->mean_batch, 4);
            if (dm) {
                rw_json_key(&jw, "spec_verify_passes"), rw_json_int(&jw, r->verify);
                rw_json_key(&jw, "spec_drafted"), rw_json_int(&jw, r->drafted);
                rw_json_key(&jw, "spec_accepted"), rw_json_int(&jw, r->accepted);
                rw_json_key(&jw, "spec_acceptance"),
                    rw_json_double(&jw, r->drafted ? (double)r->accepted / (double)r->drafted : 0.0, 6);
                rw_json_key(&jw, "spec_tokens_per_verify_pass"),
                    rw_json_double(&jw, r->verify ? (double)r->emitted / (double)r->verify : 0.0, 6);
            }
            rw_json_end_object(&jw);
        }
        rw_json_end_array(&jw);
        rw_json_end_object(&jw);
        printf("\n");
    } else if (n_levels > 1 && res[0].tok_s > 0)
        printf("speedup %d vs %d clients: %.2fx generated tok/s\n", levels[n_levels - 1], levels[0],
               res[n_levels - 1].tok_s / res[0].tok_s);
    rc = 0;
    for (int li = 0; li < n_levels; li++)
        if (res[li].errors) rc = 1;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_server_stop(s);
    rw_engine_free(e);
    rw_cli_served_close(&sv);
    return rc;
}
