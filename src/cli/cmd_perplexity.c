/* cmd_perplexity.c - `rewind perplexity MODEL -f FILE [--ctx N]
 * [--chunks N] [--kv f32|f16] [--numerics auto|fast|ggml] [--threads N]
 * [--kernels TIER]`: the model's perplexity on a text, as llama.cpp's
 * llama-perplexity measures it, so that the two figures compare (a
 * quantization's quality against the unquantized file's, or against
 * llama.cpp's on the same file).
 *
 * The text is tokenized whole (with BOS when the vocabulary asks for it)
 * and cut into chunks of --ctx tokens (the tail shorter than one is
 * dropped); each chunk is evaluated from an empty context, its first token
 * BOS when the vocabulary asks for one, and only the predictions of its
 * second half count: position i (ctx/2 <= i < ctx - 1) scores token i + 1,
 * so every scored token has at least ctx/2 tokens of context. The
 * negative log-likelihood of each is -log softmax(row)[token], in double;
 * perplexity = exp(mean), its error the standard error of the mean times
 * the perplexity. One sequence serves every chunk, rewound to 0 between
 * them; rows are computed 64 MiB of logits at a time, which does not change
 * them (a row's result does not depend on its batch). The KV cache is f16
 * unless --kv f32, as llama-perplexity's default (and rewind serve's).
 * Prints the running estimate after each chunk ("[1]8.1234,[2]...") and
 * the final one.
 *
 * --kl-divergence-base OUT also writes each scored row's log-probabilities
 * to OUT; --kl-divergence --kl-divergence-base FILE then evaluates another
 * model (a quantization of the first) on FILE's chunks, no -f, and prints
 * its KL divergence from them, the two perplexities and how often the two
 * agree on the top token (perplexity_kld.c; llama-perplexity's file, so
 * either program's base file serves the other).
 *
 * --hellaswag -f FILE [--hellaswag-tasks N]: the HellaSwag score on
 * llama-perplexity's data file (perplexity_hellaswag.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"

static const char *CMD = "perplexity";

enum { ROWS_BYTES = 64 << 20 };

static int usage(void) {
    fprintf(stderr, "usage: rewind perplexity MODEL -f FILE [--ctx N] [--chunks N] [--kl-divergence-base OUT] "
                    "[--kv f32|f16] [--numerics auto|fast|ggml] [--threads N] [--kernels TIER]\n"
                    "       rewind perplexity MODEL --kl-divergence --kl-divergence-base FILE [--chunks N] ...\n"
                    "       rewind perplexity MODEL --hellaswag -f FILE [--hellaswag-tasks N] ...\n");
    return 2;
}

/* Where a chunk's scored rows go besides the perplexity: a base file being
 * written (out), or one being read and compared with (in, kld); u16 holds
 * one file row. */
typedef struct {
    FILE *out, *in;
    rw_cli_kld *kld;
    uint16_t *u16;
    size_t nv;
} base_io;

/* Scores one chunk of n ids on s (empty): *nll and *nll2 gain each scored
 * token's value and its square, *count their number. */
static rw_status score_chunk(rw_seq *s, const int32_t *ids, int64_t n, float *rows, int64_t cap, int64_t n_vocab,
                             const base_io *io, double *nll, double *nll2, int64_t *count, rw_error *err) {
    const int64_t first = n / 2;
    rw_seq_batch b = {.seq = s, .ids = ids, .n = first}; /* the context half: no logits */
    rw_status st = first ? rw_seq_eval_batch(&b, 1, err) : RW_OK;
    for (int64_t at = first; !st && at < n - 1; at += cap) {
        const int64_t k = n - 1 - at < cap ? n - 1 - at : cap;
        b = (rw_seq_batch){.seq = s, .ids = ids + at, .n = k, .logits = rows, .all_logits = true};
        if ((st = rw_seq_eval_batch(&b, 1, err))) break;
        for (int64_t j = 0; j < k; j++) {
            const float *row = rows + j * n_vocab;
            const int32_t tok = ids[at + j + 1];
            double v; /* its NLL, from the row's one log-softmax pass */
            if (io->in) {
                if (fread(io->u16, sizeof *io->u16, io->nv, io->in) != io->nv)
                    return rw_errorf(err, RW_ERR_IO, "the base file ended early");
                v = rw_cli_kld_add(io->kld, row, n_vocab, io->u16, tok);
            } else if (io->out) {
                v = rw_cli_kld_encode_row(row, n_vocab, tok, io->u16);
                if (fwrite(io->u16, sizeof *io->u16, io->nv, io->out) != io->nv)
                    return rw_errorf(err, RW_ERR_IO, "cannot write the base file");
            } else v = -rw_cli_log_prob(row, n_vocab, tok);
            *nll += v;
            *nll2 += v * v;
            (*count)++;
        }
    }
    return st;
}

