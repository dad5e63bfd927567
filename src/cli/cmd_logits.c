/* cmd_logits.c - `rewind logits MODEL --ids IDS --out OUT.f32 [--ids IDS2
 * --out OUT2.f32 ...] [--mode batch|step] [--chunks N1,N2,...]
 * [--replay-from R] [--load-state FILE] [--save-state FILE] [--kv f32|f16]
 * [--numerics auto|fast|ggml] [--threads N]`.
 *
 * Runs the model over the ids of each IDS file and writes the float32
 * logits of every position, row-major [n_ids][n_vocab], little-endian, no
 * header. Several --ids/--out pairs are separate sequences processed
 * together, in the same forward passes (a ragged batch). --chunks gives the
 * number of tokens each sequence feeds to each successive pass (the last
 * size repeats); --mode batch (the default) is one pass of all ids, step is
 * --chunks 1. --replay-from R rewinds every sequence to R ids (exactly:
 * rw_seq_rewind) after all are processed and processes ids[R:] again with
 * the same chunking; rows >= R of the output come from that second run.
 * --load-state starts every sequence from a state file (the ids continue
 * it); --save-state writes the first sequence's state after processing.
 * These hooks exist to check that a sequence's logits do not depend on any
 * of it (the cache layer's invariants). --threads 0 (the default) = one
 * thread per physical core; the logits do not depend on it.
 *
 * This command is the hook that compares logits with llama.cpp's goldens,
 * so its KV cache is theirs: f32 unless --kv f16. Its numerics are the
 * library's default (auto: our summation order, as serve and bench) unless
 * --numerics or RW_NUMERICS says otherwise; --numerics ggml sums every
 * matrix in ggml's order, whose logits equal llama.cpp's bit for bit
 * (docs/numerics.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"

static const char *CMD = "logits";

#define MAX_SEQS RW_SEQ_BATCH_MAX
#define MAX_CHUNKS 256

static int usage(void) {
    fprintf(stderr, "usage: rewind logits MODEL --ids IDS --out OUT.f32 [--ids IDS --out OUT.f32 ...] "
                    "[--mode batch|step] [--chunks N1,N2,...] [--replay-from R] [--load-state FILE] "
                    "[--save-state FILE] [--kv f32|f16] [--numerics auto|fast|ggml] [--threads N] [--kernels TIER]\n");
    return 2;
}

static int parse_chunks(const char *s, long *chunks, int *n) {
    *n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > (1L << 30) || *n == MAX_CHUNKS || (*end && *end != ',')) {
            rw_cli_error(CMD, "--chunks needs positive integers separated by commas");
            return 2;
        }
        chunks[(*n)++] = v;
        s = *end ? end + 1 : end;
    }
    if (!*n) {
        rw_cli_error(CMD, "--chunks needs at least one size");
        return 2;
    }
    return 0;
}

typedef struct {
    const char *ids_path, *out_path;
    int32_t *ids;
    int64_t n;
    float *logits;
    rw_seq *s;
} seq_job;

/* Feeds ids[from:] of every job through the model in passes of the given
 * chunk sizes, all sequences in each pass. */
static int run_passes(seq_job *jobs, int n_jobs, int64_t from, const long *chunks, int n_chunks, int64_t n_vocab,
                      rw_error *err) {
    int64_t done[MAX_SEQS];
    for (int i = 0; i < n_jobs; i++) done[i] = from < jobs[i].n ? from : jobs[i].n;
    rw_seq_batch items[MAX_SEQS];
    for (int pass = 0;; pass++) {
        const int64_t c = chunks[pass < n_chunks ? pass : n_chunks - 1];
        int k = 0;
        for (int i = 0; i < n_jobs; i++) {
            if (done[i] >= jobs[i].n) continue;
            int64_t t = jobs[i].n - done[i] < c ? jobs[i].n - done[i] : c;
            items[k++] = (rw_seq_batch){.seq = jobs[i].s, .ids = jobs[i].ids + done[i], .n = t,
                                        .logits = jobs[i].logits + done[i] * n_vocab, .all_logits = true};
            done[i] += t;
        }
        if (!k) return 0;
        if (rw_seq_eval_batch(items, k, err)) return 1;
    }
}

/* The state of the option parser's callbacks: --ids and --out repeat. */
typedef struct {
    seq_job *jobs;
    int n_ids, n_outs, n_chunks;
    long *chunks;
} logits_opts;

static int opt_ids(void *ctx, const char *cmd, const char *name, const char *v) {
    logits_opts *o = ctx;
    int *n = name[2] == 'i' ? &o->n_ids : &o->n_outs;
    if (*n == MAX_SEQS) return rw_cli_error(cmd, "at most %d sequences", MAX_SEQS), 2;
    if (name[2] == 'i') o->jobs[(*n)++].ids_path = v;
    else o->jobs[(*n)++].out_path = v;
    return 0;
}

