/* cmd_serve.c - `rewind serve MODEL [--host 127.0.0.1] [--port 8080]
 * [--parallel N] [--ctx N] [--threads N] [--api-key KEY] [--kv f32|f16]
 * [--max-queue N] [--max-body BYTES] [--max-connections N] [--prefill-chunk N]
 * [--cache-bytes B] [--cache-dir DIR] [--cache-dir-bytes B]
 * [--draft DRAFT.gguf [--draft-max K] [--draft-fixed]] [--api-key-file FILE]
 * [--cors-origin ORIGINS] [--header-timeout S] [--body-timeout S]
 * [--max-connections-per-ip N] [--max-state-bytes B] [--checkpoints N] [--prefault]
 * [--cache-dir-write evict|through] [--cache-dir-delay S] [--shutdown-timeout S]
 * [--replica-id NAME] [--alias NAME] [--model [ALIAS=]FILE]... [--models-max-bytes B]`: the
 * OpenAI-compatible server (src/server) over the batching engine
 * (src/engine). Runs until SIGINT or SIGTERM.
 *
 * Several models: MODEL (named by --alias, else its file's name) and each
 * --model [ALIAS=]FILE; the first is the default, loaded at start, the
 * others on first use, each with its own engine and prefix cache (and with
 * --cache-dir its own folder in it, named by its id). --models-max-bytes
 * bounds what the loaded ones hold together (weights, prefix cache, running
 * state): the least recently used idle models are unloaded to load another.
 * --draft, --spec and --chat-template-file apply to the default model; the
 * other options to each.
 *
 * The prefix cache (pcache/pcache.h) is on by default with a quarter
 * of the machine's RAM (--cache-bytes 0 turns it off); --cache-dir adds the
 * disk tier (default budget 16 GiB; docs/persistence.md): entries reach
 * the folder about a second after their request ends (--cache-dir-delay,
 * default 1 s) unless --cache-dir-write evict (only when evicted from
 * memory, and at shutdown). --max-state-bytes bounds the running
 * sequences' state by admission (engine.h; 0 = none). Its default is what
 * --parallel sequences of --ctx positions hold at most (and their drafts',
 * rw_model_seq_bytes_at), so that the process's memory is bounded by the
 * weights, --cache-bytes and what --parallel and --ctx say.
 * --grammar-mask-budget / --grammar-request-budget N: a grammar's work per
 * token mask and per request, in grammar.h's work units (0 = the defaults,
 * -1 = none; docs/server-security.md). --checkpoints N: a hybrid model's recurrent-state checkpoints
 * per sequence (engine.h max_checkpoints; default 0 = the library's
 * retention, up to 256 MiB a sequence; 4 holds about what llama-server
 * does, at the cost of recomputing prompts that diverge away from a
 * message boundary). --prefault keeps 64 MiB of state memory faulted in ahead of
 * need (engine.h prefault_states). Sizes take K, M, G suffixes.
 *
 * Signals: SIGINT and SIGTERM are taken by a thread of their own from the
 * first instruction on (blocked everywhere else), so they work during
 * startup too (the process then exits at once: nothing to save yet). Once
 * serving, the first one stops the server (no new connections; running
 * requests are cancelled and their sequences go into the prefix cache),
 * the disk tier writes what is pending, and the process exits; if that
 * takes longer than --shutdown-timeout (default 15 s) or a second signal
 * comes, it exits at once (the folder stays valid: every file is written
 * atomically).
 *
 * --draft: speculative decoding in every request (engine.h, engine/spec.h):
 * DRAFT (same vocabulary, checked at start) proposes up to K tokens per
 * sequence and step (default 4), verified in the step's one batched pass;
 * how many adapts to the measured acceptance unless --draft-fixed. --spec
 * mtp drafts with the model's own MTP block, --spec ngram by prompt lookup
 * (docs/speculative-decoding.md).
 *
 * The API key: --api-key-file FILE (its first line), else --api-key KEY
 * (visible in ps), else the environment variable REWIND_API_KEY. The limits
 * and the browser policy are in docs/server-security.md.
 *
 * --replica-id: this server's name behind a load balancer (docs/scale-out.md),
 * sent as the X-Rewind-Replica header of every response and in /metrics;
 * default HOSTNAME:PORT.
 *
 * Chat (docs/agent-api.md): --chat-template-file FILE replaces the model's
 * template; --tool-format auto|none|generic|qwen-xml|hermes|llama3|granite|harmony|deepseek|nemotron|lfm2|mistral
 * (auto: from the template); --reasoning-format deepseek|none;
 * --chat-template-kwargs JSON (defaults for every request's template
 * variables); --reasoning-budget N (thinking tokens; 0: no thinking);
 * --strict-api (unknown request fields are a 400 instead of ignored). */

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "server/server.h"

