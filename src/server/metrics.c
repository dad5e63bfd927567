/* metrics.c - GET /metrics in Prometheus' text format (version 0.0.4):
 * the server's request counts by status, the engine's token counters,
 * latency and batch histograms, the prefix cache's series by tier, kind
 * and reason, and with a draft model the speculative decoding counters.
 *
 * With several models the engine series are the sum over the models (the
 * process's totals): the loaded engines' now, plus the counters of those
 * unloaded (kept as each is unloaded, so counters never go back); each
 * model's own state is in the rewind_model_* series, labelled by model. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server_int.h"

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *p = realloc(b->buf, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->buf = p;
        b->cap = cap;
    }
}

static void counter(sbuf *b, const char *name, const char *help, uint64_t v) {
    put(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, (unsigned long long)v);
}

static void gauge(sbuf *b, const char *name, const char *help, double v) {
    put(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

static void histogram(sbuf *b, const char *name, const char *help, const rw_histogram *h) {
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        put(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    put(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, (unsigned long long)cum, name, h->sum,
        name, (unsigned long long)h->count);
}

static void hist_add(rw_histogram *a, const rw_histogram *x) {
    if (!a->n_bounds) { /* every engine has the same buckets */
        a->n_bounds = x->n_bounds;
        memcpy(a->bounds, x->bounds, sizeof a->bounds);
    }
    for (int i = 0; i <= RW_HIST_MAX; i++) a->counts[i] += x->counts[i];
    a->sum += x->sum;
    a->count += x->count;
}

/* What a loaded model holds, as --models-max-bytes counts it (models.c
 * measures with it; the metrics show it). */
size_t rw_server__model_bytes(const rw_server__model *m, const rw_engine_stats *st) {
    return m->weight_bytes + (size_t)st->cache.bytes_kv_and_state + (size_t)st->cache.bytes_logits + st->kv_bytes;
}

/* Adds x's counters to a, and with levels its levels too (an unloaded
 * engine's are gone). Each field of rw_engine_stats and rw_pcache_stats is
 * one or the other: a field added there must be added here. */
static void stats_add(rw_engine_stats *a, const rw_engine_stats *x, bool levels) {
    a->requests_finished += x->requests_finished;
    a->requests_cancelled += x->requests_cancelled;
    a->prompt_tokens += x->prompt_tokens;
    a->cached_tokens += x->cached_tokens;
    a->prefill_tokens += x->prefill_tokens;
    a->generated_tokens += x->generated_tokens;
    a->steps += x->steps;
    a->step_tokens += x->step_tokens;
    a->held_for_memory += x->held_for_memory;
    a->idle_trims += x->idle_trims;
    a->trimmed_bytes += x->trimmed_bytes;
    hist_add(&a->ttft, &x->ttft);
    hist_add(&a->itl, &x->itl);
    hist_add(&a->batch_size, &x->batch_size);
    a->spec_ngram_drafted += x->spec_ngram_drafted;
    a->spec_ngram_accepted += x->spec_ngram_accepted;
    for (int i = 0; i < RW_PC_REASON_MAX; i++) a->recompute_reasons[i] += x->recompute_reasons[i];
    a->spec_enabled |= x->spec_enabled;
    a->spec_verify += x->spec_verify;
    a->spec_drafted += x->spec_drafted;
    a->spec_accepted += x->spec_accepted;
    a->spec_emitted += x->spec_emitted;
    a->spec_draft_cached += x->spec_draft_cached;
    rw_pcache_stats *c = &a->cache;
    const rw_pcache_stats *y = &x->cache;
    c->lookups += y->lookups;
    c->hits_memory += y->hits_memory;
    c->hits_disk += y->hits_disk;
    c->tokens_memory += y->tokens_memory;
    c->tokens_disk += y->tokens_disk;
    c->tokens_recomputed += y->tokens_recomputed;
    c->evictions += y->evictions;
    c->disk_writes += y->disk_writes;
    c->disk_invalid += y->disk_invalid;
    c->disk_write_errors += y->disk_write_errors;
    c->disk_read_errors += y->disk_read_errors;
    c->disk_skipped += y->disk_skipped;
    c->disk_evictions += y->disk_evictions;
    if (!levels) return;
    a->running += x->running;
    a->queued += x->queued;
    a->kv_bytes += x->kv_bytes;
    a->pool = x->pool; /* the process's one pool */
    a->cache_enabled |= x->cache_enabled;
    c->disk_pending += y->disk_pending;
    c->entries += y->entries;
    c->disk_entries += y->disk_entries;
    c->bytes_kv_and_state += y->bytes_kv_and_state;
    c->bytes_kv += y->bytes_kv;
    c->bytes_recurrent += y->bytes_recurrent;
    c->bytes_unshared += y->bytes_unshared;
    c->bytes_logits += y->bytes_logits;
    c->bytes_disk += y->bytes_disk;
}

