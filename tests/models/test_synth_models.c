/* test_synth_models.c - models made by rewind synth load and run: every tiny
 * preset (and qwen35 with the MTP block, which the main pass skips) gives
 * finite logits a few units wide, the same in one pass and token by token;
 * and a model whose K-quant matrices and experts are kept in stored panels
 * (where the tier has them: models/panels.c) gives the logits of the same
 * model loaded without panels, bit for bit, in one pass (20 rows: panels
 * expanded per call; the experts' few rows: the stored pass) and token by
 * token (one row). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "kernels/matmul.h"
#include "models/model_int.h"
#include "synth/synth.h"

/* The logits of n tokens in one pass (a) and token by token (b). */
static void logits_both(rw_model *m, const int32_t *ids, int64_t n, float *a, float *b) {
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    rw_error err = {0};
    rw_model_seq *s1 = NULL, *s2 = NULL;
    CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &s1, &err) == RW_OK &&
          rw_model_seq_new(m, RW_KV_F32, 0, &s2, &err) == RW_OK);
    rw_forward_args fa = {.tokens = ids, .n = n, .logits = a, .all_logits = true};
    CHECK_MSG(rw_model_forward(m, s1, &fa, &err) == RW_OK, "%s", err.msg);
    for (int64_t t = 0; t < n; t++) {
        rw_forward_args f1 = {.tokens = ids + t, .n = 1, .logits = b + t * V, .all_logits = true};
        CHECK_MSG(rw_model_forward(m, s2, &f1, &err) == RW_OK, "%s", err.msg);
    }
    rw_model_seq_free(s1);
    rw_model_seq_free(s2);
}

static void check_preset(const char *preset, const char *type, bool mtp) {
    char path[] = "/tmp/rw_synth_model_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    rw_synth_options o = {.preset = preset, .type = type, .seed = 5, .mtp = mtp};
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_status st = rw_synth_write(&o, path, &err);
    if (!st) st = rw_gguf_open(path, &g, &err);
    if (!st) st = rw_model_load(g, &m, &err);
    CHECK_MSG(st == RW_OK, "%s %s%s: %s", preset, type, mtp ? " (mtp)" : "", err.msg);
    if (!st) {
        const int64_t V = rw_model_get_hparams(m)->n_vocab, n = 12;
        int32_t ids[12];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
        float *a = malloc((size_t)(n * V) * sizeof *a), *b = malloc((size_t)(n * V) * sizeof *b);
        logits_both(m, ids, n, a, b);
        CHECK_MSG(!memcmp(a, b, (size_t)(n * V) * sizeof *a), "%s: batch and step logits differ", preset);
        double sum = 0, sum2 = 0;
        bool finite = true;
        for (int64_t i = 0; i < n * V; i++) {
            finite &= isfinite(a[i]) != 0;
            sum += a[i];
            sum2 += (double)a[i] * a[i];
        }
        double mean = sum / (double)(n * V), sd = sqrt(sum2 / (double)(n * V) - mean * mean);
        CHECK_MSG(finite && sd > 0.5 && sd < 20, "%s %s: logits std %g (finite %d)", preset, type, sd, finite);
        printf("%-12s %-6s%s logits std %.2f\n", preset, type, mtp ? " mtp" : "    ", sd);
        free(a);
        free(b);
    }
    rw_model_free(m);
    rw_gguf_close(g);
    unlink(path);
}

/* preset's matrices and experts in stored panels against the rows (panels
 * off at load). */
static void check_stored_panels(const char *preset, const char *type) {
    char path[] = "/tmp/rw_synth_moe_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    rw_synth_options o = {.preset = preset, .type = type, .seed = 9};
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *with = NULL, *without = NULL;
    rw_status st = rw_synth_write(&o, path, &err);
    if (!st) st = rw_gguf_open(path, &g, &err);
    if (!st) st = rw_model_load(g, &with, &err);
    rw_matmul_set_panels(false);
    if (!st) st = rw_model_load(g, &without, &err);
    rw_matmul_set_panels(true);
    CHECK_MSG(st == RW_OK, "%s %s: %s", preset, type, err.msg);
    if (!st) {
        CHECK_EQ_INT(without->n_xpanels, 0);
        if (with->n_xpanels == 0)
            printf("%-12s %-6s no stored panels (this tier, or the setting): compared the rows alone\n", preset, type);
        const int64_t V = rw_model_get_hparams(with)->n_vocab, n = 20;
        int32_t ids[20];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 53 + 7) % V);
        const size_t bytes = (size_t)(n * V) * sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), *d = malloc(bytes);
        logits_both(with, ids, n, a, b);
        logits_both(without, ids, n, c, d);
        CHECK_MSG(!memcmp(a, c, bytes) && !memcmp(b, d, bytes),
                  "%s %s: stored panels (%d matrices and expert tensors) change "
                  "the logits",
                  preset, type, with->n_xpanels);
        CHECK_MSG(!memcmp(a, b, bytes), "%s %s: batch and step logits differ", preset, type);
        printf("%-12s %-6s stored panels (%d matrices and expert tensors): logits bitwise those of the rows\n", preset,
               type, with->n_xpanels);
        free(a), free(b), free(c), free(d);
    }
    rw_model_free(with);
    rw_model_free(without);
    rw_gguf_close(g);
    unlink(path);
}

int main(void) {
    check_preset("qwen3-tiny", "q8_0", false);
    check_preset("llama-tiny", "q4_k_m", false);
    check_preset("qwen35-tiny", "q8_0", false);
    check_preset("qwen35-tiny", "f16", true);
    /* the sliding-window, hybrid and MoE architectures */
    check_preset("gemma3-tiny", "q4_k_m", false);
    check_preset("gpt-oss-tiny", "mxfp4_moe", false);
    check_preset("nemotron_h-tiny", "q8_0", false);
    check_preset("lfm2-tiny", "q4_k_m", false);
    check_preset("qwen35moe-tiny", "q8_0", false);
    check_preset("qwen3next-tiny", "q4_k_m", false);
    check_preset("granitehybrid-tiny", "q8_0", false);
    rw_models_set_stored_panels(RW_STORED_PANELS_ALL); /* every matrix */
    check_stored_panels("llama-tiny", "q4_k_m");
    check_stored_panels("qwen35-tiny", "q4_k_m");
    check_stored_panels("gemma3-tiny", "q4_k_m");
    check_stored_panels("lfm2-tiny", "q5_k_m");
    check_stored_panels("nemotron_h-tiny", "q4_k_m");
    check_stored_panels("qwen3next-tiny", "q4_k_m");
    check_stored_panels("qwen35moe-tiny", "q5_k_m");
    check_stored_panels("granitehybrid-tiny", "q6_k");
    rw_models_set_stored_panels(RW_STORED_PANELS_EXPERTS); /* the default: the experts alone */
    check_stored_panels("qwen3next-tiny", "q4_k_m");
    check_stored_panels("llama-tiny", "q4_k_m");
    return rw_test_done();
}
