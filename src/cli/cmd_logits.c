/* cmd_logits.c - `rewind logits MODEL --ids IDS [--mode batch|step]
 * [--kv f32|f16] [--threads N] --out OUT.f32`. --threads 0 (the default) = one
 * thread per physical core; the logits do not depend on it. The KV cache is
 * f32 unless --kv f16 is given.
 *
 * Runs the model over the ids of IDS and writes the float32 logits of every
 * position, row-major [n_ids][n_vocab], little-endian, no header. batch
 * runs all ids in one forward pass, step one id per pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "cli/cli.h"

static const char *CMD = "logits";

static int usage(void) {
    fprintf(stderr, "usage: rewind logits MODEL --ids IDS [--mode batch|step] [--kv f32|f16] [--threads N] --out OUT.f32\n");
    return 2;
}

int rw_cmd_logits(int argc, char **argv) {
    const char *model_path = NULL, *ids_path = NULL, *out_path = NULL, *mode = "batch";
    rw_kv_type kv = RW_KV_F32; /* as the goldens; see cmd_generate.c */
    long threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--ids") && has_val) ids_path = argv[++i];
        else if (!strcmp(a, "--out") && has_val) out_path = argv[++i];
        else if (!strcmp(a, "--mode") && has_val) mode = argv[++i];
        else if (!strcmp(a, "--threads") && has_val) {
            if (rw_cli_parse_int(CMD, a, argv[++i], 0, 1024, &threads)) return 2;
        } else if (!strcmp(a, "--kv") && has_val) {
            if (rw_cli_parse_kv(CMD, argv[++i], &kv)) return 2;
        } else if (a[0] == '-') {
            rw_cli_error(CMD, "unknown option or missing value: %s", a);
            return usage();
        } else if (!model_path) model_path = a;
        else return usage();
    }
    if (!model_path || !ids_path || !out_path) return usage();
    bool step = !strcmp(mode, "step");
    if (!step && strcmp(mode, "batch") != 0) {
        rw_cli_error(CMD, "--mode must be batch or step, not \"%s\"", mode);
        return 2;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    if (rw_cli_read_ids(CMD, ids_path, &ids, &n)) return 1;
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    if (rw_cli_open_model(CMD, model_path, &g, &m)) {
        free(ids);
        return 1;
    }
    const int64_t n_vocab = rw_model_get_hparams(m)->n_vocab;
    int rc = 1;
    rw_error err = {0};
    rw_model_seq *s = NULL;
    rw_threadpool *pool = NULL;
    float *logits = malloc((size_t)n * (size_t)n_vocab * sizeof(float));
    if (!logits) {
        rw_cli_error(CMD, "out of memory for %lld x %lld logits", (long long)n, (long long)n_vocab);
        goto done;
    }
    int64_t max_ctx = n > rw_model_get_hparams(m)->n_ctx_train ? n : 0;
    if (rw_threadpool_new((int)threads, &pool, &err) || rw_model_seq_new(m, kv, max_ctx, &s, &err)) goto fail;
    if (step) {
        for (int64_t t = 0; t < n; t++) {
            rw_forward_args fa = {.tokens = ids + t, .n = 1, .pool = pool, .logits = logits + t * n_vocab};
            if (rw_model_forward(m, s, &fa, &err)) goto fail;
        }
    } else {
        rw_forward_args fa = {.tokens = ids, .n = n, .pool = pool, .logits = logits, .all_logits = true};
        if (rw_model_forward(m, s, &fa, &err)) goto fail;
    }
    FILE *f = fopen(out_path, "wb");
    if (!f || fwrite(logits, sizeof(float), (size_t)(n * n_vocab), f) != (size_t)(n * n_vocab)) {
        if (f) fclose(f);
        rw_cli_error(CMD, "cannot write %s", out_path);
        goto done;
    }
    if (fclose(f) != 0) {
        rw_cli_error(CMD, "cannot write %s", out_path);
        goto done;
    }
    rc = 0;
    goto done;
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_model_seq_free(s);
    rw_threadpool_free(pool);
    free(logits);
    rw_model_free(m);
    rw_gguf_close(g);
    free(ids);
    return rc;
}