void rw_server__stats_retire(rw_server *s, const rw_engine_stats *st) { stats_add(&s->retired, st, false); }

/* A label value as the text format wants it (quotes, backslashes, line ends escaped). */
static void put_label(sbuf *b, const char *v) {
    for (const char *p = v; *p; p++) {
        if (*p == '\n') put(b, "\\n");
        else put(b, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    }
}

/* Each model's state: one labelled series per model and metric. */
typedef struct {
    const char *id;
    bool loaded;
    int users;
    size_t bytes;
    uint64_t loads, unloads, waits;
} model_row;

static void model_series(sbuf *b, const char *name, const char *type, const char *help, const model_row *rows, int n,
                         int which) {
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int i = 0; i < n; i++) {
        const model_row *r = &rows[i];
        const unsigned long long v = which == 0   ? (unsigned long long)r->loaded
                                     : which == 1 ? (unsigned long long)r->bytes
                                     : which == 2 ? (unsigned long long)r->users
                                     : which == 3 ? r->loads
                                     : which == 4 ? r->unloads
                                                  : r->waits;
        put(b, "%s{model=\"", name);
        put_label(b, r->id);
        put(b, "\"} %llu\n", v);
    }
}

static size_t resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    long page = sysconf(_SC_PAGESIZE);
    return (size_t)rss * (size_t)(page > 0 ? page : 4096);
}