static const char *CMD = "serve";

/* ---- signals ---- */

static sigset_t stop_sigs;
/* the main thread waits for `stopping` (set once, by the signal thread) */
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;
static bool stopping;
static atomic_int phase; /* 0 starting, 1 serving, 2 stopping */
static double stop_limit = 15;

/* Waits up to `limit` seconds for another stop signal: its number, or -1
 * (errno EAGAIN) when none came. Where there is no sigtimedwait (macOS),
 * the pending signals are looked at every 50 ms. */
static int second_signal(double limit) {
#if defined(__linux__)
    struct timespec ts = {.tv_sec = (time_t)limit, .tv_nsec = (long)((limit - (double)(time_t)limit) * 1e9)};
    return sigtimedwait(&stop_sigs, NULL, &ts);
#else
    for (double waited = 0; waited < limit; waited += 0.05) {
        sigset_t pending;
        int sig = 0;
        if (!sigpending(&pending) && (sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM)) &&
            !sigwait(&stop_sigs, &sig))
            return sig;
        nanosleep(&(struct timespec){.tv_nsec = 50000000L}, NULL);
    }
    errno = EAGAIN;
    return -1;
#endif
}

static void *signal_main(void *arg) {
    (void)arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&stop_sigs, &sig)) continue;
        int expect = 0;
        if (atomic_compare_exchange_strong(&phase, &expect, 2)) {
            fprintf(stderr, "rewind serve: stopping during startup (signal %d)\n", sig);
            _exit(0);
        }
        if (expect != 1 || !atomic_compare_exchange_strong(&phase, &expect, 2)) continue;
        fprintf(stderr, "rewind serve: stopping (signal %d)\n", sig);
        pthread_mutex_lock(&stop_mu);
        stopping = true;
        pthread_cond_signal(&stop_cv);
        pthread_mutex_unlock(&stop_mu);
        for (;;) {
            int r = second_signal(stop_limit);
            if (r < 0 && errno == EINTR) continue;
            fprintf(stderr, r < 0 ? "rewind serve: not stopped after %.0f s: exiting now\n"
                                  : "rewind serve: second signal: exiting now\n",
                    stop_limit);
            _exit(1);
        }
    }
    return NULL;
}

/* The first line of path (the API key), without its line end. */
static char *read_key_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        rw_cli_error(CMD, "cannot read the API key file %s: %m", path);
        return NULL;
    }
    char line[4096];
    char *key = fgets(line, sizeof line, f) ? line : NULL;
    fclose(f);
    size_t n = key ? strcspn(key, "\r\n") : 0;
    if (!n) {
        rw_cli_error(CMD, "the API key file %s is empty", path);
        return NULL;
    }
    key[n] = 0;
    return strdup(key);
}

/* --cache-dir-delay and --shutdown-timeout: seconds in [0, 3600] into the
 * double at ctx. */
static int opt_seconds(void *ctx, const char *cmd, const char *name, const char *v) {
    char *end;
    const double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0 && x <= 3600)) {
        rw_cli_error(cmd, "%s takes seconds in [0, 3600], not \"%s\"", name, v);
        return 2;
    }
    *(double *)ctx = x;
    return 0;
}

/* ---- the models ---- */