/* Opens the base file of --kl-divergence and reads its head: *ids its
 * tokens (the caller frees), *n_ctx its context, *n_chunks its chunks
 * (capped at max_chunks). 0, or 1 after printing why not. */
static int open_base(const char *path, int64_t n_vocab, long *n_ctx, long max_chunks, FILE **f, int32_t **ids,
                     int64_t *n_chunks) {
    char msg[512];
    int32_t ctx, chunks;
    if (!(*f = fopen(path, "rb"))) return rw_cli_error(CMD, "cannot open %s", path), 1;
    if (rw_cli_kld_read_head(*f, path, n_vocab, &ctx, &chunks, ids, msg, sizeof msg))
        return rw_cli_error(CMD, "%s", msg), 1;
    if (*n_ctx && *n_ctx != ctx)
        return rw_cli_error(CMD, "%s was written with --ctx %d, not %ld", path, ctx, *n_ctx), 1;
    *n_ctx = ctx;
    *n_chunks = max_chunks > 0 && chunks > max_chunks ? max_chunks : chunks;
    return 0;
}

static int run_perplexity(int argc, char **argv, rw_cli_lora *lora) {
    const char *model_path = NULL, *file = NULL, *base_path = NULL;
    long n_ctx = 0, max_chunks = 0, threads = 0; /* n_ctx 0: 512, or the base file's */
    bool kl = false, wrote_base = false, hellaswag = false;
    long hs_tasks = 0;
    rw_kv_type kv = RW_KV_F16; /* as llama-perplexity's default cache and rewind serve's */
    const rw_cli_opt opts[] = {
        {"-f", RW_OPT_STR, &file, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--ctx", RW_OPT_INT, &n_ctx, 4, 1L << 24, 0, 0, NULL, NULL, NULL},
        {"--chunks", RW_OPT_INT, &max_chunks, 0, 1L << 30, 0, 0, NULL, NULL, NULL},
        {"--kl-divergence", RW_OPT_FLAG, &kl, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--kl-divergence-base", RW_OPT_STR, &base_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--hellaswag", RW_OPT_FLAG, &hellaswag, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--hellaswag-tasks", RW_OPT_INT, &hs_tasks, 0, 1L << 30, 0, 0, NULL, NULL, NULL},
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
    if (hellaswag && (kl || base_path)) {
        rw_cli_error(CMD, "--hellaswag scores its own file: no --kl-divergence");
        return usage();
    }
    if (!model_path || (kl ? !base_path || file : !file)) {
        if (kl && file) rw_cli_error(CMD, "--kl-divergence takes its tokens from the base file, not -f");
        else if (kl) rw_cli_error(CMD, "--kl-divergence needs --kl-divergence-base FILE");
        return usage();
    }
    size_t len = 0;
    char *text = kl ? NULL : rw_cli_read_file(file, &len); /* freed below */
    if (!kl && !text) return rw_cli_error(CMD, "cannot read %s", file), 1;
    int rc = 1;
    rw_model *m = NULL;
    rw_seq *s = NULL;
    int32_t *ids = NULL;      /* the library's (rw_free) */
    int32_t *base_ids = NULL; /* the base file's (free) */
    float *rows = NULL;
    base_io io = {0};
    size_t n_ids = 0;
    rw_error err = {0};
    rw_model_params mp = rw_model_params_default();
    mp.n_threads = (int)threads;
    rw_cli_lora_params(lora, &mp);
    if (rw_model_open(model_path, &mp, &m, &err)) goto fail;
    if (hellaswag) {
        rc = rw_cli_hellaswag(CMD, m, text, len, hs_tasks, n_ctx ? n_ctx : 512, kv == RW_KV_F32);
        goto done;
    }
    const int64_t n_vocab = rw_model_n_vocab(m);
    int64_t n_chunks = 0;
    if (kl) {
        if (open_base(base_path, n_vocab, &n_ctx, max_chunks, &io.in, &base_ids, &n_chunks)) goto done;
        n_ids = (size_t)(n_chunks * n_ctx);
    } else {
        if (rw_model_tokenize(m, text, len, true, false, &ids, &n_ids, &err)) goto fail;
        if (!n_ctx) n_ctx = 512;
        n_chunks = (int64_t)n_ids / n_ctx;
        if (max_chunks > 0 && n_chunks > max_chunks) n_chunks = max_chunks;
        if (n_chunks < 1) {
            rw_cli_error(CMD, "%s has %zu tokens, fewer than one chunk of --ctx %ld", file, n_ids, n_ctx);
            goto done;
        }
    }
    int32_t *const tokens = kl ? base_ids : ids;
    int64_t cap = ROWS_BYTES / (n_vocab * (int64_t)sizeof(float));
    if (cap < 1) cap = 1;
    if (cap > n_ctx) cap = n_ctx;
    io.nv = rw_cli_kld_row_u16(n_vocab);
    const int64_t scored = n_ctx - 1 - n_ctx / 2;
    if (!(rows = malloc((size_t)(cap * n_vocab) * sizeof *rows)) ||
        ((kl || base_path) && !(io.u16 = malloc(io.nv * sizeof *io.u16))) ||
        (kl && !(io.kld = rw_cli_kld_new(n_chunks * scored)))) {
        rw_cli_error(CMD, "out of memory for %lld rows of logits", (long long)cap);
        goto done;
    }
    if (!kl && base_path) {
        wrote_base = true; /* removed if the run fails */
        if (!(io.out = fopen(base_path, "wb")) ||
            !rw_cli_kld_write_head(io.out, (int32_t)n_ctx, (int32_t)n_vocab, (int32_t)n_chunks, tokens)) {
            rw_cli_error(CMD, "cannot write %s", base_path);
            goto done;
        }
    }
    if (rw_seq_new(m, n_ctx, kv == RW_KV_F32, &s, &err)) goto fail;
    const rw_tokenizer *t = rw_model_tokenizer(m);
    const bool bos = rw_tokenizer_add_bos(t) && rw_tokenizer_bos(t) >= 0;
    fprintf(stderr, "%s: %zu tokens, %lld chunks of %ld, %lld scored per chunk\n", CMD, n_ids, (long long)n_chunks,
            n_ctx, (long long)scored);
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    for (int64_t c = 0; c < n_chunks; c++) {
        int32_t *chunk = tokens + c * n_ctx;
        const int32_t kept = chunk[0];
        if (bos) chunk[0] = rw_tokenizer_bos(t); /* each chunk starts as a text does */
        rw_status st = rw_seq_rewind(s, 0, &err);
        if (!st) st = score_chunk(s, chunk, n_ctx, rows, cap, n_vocab, &io, &nll, &nll2, &count, &err);
        chunk[0] = kept;
        if (st) goto fail;
        if (kl) rw_cli_kld_print_chunk(io.kld, c + 1, stdout);
        else printf("%s[%lld]%.4f", c ? "," : "", (long long)(c + 1), exp(nll / (double)count));
        fflush(stdout);
    }
    if (io.out) {
        FILE *f = io.out;
        io.out = NULL;
        if (fclose(f)) {
            rw_cli_error(CMD, "cannot write %s", base_path);
            goto done;
        }
    }
    const double mean = nll / (double)count, ppl = exp(mean);
    const double var = count > 1 ? (nll2 / (double)count - mean * mean) * (double)count / (double)(count - 1) : 0.0;
    const double err_ppl = var > 0 ? ppl * sqrt(var / (double)count) : 0.0;
    if (kl) rw_cli_kld_print_final(io.kld, stdout);
    else printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err_ppl);
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    if (io.out) fclose(io.out);
    if (rc && wrote_base) remove(base_path); /* half a base file is no base file */
    if (io.in) fclose(io.in);
    rw_cli_kld_free(io.kld);
    free(io.u16);
    rw_seq_free(s);
    free(rows);
    rw_free(ids);
    free(base_ids);
    rw_model_close(m);
    free(text);
    return rc;
}

int rw_cmd_perplexity(int argc, char **argv) { return rw_cli_run_with_lora(run_perplexity, argc, argv); }
