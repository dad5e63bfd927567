/* cmd_imatrix.c - `rewind imatrix MODEL -f TEXT [-o imatrix.gguf] [--ctx N]
 * [--chunks N] [--process-output] [--kv f32|f16] [--numerics M]
 * [--threads N] [--kernels TIER]`: the importance matrix of a model on a
 * calibration text, as llama.cpp's llama-imatrix computes it, for
 * `rewind quantize --imatrix` (or llama-quantize's).
 *
 * As llama-imatrix runs: the text tokenized whole (with BOS when the
 * vocabulary asks for one), cut into chunks of --ctx tokens (default 512;
 * the tail shorter than one dropped; --chunks caps their number), each
 * evaluated in one pass from an empty context with its first token BOS
 * when the vocabulary asks for one; the statistics of every weight product
 * of those passes (rw_imatrix_begin) saved in llama-imatrix's GGUF layout,
 * the text's path as given recorded as its dataset. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/options.h"

static const char *CMD = "imatrix";

static int usage(void) {
    fprintf(stderr, "usage: rewind imatrix MODEL -f TEXT [-o imatrix.gguf] [--ctx N] [--chunks N] [--process-output] "
                    "[--kv f32|f16] [--numerics auto|fast|ggml] [--threads N] [--kernels TIER]\n");
    return 2;
}

int rw_cmd_imatrix(int argc, char **argv) {
    const char *model_path = NULL, *file = NULL, *out = "imatrix.gguf";
    long n_ctx = 512, max_chunks = 0, threads = 0;
    bool process_output = false;
    rw_kv_type kv = RW_KV_F16; /* llama-imatrix's default cache */
    const rw_cli_opt opts[] = {
        {"-f", RW_OPT_STR, &file, 0, 0, 0, 0, NULL, NULL, NULL},
        {"-o", RW_OPT_STR, &out, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--ctx", RW_OPT_INT, &n_ctx, 16, 1L << 24, 0, 0, NULL, NULL, NULL},
        {"--chunks", RW_OPT_INT, &max_chunks, 0, 1L << 30, 0, 0, NULL, NULL, NULL},
        {"--process-output", RW_OPT_FLAG, &process_output, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        RW_OPT_KV_TYPE(&kv),
        RW_OPT_NUMERICS_MODE,
        RW_OPT_END,
    };
    int n_pos = 0;
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &model_path, 1, &n_pos);
    if (prc) return prc == RW_CLI_HELP ? 0 : usage();
    if (!model_path || !file) return usage();
    size_t len = 0;
    char *text = rw_cli_read_file(file, &len); /* freed below */
    if (!text) return rw_cli_error(CMD, "cannot read %s", file), 1;
    int rc = 1;
    rw_model *m = NULL;
    rw_seq *s = NULL;
    rw_imatrix_collector *c = NULL;
    int32_t *ids = NULL; /* the library's (rw_free) */
    float *logits = NULL;
    size_t n_ids = 0;
    rw_error err = {0};
    rw_model_params mp = rw_model_params_default();
    mp.n_threads = (int)threads;
    if (rw_model_open(model_path, &mp, &m, &err) || rw_model_tokenize(m, text, len, true, false, &ids, &n_ids, &err))
        goto fail;
    int64_t n_chunks = (int64_t)n_ids / n_ctx;
    if (max_chunks > 0 && n_chunks > max_chunks) n_chunks = max_chunks;
    if (n_chunks < 1) {
        rw_cli_error(CMD, "%s has %zu tokens, fewer than one chunk of --ctx %ld", file, n_ids, n_ctx);
        goto done;
    }
    /* the output head runs on the rows whose logits are asked for: all of
     * them when it is collected too */
    if (process_output && !(logits = malloc((size_t)n_ctx * (size_t)rw_model_n_vocab(m) * sizeof *logits))) {
        rw_cli_error(CMD, "out of memory for %ld rows of logits (--process-output)", n_ctx);
        goto done;
    }
    if (rw_seq_new(m, n_ctx, kv == RW_KV_F32, &s, &err) || rw_imatrix_begin(m, process_output, &c, &err)) goto fail;
    const rw_tokenizer *t = rw_model_tokenizer(m);
    const bool bos = rw_tokenizer_add_bos(t) && rw_tokenizer_bos(t) >= 0;
    fprintf(stderr, "%s: %zu tokens, %lld chunks of %ld\n", CMD, n_ids, (long long)n_chunks, n_ctx);
    for (int64_t k = 0; k < n_chunks; k++) {
        int32_t *chunk = ids + k * n_ctx;
        if (bos) chunk[0] = rw_tokenizer_bos(t); /* each chunk starts as a text does */
        rw_seq_batch b = {.seq = s, .ids = chunk, .n = n_ctx, .logits = logits, .all_logits = logits != NULL};
        if (rw_seq_rewind(s, 0, &err) || rw_seq_eval_batch(&b, 1, &err)) goto fail;
        fprintf(stderr, "[%lld]", (long long)(k + 1));
    }
    fprintf(stderr, "\n");
    if (rw_imatrix_save(c, out, file, (uint32_t)n_chunks, (uint32_t)n_ctx, &err)) goto fail;
    fprintf(stderr, "%s: %s written (%lld chunks of %ld)\n", CMD, out, (long long)n_chunks, n_ctx);
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_imatrix_end(c);
    rw_seq_free(s);
    free(logits);
    rw_free(ids);
    rw_model_close(m);
    free(text);
    return rc;
}