/* What every model's engine shares (the command line), read by load_model. */
typedef struct {
    rw_engine_params ep;       /* all but the per-model fields (cache_dir, max_state_bytes, draft, spec) */
    size_t max_state;          /* SIZE_MAX: from --parallel and --ctx, per model */
    const char *draft_path;    /* the default model's draft */
    const char *template_src;  /* the default model's template (--chat-template-file's text), or NULL */
    unsigned spec;             /* the default model's --spec (RW_SPECULATE_*) */
    const rw_cli_lora *lora;   /* the default model's --lora / --lora-scaled */
} serve_shared;

/* One --model (or the MODEL argument): the loader's user data. */
typedef struct {
    const char *path;
    const char *id, *file_id; /* its name (the alias, else the file's name) and the file's name */
    char *cache_dir;          /* its disk tier (owned): --cache-dir, or a folder of its own in it */
    bool first;               /* the default model: --draft, --spec, --lora and --chat-template-file apply to it */
    const serve_shared *sh;
} serve_model;

/* What load_model made (the handle the server hands back to unload_model). */
typedef struct {
    rw_model *m, *dm; /* the model and its draft (or NULL) */
    rw_engine *e;
} serve_loaded;

/* The template file's text (owned), checked to parse: it replaces the
 * default model's template (the file's BOS/EOS texts stay). */
static rw_status read_template(const char *path, char **out, rw_error *err) {
    size_t n = 0;
    char *src = rw_cli_read_file(path, &n);
    rw_chat_template *t = NULL;
    rw_error terr = {0};
    if (!src || rw_chat_template_parse(src, n, &t, &terr)) {
        free(src);
        return rw_errorf(err, RW_ERR_INVALID_ARG, "%s: %s", path, src ? terr.msg : "cannot read the file");
    }
    rw_chat_template_free(t);
    *out = src;
    return RW_OK;
}

static void loaded_free(serve_loaded *L) {
    rw_engine_close(L->e); /* first: its prefix cache writes what is pending */
    rw_model_close(L->dm);
    rw_model_close(L->m);
    free(L);
}

static size_t file_bytes(const char *path) {
    struct stat st;
    return path && !stat(path, &st) ? (size_t)st.st_size : 0;
}

/* The default model's adapter files' bytes (held with its weights). */
static size_t lora_bytes(const serve_model *sm) {
    size_t n = 0;
    for (int i = 0; sm->first && sm->sh->lora && i < sm->sh->lora->n; i++) n += file_bytes(sm->sh->lora->a[i].path);
    return n;
}

/* rw_server_model_source.load: the file (with its tokenizer and template)
 * and an engine over it. */
static rw_status load_model(void *user, rw_server_model *out, rw_error *err) {
    const serve_model *sm = user;
    const serve_shared *sh = sm->sh;
    serve_loaded *L = calloc(1, sizeof *L); /* freed by unload_model */
    if (!L) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    rw_model_params mp = rw_model_params_default();
    if (sm->first) mp.chat_template = sh->template_src;
    if (sm->first) rw_cli_lora_params(sh->lora, &mp);
    const char *draft_path = sm->first ? sh->draft_path : NULL;
    rw_status st = rw_model_open(sm->path, &mp, &L->m, err);
    if (!st && draft_path) st = rw_model_open(draft_path, NULL, &L->dm, err);
    if (!st && !rw_model_chat_template(L->m)) { /* the file's template does not parse: its error */
        rw_chat_template *t = NULL;
        char *bos = NULL, *eos = NULL;
        st = rw_chat_template_load(sm->path, &t, &bos, &eos, err);
        rw_chat_template_free(t);
        rw_free(bos);
        rw_free(eos);
        if (!st) st = rw_errorf(err, RW_ERR_TEMPLATE, "%s: the chat template does not parse", sm->path);
    }
    rw_engine_params ep = sh->ep;
    size_t max_state = sh->max_state;
    if (!st && max_state == SIZE_MAX) {
        const bool f32 = ep.run.kv_f32;
        size_t per = rw_model_state_bytes(L->m, ep.run.n_ctx, f32, ep.max_checkpoints);
        if (L->dm) per += rw_model_state_bytes(L->dm, ep.run.n_ctx, f32, ep.max_checkpoints);
        max_state =
            per ? per * (size_t)ep.max_running : ep.cache_bytes; /* the cache's size if it cannot be estimated */
    }
    ep.max_state_bytes = max_state;
    ep.cache_dir = sm->cache_dir;
    ep.draft = L->dm;
    ep.spec = sm->first ? sh->spec : 0;
    if (!st) st = rw_engine_open(L->m, &ep, &L->e, err);
    if (st) {
        loaded_free(L);
        return st;
    }
    *out = (rw_server_model){.engine = L->e,
                             .tok = rw_model_tokenizer(L->m),
                             .tmpl = rw_model_chat_template(L->m),
                             .bos = rw_model_text_get(L->m, RW_MODEL_TEXT_BOS),
                             .eos = rw_model_text_get(L->m, RW_MODEL_TEXT_EOS),
                             .rerank_template = rw_model_text_get(L->m, RW_MODEL_TEXT_RERANK_PROMPT),
                             .weight_bytes = file_bytes(sm->path) + file_bytes(draft_path) + lora_bytes(sm),
                             .handle = L,
                             .model = L->m};
    return RW_OK;
}