static int opt_chunks(void *ctx, const char *cmd, const char *name, const char *v) {
    logits_opts *o = ctx;
    return parse_chunks(v, o->chunks, &o->n_chunks);
}

static int run_logits(int argc, char **argv, rw_cli_lora *lora) {
    const char *model_path = NULL, *mode = NULL, *load_path = NULL, *save_path = NULL;
    seq_job jobs[MAX_SEQS];
    memset(jobs, 0, sizeof jobs);
    long chunks[MAX_CHUNKS];
    long replay_from = -1;
    rw_kv_type kv = RW_KV_F32; /* as the goldens; see cmd_generate.c */
    long threads = 0;
    logits_opts lo = {.jobs = jobs, .chunks = chunks};
    const rw_cli_opt opts[] = {
        {"--ids", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_ids, &lo},
        {"--out", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_ids, &lo},
        {"--mode", RW_OPT_CHOICE, &mode, 0, 0, 0, 0, "batch|step", NULL, NULL},
        {"--chunks", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_chunks, &lo},
        {"--replay-from", RW_OPT_INT, &replay_from, 0, 1L << 40, 0, 0, NULL, NULL, NULL},
        {"--load-state", RW_OPT_STR, &load_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--save-state", RW_OPT_STR, &save_path, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        RW_OPT_KV_TYPE(&kv),
        RW_OPT_NUMERICS_MODE,
        RW_OPT_LORA(lora),
        RW_OPT_END,
    };
    int n_pos = 0;
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &model_path, 1, &n_pos);
    if (prc) return prc == RW_CLI_HELP ? 0 : usage();
    const int n_ids = lo.n_ids, n_outs = lo.n_outs;
    int n_chunks = lo.n_chunks;
    if (!model_path || !n_ids || n_ids != n_outs) return usage();
    if (mode && n_chunks) {
        rw_cli_error(CMD, "give --mode or --chunks, not both");
        return 2;
    }
    if (mode && !strcmp(mode, "step")) chunks[0] = 1, n_chunks = 1;
    if (!n_chunks) chunks[0] = 1L << 30, n_chunks = 1; /* batch: one pass */
    int rc = 1;
    rw_model *m = NULL;
    rw_error err = {0};
    for (int i = 0; i < n_ids; i++)
        if (rw_cli_read_ids(CMD, jobs[i].ids_path, &jobs[i].ids, &jobs[i].n)) goto done;
    rw_model_params mp = rw_model_params_default();
    mp.n_threads = (int)threads; /* the sequences' forward passes */
    rw_cli_lora_params(lora, &mp);
    if (rw_model_open(model_path, &mp, &m, &err)) goto fail;
    const int64_t n_vocab = rw_model_n_vocab(m), n_ctx_train = rw_model_n_ctx_train(m);
    for (int i = 0; i < n_ids; i++) {
        seq_job *j = &jobs[i];
        j->logits = malloc((size_t)(j->n ? j->n : 1) * (size_t)n_vocab * sizeof(float));
        if (!j->logits) {
            rw_cli_error(CMD, "out of memory for %lld x %lld logits", (long long)j->n, (long long)n_vocab);
            goto done;
        }
        const int64_t n_ctx = j->n > n_ctx_train ? j->n : n_ctx_train;
        if (rw_seq_new(m, n_ctx, kv == RW_KV_F32, &j->s, &err)) goto fail;
        if (load_path && rw_seq_load(j->s, load_path, &err)) goto fail;
    }
    const int64_t base = rw_seq_length(jobs[0].s); /* from the state file, or 0 */
    if (run_passes(jobs, n_ids, 0, chunks, n_chunks, n_vocab, &err)) goto fail;
    if (replay_from >= 0) {
        for (int i = 0; i < n_ids; i++) {
            int64_t r = replay_from < jobs[i].n ? replay_from : jobs[i].n;
            if (rw_seq_rewind(jobs[i].s, base + r, &err)) goto fail;
        }
        if (run_passes(jobs, n_ids, replay_from, chunks, n_chunks, n_vocab, &err)) goto fail;
    }
    if (save_path && rw_seq_save(jobs[0].s, save_path, &err)) goto fail;
    for (int i = 0; i < n_ids; i++) {
        const seq_job *j = &jobs[i];
        FILE *f = fopen(j->out_path, "wb");
        const size_t cnt = (size_t)(j->n * n_vocab);
        bool ok = f && fwrite(j->logits, sizeof(float), cnt, f) == cnt;
        if (f && fclose(f)) ok = false;
        if (!ok) {
            rw_cli_error(CMD, "cannot write %s", j->out_path);
            goto done;
        }
    }
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    for (int i = 0; i < n_ids; i++) {
        rw_seq_free(jobs[i].s);
        free(jobs[i].logits);
        free(jobs[i].ids);
    }
    rw_model_close(m);
    return rc;
}

int rw_cmd_logits(int argc, char **argv) { return rw_cli_run_with_lora(run_logits, argc, argv); }