char *rw_server__metrics_text(rw_server *s) {
    /* the engines' sum, the budgets' sum and each model's row, at one moment */
    model_row rows[64];
    unsigned long long budget_cache = 0, budget_state = 0, budget_disk = 0;
    pthread_mutex_lock(&s->models_mu);
    rw_engine_stats st = s->retired;
    const int n_models = s->n_models < 64 ? s->n_models : 64;
    for (int i = 0; i < n_models; i++) {
        const rw_server__model *m = &s->models[i];
        rows[i] = (model_row){.id = m->id,
                              .loaded = m->loaded,
                              .users = m->users,
                              .loads = m->loads,
                              .unloads = m->unloads,
                              .waits = m->waits};
        if (!m->loaded) continue;
        rw_engine_stats x;
        rw_engine_stats_full(m->engine, &x, sizeof x, NULL);
        stats_add(&st, &x, true);
        rows[i].bytes = rw_server__model_bytes(m, &x);
        budget_cache += (size_t)rw_engine_setting_get(m->engine, RW_ENGINE_CACHE_BYTES);
        budget_state += (size_t)rw_engine_setting_get(m->engine, RW_ENGINE_MAX_STATE_BYTES);
        budget_disk += (size_t)rw_engine_setting_get(m->engine, RW_ENGINE_CACHE_DIR_BYTES);
    }
    pthread_mutex_unlock(&s->models_mu); /* the ids live as long as the server */
    uint64_t by_status[600];
    pthread_mutex_lock(&s->mu);
    memcpy(by_status, s->by_status, sizeof by_status);
    pthread_mutex_unlock(&s->mu);
    sbuf b = {.cap = 8192};
    if (!(b.buf = malloc(b.cap))) return NULL;
    b.buf[0] = 0;
    /* the replica's name as a label (quotes and backslashes escaped as the text format wants) */
    put(&b, "# HELP rewind_replica_info This server's replica name (--replica-id), also its X-Rewind-Replica "
            "header.\n# TYPE rewind_replica_info gauge\nrewind_replica_info{replica=\"");
    put_label(&b, s->replica_id);
    put(&b, "\"} 1\n");
    model_series(&b, "rewind_model_loaded", "gauge", "Whether each served model is loaded (1) or not (0).", rows,
                 n_models, 0);
    model_series(&b, "rewind_model_bytes", "gauge",
                 "What each loaded model holds, as --models-max-bytes counts it: weights, prefix cache and running "
                 "state.",
                 rows, n_models, 1);
    model_series(&b, "rewind_model_requests_active", "gauge",
                 "Requests holding each model (being prepared or generating): a model is never unloaded under them.",
                 rows, n_models, 2);
    model_series(&b, "rewind_model_loads_total", "counter", "Times each model was loaded.", rows, n_models, 3);
    model_series(&b, "rewind_model_unloads_total", "counter",
                 "Times each model was unloaded to make room for another (--models-max-bytes).", rows, n_models, 4);
    model_series(&b, "rewind_model_waits_total", "counter",
                 "Requests that waited for their model to be loaded (or for room to load it).", rows, n_models, 5);
    gauge(&b, "rewind_models_max_bytes", "The loaded models' memory budget (--models-max-bytes; 0 = none).",
          (double)s->models_max_bytes);
    put(&b, "# HELP rewind_requests_total HTTP requests answered, by status code.\n"
            "# TYPE rewind_requests_total counter\n");
    for (int code = 0; code < 600; code++)
        if (by_status[code]) put(&b, "rewind_requests_total{status=\"%d\"} %llu\n", code, (unsigned long long)by_status[code]);
    put(&b, "# HELP rewind_model_file_faults_total Reads of a model file that was truncated on disk while mapped "
            "(its model then answers 503).\n# TYPE rewind_model_file_faults_total counter\n"
            "rewind_model_file_faults_total %llu\n",
            (unsigned long long)rw_mapped_file_fault_count());
    pthread_mutex_lock(&s->conn_mu);
    const int n_socks = s->n_socks;
    pthread_mutex_unlock(&s->conn_mu);
    pthread_mutex_lock(&s->mu);
    const uint64_t timeouts = s->timeouts, hangups = s->hangups;
    pthread_mutex_unlock(&s->mu);
    gauge(&b, "rewind_http_connections", "Client connections open.", (double)n_socks);
    counter(&b, "rewind_http_timeouts_total",
            "Connections shut down for not sending their headers or body in time (header/body timeout).", timeouts);
    counter(&b, "rewind_http_hangups_total", "Clients that hung up while their request was waiting or running.",
            hangups);
    counter(&b, "rewind_requests_finished_total", "Generation requests that ran to the end.", st.requests_finished);
    counter(&b, "rewind_requests_cancelled_total", "Generation requests cancelled (client gone).",
            st.requests_cancelled);
    counter(&b, "rewind_prompt_tokens_total", "Prompt tokens of admitted requests.", st.prompt_tokens);
    counter(&b, "rewind_generated_tokens_total", "Tokens generated.", st.generated_tokens);
    put(&b, "# HELP rewind_prompt_tokens_cached_total Prompt tokens served from the prefix cache, by tier.\n"
            "# TYPE rewind_prompt_tokens_cached_total counter\n"
            "rewind_prompt_tokens_cached_total{tier=\"memory\"} %llu\n"
            "rewind_prompt_tokens_cached_total{tier=\"disk\"} %llu\n",
        (unsigned long long)st.cache.tokens_memory, (unsigned long long)st.cache.tokens_disk);
    put(&b, "# HELP rewind_prefix_cache_requests_total Requests by what the prefix cache did for them (hit, or why "
            "more than the new tail was recomputed).\n# TYPE rewind_prefix_cache_requests_total counter\n");
    for (int i = 0; i <= RW_PC_DIFFERENT_MODEL; i++)
        put(&b, "rewind_prefix_cache_requests_total{result=\"%s\"} %llu\n", rw_pcache_reason_name((rw_pcache_reason)i),
            (unsigned long long)st.recompute_reasons[i]);
    counter(&b, "rewind_prefix_cache_evictions_total", "Entries evicted from the memory tier.", st.cache.evictions);
    counter(&b, "rewind_prefix_cache_disk_invalid_total", "Disk-tier files that failed validation (removed).",
            st.cache.disk_invalid);
    put(&b, "# HELP rewind_prefix_cache_disk_errors_total Disk-tier trouble, by kind (write: a file could not be "
            "written, e.g. a full disk or a read-only folder; read: could not be read; skipped: files left alone, of "
            "another model or configuration or not regular files). The server goes on without the file.\n"
            "# TYPE rewind_prefix_cache_disk_errors_total counter\n"
            "rewind_prefix_cache_disk_errors_total{kind=\"write\"} %llu\n"
            "rewind_prefix_cache_disk_errors_total{kind=\"read\"} %llu\n"
            "rewind_prefix_cache_disk_errors_total{kind=\"skipped\"} %llu\n",
        (unsigned long long)st.cache.disk_write_errors, (unsigned long long)st.cache.disk_read_errors,
        (unsigned long long)st.cache.disk_skipped);
    counter(&b, "rewind_prefix_cache_disk_writes_total", "Entries written to the disk tier.", st.cache.disk_writes);
    counter(&b, "rewind_prefix_cache_disk_evictions_total", "Disk-tier files removed for its byte budget.",
            st.cache.disk_evictions);
    gauge(&b, "rewind_prefix_cache_disk_pending", "Disk-tier writes queued or under way.",
          (double)st.cache.disk_pending);
    gauge(&b, "rewind_prefix_cache_entries", "Entries in the memory tier.", (double)st.cache.entries);
    gauge(&b, "rewind_prefix_cache_disk_entries", "Entries in the disk tier.", (double)st.cache.disk_entries);
    counter(&b, "rewind_prompt_tokens_recomputed_total", "Prompt tokens computed by forward passes.",
            st.prefill_tokens);
    put(&b, "# HELP rewind_cache_bytes Bytes held by the prefix cache, by kind (recurrent: states, checkpoints and "
            "logs; logits: the last logits kept per entry; disk: the disk tier's files).\n"
            "# TYPE rewind_cache_bytes gauge\nrewind_cache_bytes{kind=\"kv\"} %llu\n"
            "rewind_cache_bytes{kind=\"recurrent\"} %llu\nrewind_cache_bytes{kind=\"logits\"} %llu\n"
            "rewind_cache_bytes{kind=\"disk\"} %llu\n",
        (unsigned long long)st.cache.bytes_kv, (unsigned long long)st.cache.bytes_recurrent,
        (unsigned long long)st.cache.bytes_logits, (unsigned long long)st.cache.bytes_disk);
    gauge(&b, "rewind_active_state_bytes",
          "State storage (KV cache and recurrent state) of the running sequences (and their draft sequences).",
          (double)st.kv_bytes);
    put(&b,
        "# HELP rewind_budget_bytes The process's memory budgets by kind (cache: the prefix cache's memory "
        "tier; state: running sequences' state, an admission threshold; 0 = unbounded; disk: the disk tier). "
        "Resident memory stays within weights (mapped) + cache + state + a fixed overhead.\n"
        "# TYPE rewind_budget_bytes gauge\nrewind_budget_bytes{kind=\"cache\"} %llu\n"
        "rewind_budget_bytes{kind=\"state\"} %llu\nrewind_budget_bytes{kind=\"disk\"} %llu\n",
        budget_cache, budget_state, budget_disk);
    gauge(&b, "rewind_process_resident_bytes", "Resident memory of the process (RSS).", (double)resident_bytes());
    const rw_state_pool_stats ps = st.pool;
    put(&b, "# HELP rewind_state_pool_bytes The recurrent-state pool by part (mapped: slabs and big buffers; free: "
            "buffers waiting for reuse, resident unless trimmed; trimmed: of those, given back to the system while "
            "idle; ready: slabs faulted in ahead of need, with --prefault; unused: the newest slab's untouched rest).\n"
            "# TYPE rewind_state_pool_bytes gauge\nrewind_state_pool_bytes{part=\"mapped\"} %llu\n"
            "rewind_state_pool_bytes{part=\"free\"} %llu\nrewind_state_pool_bytes{part=\"trimmed\"} %llu\n"
            "rewind_state_pool_bytes{part=\"ready\"} %llu\nrewind_state_pool_bytes{part=\"unused\"} %llu\n",
        (unsigned long long)ps.mapped_bytes, (unsigned long long)ps.free_bytes, (unsigned long long)ps.trimmed_bytes,
        (unsigned long long)ps.ready_bytes, (unsigned long long)ps.unused_bytes);
    counter(&b, "rewind_idle_trims_total", "Times the idle engine gave memory back to the system.", st.idle_trims);
    counter(&b, "rewind_admissions_held_for_memory_total",
            "Scheduler steps that left requests queued because the running state reached the state budget.",
            st.held_for_memory);
    gauge(&b, "rewind_requests_running", "Sequences in the batch.", st.running);
    gauge(&b, "rewind_queue_depth", "Requests waiting for a batch slot.", st.queued);
    counter(&b, "rewind_forward_passes_total", "Batched forward passes.", st.steps);
    counter(&b, "rewind_forward_tokens_total", "Tokens over all forward passes.", st.step_tokens);
    if (st.spec_enabled) {
        counter(&b, "rewind_spec_verify_passes_total",
                "Speculative decoding: verify steps, one per sequence per step (drafting or not).", st.spec_verify);
        counter(&b, "rewind_spec_drafted_tokens_total", "Speculative decoding: tokens the draft proposed.",
                st.spec_drafted);
        counter(&b, "rewind_spec_accepted_tokens_total", "Speculative decoding: drafted tokens the model accepted.",
                st.spec_accepted);
        counter(&b, "rewind_spec_emitted_tokens_total", "Speculative decoding: tokens output by verify steps.",
                st.spec_emitted);
        counter(&b, "rewind_spec_draft_cached_tokens_total",
                "Speculative decoding: draft-model state tokens restored from the prefix cache.",
                st.spec_draft_cached);
        gauge(&b, "rewind_spec_acceptance_rate", "accepted / drafted tokens so far (0 before any draft).",
              st.spec_drafted ? (double)st.spec_accepted / (double)st.spec_drafted : 0.0);
        gauge(&b, "rewind_spec_tokens_per_verify_pass", "emitted tokens / verify steps so far (0 before any).",
              st.spec_verify ? (double)st.spec_emitted / (double)st.spec_verify : 0.0);
    }
    histogram(&b, "rewind_time_to_first_token_seconds", "From submission to the first generated token.", &st.ttft);
    histogram(&b, "rewind_inter_token_latency_seconds", "Between two generated tokens of a request.", &st.itl);
    histogram(&b, "rewind_batch_size", "Sequences per forward pass.", &st.batch_size);
    if (b.oom) {
        free(b.buf);
        return NULL;
    }
    return b.buf;
}