/* rw_server_model_source.unload: the engine first (its prefix cache writes what is pending), then the model. */
static void unload_model(void *user, rw_server_model *m) {
    (void)user;
    loaded_free(m->handle);
}

/* --model [ALIAS=]FILE, repeated: the list at ctx. */
#define MAX_MODELS 64
typedef struct {
    const char *arg[MAX_MODELS];
    int n;
} model_args;

static int opt_model(void *ctx, const char *cmd, const char *name, const char *v) {
    model_args *a = ctx;
    if (a->n == MAX_MODELS) {
        rw_cli_error(cmd, "at most %d models (%s)", MAX_MODELS, name);
        return 2;
    }
    a->arg[a->n++] = v;
    return 0;
}

/* Splits "[ALIAS=]FILE": an existing file is a file whatever its name;
 * else a prefix up to '=' without '/' is the alias. */
static void split_model_arg(const char *arg, char *alias, size_t cap, const char **path) {
    const char *eq = strchr(arg, '=');
    alias[0] = 0;
    *path = arg;
    if (!eq || eq == arg || access(arg, F_OK) == 0 || memchr(arg, '/', (size_t)(eq - arg))) return;
    snprintf(alias, cap, "%.*s", (int)(eq - arg), arg);
    *path = eq + 1;
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* A model's own disk-tier folder inside --cache-dir: its id, with every
 * character but letters, digits, '.', '-' and '_' as '_' (owned). */
static char *model_cache_dir(const char *dir, const char *id) {
    size_t n = strlen(dir) + strlen(id) + 2;
    char *p = malloc(n);
    if (!p) return NULL;
    int at = snprintf(p, n, "%s/", dir);
    for (const char *c = id; *c; c++)
        p[at++] = (isalnum((unsigned char)*c) || *c == '.' || *c == '-' || *c == '_') ? *c : '_';
    p[at] = 0;
    if (!strcmp(p + strlen(dir) + 1, ".") || !strcmp(p + strlen(dir) + 1, "..")) p[strlen(dir) + 1] = '_';
    return p;
}

static int usage(void) {
    fprintf(stderr,
            "usage: rewind serve MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx N] [--threads N] "
            "[--kernels TIER] "
            "[--api-key KEY] [--kv f32|f16] [--numerics auto|fast|ggml] [--max-queue N] [--max-body BYTES] "
            "[--max-connections N] "
            "[--prefill-chunk N] [--cache-bytes B] [--cache-dir DIR] [--cache-dir-bytes B] "
            "[--draft DRAFT.gguf] [--spec mtp|ngram|mtp,ngram] [--spec-ngram-n N] [--spec-ngram-min-hits N] "
            "[--draft-max K] [--draft-fixed] [--api-key-file FILE] "
            "[--cors-origin ORIGINS] [--header-timeout S] [--body-timeout S] [--max-connections-per-ip N] "
            "[--max-state-bytes B] [--grammar-mask-budget N] [--grammar-request-budget N] [--checkpoints N] "
            "[--prefault] [--cache-dir-write evict|through] [--cache-dir-delay "
            "S] [--shutdown-timeout S] [--replica-id NAME] [--alias NAME]\n"
            "  [--model [ALIAS=]FILE]... [--models-max-bytes B]\n"
            "  [--chat-template-file FILE] [--tool-format "
            "auto|none|generic|qwen-xml|hermes|llama3|granite|harmony|deepseek|nemotron|lfm2|mistral] "
            "[--reasoning-format deepseek|none] [--chat-template-kwargs JSON] [--reasoning-budget N] [--strict-api]\n"
            "  [--pooling none|mean|cls|last] [--slot-save-path DIR] [--no-slots]\n"
            "  MODEL may be left out when --model names the models (the first is the default)\n"
            "  the API key may also come from the environment variable REWIND_API_KEY\n");
    return 2;
}

/* A model's bytes before it is loaded: its file's size, or a split model's
 * parts' (the first part opens them all; only mapped, not read). 0 when it
 * cannot be opened (its load will say why). */
static size_t model_bytes(const char *path) {
    rw_model_file *f = NULL;
    rw_error err = {0};
    if (rw_model_file_open(path, &f, &err)) return 0;
    const size_t n = (size_t)rw_model_file_size(f);
    rw_model_file_close(f);
    return n;
}

static int run_serve(int argc, char **argv, rw_cli_lora *lora) {
    /* SIGINT/SIGTERM go to signal_main only: blocked before any other thread starts */
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* a model file truncated while served: its requests fail (503), the
     * server lives on */
    rw_error gerr = {0};
    if (rw_install_fault_guard(&gerr)) rw_cli_error(CMD, "%s", gerr.msg);
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_main, NULL)) {
        rw_cli_error(CMD, "cannot start the signal thread");
        return 1;
    }
    pthread_detach(sig_thread);
    const char *model_path = NULL, *host = "127.0.0.1", *api_key = NULL;
    long port = 8080, parallel = 16, ctx = 4096, threads = 0, max_queue = 64, max_body = 8 << 20, chunk = 256, max_conn = 1024;
    const char *cache_dir = NULL, *draft_path = NULL, *key_file = NULL, *cors = NULL, *replica_id = NULL;
    long draft_max = 4, header_timeout = 10, body_timeout = 30, per_ip = 256;
    long checkpoints = 0; /* rw_engine_params.max_checkpoints: the library's retention */
    bool prefault = false;
    bool draft_fixed = false;
    const char *alias = NULL; /* --alias: the (first) model's id in responses and /v1/models */
    model_args margs = {.n = 0};
    size_t models_max = 0;
    const char *template_file = NULL, *tool_format = NULL, *reasoning_format = NULL, *kwargs = NULL;
    long reasoning_budget = -1;
    bool strict_api = false;
    const char *pooling = NULL;
    const char *slot_save_path = NULL;
    bool no_slots = false;
    bool evict_only = false; /* --cache-dir-write evict */
    double write_delay = 1.0;
    rw_spec_params spp = {0}; /* --spec: sources and n-gram settings (0: the library's) */
    size_t cache_dir_bytes = (size_t)16 << 30;
    /* default prefix cache: a quarter of physical memory */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t cache_bytes = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 4 : (size_t)1 << 30;
    long gmask = 0, greq = 0; /* grammar work budgets: 0 = the defaults, -1 = none */
    size_t max_state = SIZE_MAX; /* running state: SIZE_MAX = derived from --parallel and --ctx, per model */
    rw_kv_type kv = RW_KV_F16;
    const char *write_arg = NULL;
    double stop_arg = stop_limit;
    const rw_cli_opt opts[] = {
        {"--host", RW_OPT_STR, &host, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--api-key", RW_OPT_STR, &api_key, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--api-key-file", RW_OPT_STR, &key_file, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--cors-origin", RW_OPT_STR, &cors, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--header-timeout", RW_OPT_INT, &header_timeout, 1, 3600, 0, 0, NULL, NULL, NULL},
        {"--body-timeout", RW_OPT_INT, &body_timeout, 1, 3600, 0, 0, NULL, NULL, NULL},
        {"--max-connections-per-ip", RW_OPT_INT, &per_ip, 1, 65536, 0, 0, NULL, NULL, NULL},
        {"--port", RW_OPT_INT, &port, 0, 65535, 0, 0, NULL, NULL, NULL},
        {"--parallel", RW_OPT_INT, &parallel, 1, 1024, 0, 0, NULL, NULL, NULL},
        {"--ctx", RW_OPT_INT, &ctx, 2, 1 << 24, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        {"--max-queue", RW_OPT_INT, &max_queue, 0, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--max-body", RW_OPT_INT, &max_body, 1024, 1L << 32, 0, 0, NULL, NULL, NULL},
        {"--max-connections", RW_OPT_INT, &max_conn, 1, 65536, 0, 0, NULL, NULL, NULL},
        {"--prefill-chunk", RW_OPT_INT, &chunk, 1, 1 << 20, 0, 0, NULL, NULL, NULL},
        RW_OPT_KV_TYPE(&kv),
        RW_OPT_NUMERICS_MODE,
        {"--cache-bytes", RW_OPT_SIZE, &cache_bytes, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--max-state-bytes", RW_OPT_SIZE, &max_state, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--grammar-mask-budget", RW_OPT_INT, &gmask, -1, 1L << 40, 0, 0, NULL, NULL, NULL},
        {"--grammar-request-budget", RW_OPT_INT, &greq, -1, 1L << 50, 0, 0, NULL, NULL, NULL},
        {"--checkpoints", RW_OPT_INT, &checkpoints, 0, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--prefault", RW_OPT_FLAG, &prefault, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--cache-dir-bytes", RW_OPT_SIZE, &cache_dir_bytes, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--cache-dir", RW_OPT_STR, &cache_dir, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--replica-id", RW_OPT_STR, &replica_id, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--alias", RW_OPT_STR, &alias, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--model", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_model, &margs},
        {"--models-max-bytes", RW_OPT_SIZE, &models_max, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--cache-dir-write", RW_OPT_CHOICE, &write_arg, 0, 0, 0, 0, "evict|through", NULL, NULL},
        {"--cache-dir-delay", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_seconds, &write_delay},
        {"--shutdown-timeout", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_seconds, &stop_arg},
        RW_OPT_DRAFT(&draft_path, &draft_max, 1, &draft_fixed),
        RW_OPT_SPEC(&spp),
        {"--chat-template-file", RW_OPT_STR, &template_file, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--tool-format", RW_OPT_STR, &tool_format, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--reasoning-format", RW_OPT_STR, &reasoning_format, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--chat-template-kwargs", RW_OPT_STR, &kwargs, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--reasoning-budget", RW_OPT_INT, &reasoning_budget, -1, 1L << 30, 0, 0, NULL, NULL, NULL},
        {"--strict-api", RW_OPT_FLAG, &strict_api, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--pooling", RW_OPT_CHOICE, &pooling, 0, 0, 0, 0, "none|mean|cls|last", NULL, NULL},
        {"--slot-save-path", RW_OPT_STR, &slot_save_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--no-slots", RW_OPT_FLAG, &no_slots, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_LORA(lora),
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &model_path, 1, NULL);
    if (prc) return prc == RW_CLI_BAD_LINE ? usage() : 2;
    if (write_arg) evict_only = !strcmp(write_arg, "evict");
    stop_limit = stop_arg > 0 ? stop_arg : 0.001;
    if (!model_path && !margs.n) return usage();

    /* the models: MODEL (with --alias) first, then each --model in order */
    const int n_models = (model_path ? 1 : 0) + margs.n;
    if (n_models > MAX_MODELS) {
        rw_cli_error(CMD, "at most %d models", MAX_MODELS);
        return 2;
    }
    serve_model sms[MAX_MODELS];
    char aliases[MAX_MODELS][128];
    memset(sms, 0, sizeof sms);
    for (int i = 0; i < n_models; i++) {
        serve_model *sm = &sms[i];
        if (model_path && i == 0) {
            sm->path = model_path;
            aliases[i][0] = 0;
        } else split_model_arg(margs.arg[i - (model_path ? 1 : 0)], aliases[i], sizeof aliases[i], &sm->path);
        if (i == 0 && alias && *alias) {
            if (aliases[0][0]) {
                rw_cli_error(CMD, "the first model has two names: --alias %s and %s=", alias, aliases[0]);
                return 2;
            }
            snprintf(aliases[0], sizeof aliases[0], "%s", alias);
        }
        sm->file_id = base_name(sm->path);
        sm->id = aliases[i][0] ? aliases[i] : sm->file_id; /* the model's id: its alias, else the file's name */
        sm->first = i == 0;
        for (int k = 0; k < i; k++)
            if (!strcmp(sms[k].id, sm->id)) {
                rw_cli_error(CMD, "two models are named \"%s\": give one an alias (--model NAME=FILE)", sm->id);
                return 2;
            }
        struct stat fst;
        if (stat(sm->path, &fst)) { /* the first one's error comes from loading it, as with one model */
            if (i) {
                rw_cli_error(CMD, "%s: %s", sm->path, strerror(errno));
                return 1;
            }
        }
    }
    char *key_owned = NULL;
    if (key_file && api_key) {
        rw_cli_error(CMD, "give the API key once: --api-key or --api-key-file");
        return 2;
    }
    if (key_file && !(api_key = key_owned = read_key_file(key_file))) return 2;
    if (!api_key && getenv("REWIND_API_KEY") && getenv("REWIND_API_KEY")[0]) api_key = getenv("REWIND_API_KEY");

    const unsigned spec = (spp.sources & RW_SPEC_MTP ? RW_SPECULATE_MTP : 0u) |
                          (spp.sources & RW_SPEC_NGRAM ? RW_SPECULATE_NGRAM : 0u);
    serve_shared sh = {.max_state = max_state, .draft_path = draft_path, .spec = spec, .lora = lora};
    rw_engine_params *ep = &sh.ep;
    *ep = rw_engine_params_default();
    ep->run.n_threads = (int)threads;
    ep->run.n_ctx = ctx;
    ep->run.kv_f32 = kv == RW_KV_F32;
    ep->max_running = (int)parallel;
    ep->max_queued = (int)max_queue;
    ep->prefill_chunk = chunk;
    ep->cache_bytes = cache_bytes;
    ep->cache_dir_bytes = cache_dir_bytes;
    ep->cache_dir_evict_only = evict_only;
    ep->cache_write_delay = write_delay;
    /* every loaded model writes its pending entries within the shutdown time */
    ep->cache_flush_seconds = stop_limit * 0.8 / n_models;
    ep->max_checkpoints = (int)checkpoints;
    ep->prefault_states = prefault;
    ep->draft_max = (int)draft_max;
    ep->draft_fixed = draft_fixed;
    ep->ngram_n = spp.ngram_n;
    ep->ngram_min_hits = spp.ngram_min_hits;
    ep->grammar_mask_budget = gmask;
    ep->grammar_request_budget = greq;
    rw_server_model_source src[MAX_MODELS];
    int rc = 1;
    rw_server *s = NULL;
    rw_error err = {0};
    char *template_src = NULL;
    if (template_file && read_template(template_file, &template_src, &err)) goto fail;
    sh.template_src = template_src;
    /* several models: each has its own disk-tier folder in --cache-dir (their files would not serve the others) */
    if (cache_dir && n_models > 1 && mkdir(cache_dir, 0777) && errno != EEXIST) {
        rw_errorf(&err, RW_ERR_IO, "cannot create the cache folder %s: %s", cache_dir, strerror(errno));
        goto fail;
    }
    for (int i = 0; i < n_models; i++) {
        serve_model *sm = &sms[i];
        sm->sh = &sh;
        if (cache_dir && !(sm->cache_dir = n_models > 1 ? model_cache_dir(cache_dir, sm->id) : strdup(cache_dir))) {
            rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
            goto fail;
        }
        src[i] = (rw_server_model_source){.id = sm->id,
                                          .alt_id = strcmp(sm->id, sm->file_id) ? sm->file_id : NULL,
                                          .est_bytes = model_bytes(sm->path),
                                          .n_ctx = ctx,
                                          .load = load_model,
                                          .unload = unload_model,
                                          .user = sm};
    }
    const rw_server_config sc = {.host = host,
                                 .port = (int)port,
                                 .api_key = api_key,
                                 .model_id = sms[0].id,
                                 .max_body_bytes = (size_t)max_body,
                                 .max_connections = (int)max_conn,
                                 .max_connections_per_ip = (int)per_ip,
                                 .header_timeout = (double)header_timeout,
                                 .body_timeout = (double)body_timeout,
                                 .cors_origin = cors,
                                 .replica_id = replica_id,
                                 .tool_format = tool_format,
                                 .reasoning_format = reasoning_format,
                                 .chat_template_kwargs = kwargs,
                                 .has_reasoning_budget = reasoning_budget >= 0,
                                 .reasoning_budget = reasoning_budget,
                                 .strict_api = strict_api,
                                 .pooling = pooling,
                                 .models_max_bytes = models_max,
                                 .slot_save_path = slot_save_path,
                                 .no_slots = no_slots};
    if (rw_server_start_models(src, n_models, &sc, &s, &err)) goto fail; /* loads the default model */
    fprintf(stderr,
            "rewind serve: listening on http://%s%s%s:%d (model %s, parallel %ld, ctx %ld, kv %s, kernels "
            "%s, prefix cache %zu MiB%s%s)\n",
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", rw_server_port(s), sms[0].id, parallel,
            ctx, kv == RW_KV_F16 ? "f16" : "f32", rw_get_kernels(), cache_bytes >> 20,
            cache_dir ? ", disk tier in " : "", cache_dir ? cache_dir : "");
    for (int i = 1; i < n_models; i++)
        fprintf(stderr, "rewind serve: also model %s (%s), loaded on first use%s\n", sms[i].id, sms[i].path,
                models_max ? " within --models-max-bytes" : "");
    if (draft_path)
        fprintf(stderr, "rewind serve: speculative decoding with draft %s (up to %ld tokens, %s)\n", draft_path,
                draft_max, draft_fixed ? "fixed" : "adaptive");
    if (spp.sources)
        fprintf(stderr, "rewind serve: speculative decoding with %s%s%s (up to %ld tokens, %s)\n",
                spp.sources & RW_SPEC_MTP ? "the model's MTP block" : "",
                spp.sources == (RW_SPEC_MTP | RW_SPEC_NGRAM) ? " and " : "",
                spp.sources & RW_SPEC_NGRAM ? "n-gram lookup" : "", draft_max, draft_fixed ? "fixed" : "adaptive");
    fflush(stderr);
    int expect = 0;
    if (atomic_compare_exchange_strong(&phase, &expect, 1)) { /* else a signal came first: it exits */
        pthread_mutex_lock(&stop_mu);
        while (!stopping) pthread_cond_wait(&stop_cv, &stop_mu);
        pthread_mutex_unlock(&stop_mu);
    }
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_server_stop(s); /* unloads the models: each prefix cache writes what is pending */
    for (int i = 0; i < n_models; i++) free(sms[i].cache_dir);
    if (!rc) fprintf(stderr, "rewind serve: stopped\n");
    free(template_src);
    free(key_owned);
    return rc;
}

int rw_cmd_serve(int argc, char **argv) { return rw_cli_run_with_lora(run_serve, argc, argv); }
