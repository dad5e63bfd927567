/* test_mtp_fixtures.c - Qwen3.5's MTP block against llama.cpp's goldens in
 * ../shared/fixtures/qwen35mtp (README.md there).
 *
 * For the F32 and Q8_0 files (F32 KV cache, as the goldens):
 *   - the trunk's logits, whole prompt in one pass, against logits_batch
 *     (the MTP block does not change the trunk);
 *   - the hidden rows the sequence stores for the block against h_nextn;
 *   - the block's logits of all 64 MTP positions in one pass against
 *     mtp_logits, and one position per pass (trunk and block interleaved,
 *     as drafting runs them) against mtp_logits_seq; both within the qwen35
 *     tolerance of the file type, and bitwise equal to each other and to a
 *     pass split 5 / 27 / 32 (batch invariance);
 *   - with RW_NUMERICS_GGML on the AVX-512 tier, Q8_0 bitwise equal to
 *     llama.cpp's one-position-at-a-time goldens (as the trunk's);
 *   - the block's KV travels with the sequence: a clone, a state buffer
 *     round trip and a rewind-then-catch-up give the same logits bitwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/matmul.h"
#include "models/model.h"

#define NP 64

typedef struct {
    double max, rms;
} diff;

static diff compare(const float *a, const float *b, size_t n) {
    diff d = {0, 0};
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= d.max)) d.max = e;
        d.rms += e * e;
    }
    d.rms = sqrt(d.rms / (double)n);
    return d;
}

static float *load_f32(const char *name, const char *suffix, size_t n) {
    char rel[256];
    snprintf(rel, sizeof rel, "qwen35mtp/%s.%s", name, suffix);
    size_t size = 0;
    float *p = rw_test_read_file(rw_test_fixture_path(rel), &size);
    CHECK_MSG(p && size == n * sizeof(float), "%s: missing or wrong size", rel);
    if (p && size != n * sizeof(float)) {
        free(p);
        return NULL;
    }
    return p;
}

static bool load_ids(int32_t *ids) {
    size_t size = 0;
    char *txt = rw_test_read_file(rw_test_fixture_path("qwen35mtp/qwen35mtp.prompt.ids"), &size);
    if (!txt) return false;
    char *p = txt;
    int n = 0;
    while (n < NP) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p) break;
        ids[n++] = (int32_t)v;
        p = e;
    }
    free(txt);
    return n == NP;
}

/* The block's logits of MTP positions 0..NP-1 of s (after the trunk saw the
 * whole prompt), in calls of the given sizes. */
static void mtp_rows(rw_model *m, rw_model_seq *s, const int32_t *ids, const int *split, float *out, int64_t V) {
    rw_error err = {0};
    for (int at = 0, i = 0; at < NP; at += split[i++]) {
        rw_mtp_item it = {.seq = s, .tokens = ids + at, .n = split[i], .logits = out + (int64_t)at * V, .all_logits = true};
        rw_status st = rw_model_mtp_forward(m, &it, 1, NULL, &err);
        CHECK_MSG(st == RW_OK, "%s", err.msg);
        if (st) return;
    }
}

static void check_file(const char *type, double tol_max, double tol_rms, bool exact) {
    char name[64], rel[128];
    snprintf(name, sizeof name, "qwen35mtp-%s", type);
    snprintf(rel, sizeof rel, "qwen35mtp/%s.gguf", name);
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    int32_t ids[NP];
    CHECK(load_ids(ids));
    rw_status st = rw_gguf_open(rw_test_fixture_path(rel), &g, &err);
    if (!st) st = rw_model_load(g, &m, &err);
    CHECK_MSG(st == RW_OK, "%s: %s", name, err.msg);
    if (st) goto out;
    CHECK(rw_model_mtp_available(m));
    CHECK_EQ_INT(rw_model_get_hparams(m)->n_layer, 4);
    {   /* not under live sequences: theirs would lack the block's states */
        rw_model_seq *early = NULL;
        CHECK(!rw_model_seq_new(m, RW_KV_F32, 0, &early, &err));
        CHECK(rw_model_enable_mtp(m, &err) == RW_ERR_INVALID_ARG);
        CHECK(!rw_model_mtp_enabled(m));
        rw_model_seq_free(early);
    }
    if ((st = rw_model_enable_mtp(m, &err))) {
        CHECK_MSG(0, "%s", err.msg);
        goto out;
    }
    const int64_t V = rw_model_get_hparams(m)->n_vocab, E = rw_model_get_hparams(m)->n_embd;
    float *gold_main = load_f32(name, "logits_batch.f32", (size_t)NP * V);
    float *gold_h = load_f32(name, "h_nextn.f32", (size_t)NP * E);
    float *gold_b = load_f32(name, "mtp_logits.f32", (size_t)NP * V);
    float *gold_s = load_f32(name, "mtp_logits_seq.f32", (size_t)NP * V);
    float *main_l = malloc((size_t)NP * V * sizeof(float)), *h = malloc((size_t)NP * E * sizeof(float));
    float *lb = malloc((size_t)NP * V * sizeof(float)), *ls = malloc((size_t)NP * V * sizeof(float));
    float *lx = malloc((size_t)NP * V * sizeof(float));
    rw_model_seq *sb = NULL, *ss = NULL, *sc = NULL;
    if (!gold_main || !gold_h || !gold_b || !gold_s || !main_l || !h || !lb || !ls || !lx) goto done;

    /* batch: the trunk over the prompt, then the block over all positions */
    if ((st = rw_model_seq_new(m, RW_KV_F32, 0, &sb, &err))) goto fail;
    rw_forward_args a = {.tokens = ids, .n = NP, .logits = main_l, .all_logits = true};
    if ((st = rw_model_forward(m, sb, &a, &err))) goto fail;
    CHECK_EQ_INT(rw_model_seq_mtp_length(sb), 0);
    diff d = compare(main_l, gold_main, (size_t)NP * V);
    printf("%s trunk logits: max %.3g rms %.3g\n", name, d.max, d.rms);
    CHECK_MSG(d.max <= tol_max && d.rms <= tol_rms, "%s trunk: max %g rms %g", name, d.max, d.rms);
    for (int64_t p = 0; p < NP; p++)
        if ((st = rw_model_seq_mtp_hidden(sb, p, h + p * E, &err))) goto fail;
    d = compare(h, gold_h, (size_t)NP * E);
    printf("%s h_nextn: max %.3g rms %.3g\n", name, d.max, d.rms);
    CHECK_MSG(d.max <= tol_max && d.rms <= tol_rms, "%s h_nextn: max %g rms %g", name, d.max, d.rms);
    const int whole[] = {NP};
    mtp_rows(m, sb, ids, whole, lb, V);
    CHECK_EQ_INT(rw_model_seq_mtp_length(sb), NP);
    d = compare(lb, gold_b, (size_t)NP * V);
    printf("%s MTP logits, one pass: max %.3g rms %.3g\n", name, d.max, d.rms);
    CHECK_MSG(d.max <= tol_max && d.rms <= tol_rms, "%s MTP batch: max %g rms %g", name, d.max, d.rms);

    /* one position per pass, trunk and block interleaved as drafting runs
     * them: position k of the block right after the trunk saw x_{k-1} and
     * knows x_k (the pending token) */
    if ((st = rw_model_seq_new(m, RW_KV_F32, 0, &ss, &err))) goto fail;
    for (int k = 0; k < NP; k++) {
        rw_mtp_item it = {.seq = ss, .tokens = ids + k, .n = 1, .logits = ls + (int64_t)k * V};
        if ((st = rw_model_mtp_forward(m, &it, 1, NULL, &err))) goto fail;
        rw_forward_args a1 = {.tokens = ids + k, .n = 1};
        if ((st = rw_model_forward(m, ss, &a1, &err))) goto fail;
    }
    d = compare(ls, gold_s, (size_t)NP * V);
    printf("%s MTP logits, one position per pass: max %.3g rms %.3g\n", name, d.max, d.rms);
    CHECK_MSG(d.max <= tol_max && d.rms <= tol_rms, "%s MTP seq: max %g rms %g", name, d.max, d.rms);
    CHECK_MSG(!memcmp(lb, ls, (size_t)NP * V * sizeof(float)), "%s: MTP batch and step logits differ", name);
    if (exact) {
        CHECK_MSG(!memcmp(ls, gold_s, (size_t)NP * V * sizeof(float)), "%s: MTP logits not bitwise llama.cpp's", name);
        CHECK_MSG(!memcmp(h, gold_h, (size_t)NP * E * sizeof(float)), "%s: h_nextn not bitwise llama.cpp's", name);
    }

    /* another split; the block's KV rewinds and catches up exactly; it
     * clones and saves with the sequence */
    rw_model_seq_free(sb), sb = NULL;
    if ((st = rw_model_seq_new(m, RW_KV_F32, 0, &sb, &err)) || (st = rw_model_forward(m, sb, &a, &err))) goto fail;
    const int split[] = {5, 27, 32};
    mtp_rows(m, sb, ids, split, lx, V);
    CHECK_MSG(!memcmp(lb, lx, (size_t)NP * V * sizeof(float)), "%s: MTP logits depend on the split", name);
    if ((st = rw_model_seq_clone(sb, &sc, &err))) goto fail;
    CHECK_EQ_INT(rw_model_seq_mtp_length(sc), NP);
    /* the trunk back to 40: the block's KV follows it (it is at 64) */
    if ((st = rw_model_seq_rewind(sc, 40, NULL, &err))) goto fail;
    CHECK_EQ_INT(rw_model_seq_mtp_length(sc), 40);
    if ((st = rw_model_seq_mtp_rewind(sc, 17, &err))) goto fail;
    uint8_t *buf = NULL;
    size_t len = 0;
    if ((st = rw_model_seq_save_buffer(sc, &buf, &len, &err))) goto fail;
    rw_model_seq_free(sc), sc = NULL;
    if ((st = rw_model_seq_new(m, RW_KV_F32, 0, &sc, &err)) || (st = rw_model_seq_load_buffer(sc, buf, len, &err))) {
        free(buf);
        goto fail;
    }
    free(buf);
    CHECK_EQ_INT(rw_model_seq_length(sc), 40);
    CHECK_EQ_INT(rw_model_seq_mtp_length(sc), 17);
    rw_forward_args a2 = {.tokens = ids + 40, .n = NP - 40};
    if ((st = rw_model_forward(m, sc, &a2, &err))) goto fail;
    memset(lx, 0, (size_t)NP * V * sizeof(float));
    rw_mtp_item it = {.seq = sc, .tokens = ids + 17, .n = NP - 17, .logits = lx + 17 * V, .all_logits = true};
    if ((st = rw_model_mtp_forward(m, &it, 1, NULL, &err))) goto fail;
    CHECK_MSG(!memcmp(lb + 17 * V, lx + 17 * V, (size_t)(NP - 17) * V * sizeof(float)),
              "%s: MTP logits after rewind / state buffer / catch-up differ", name);
    /* a token that is not the sequence's is refused (the KV stays a function of the tokens) */
    if ((st = rw_model_seq_mtp_rewind(sc, 30, &err))) goto fail;
    int32_t wrong = (ids[30] + 1) % (int32_t)V;
    rw_mtp_item bad = {.seq = sc, .tokens = &wrong, .n = 1};
    CHECK(rw_model_mtp_forward(m, &bad, 1, NULL, &err) == RW_ERR_INVALID_ARG);
    CHECK_EQ_INT(rw_model_seq_mtp_length(sc), 30);
    goto done;
fail:
    CHECK_MSG(st == RW_OK, "%s: %s", name, err.msg);
done:
    rw_model_seq_free(sb), rw_model_seq_free(ss), rw_model_seq_free(sc);
    free(gold_main), free(gold_h), free(gold_b), free(gold_s), free(main_l), free(h), free(lb), free(ls), free(lx);
out:
    rw_model_free(m);
    rw_gguf_close(g);
}

/* A model without the block refuses it; with it off, a sequence has none. */
static void check_without(void) {
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_status st = rw_gguf_open(rw_test_fixture_path("qwen35/qwen35-F32.gguf"), &g, &err);
    if (!st) st = rw_model_load(g, &m, &err);
    CHECK_MSG(st == RW_OK, "%s", err.msg);
    if (!st) {
        CHECK(!rw_model_mtp_available(m));
        CHECK(rw_model_enable_mtp(m, &err) == RW_ERR_UNSUPPORTED);
    }
    rw_model_free(m);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    check_without();
    check_file("F32", 1e-3, 1e-4, false);
    /* Q8_0 under the default numerics: the qwen35 Q8_0 tolerance */
    check_file("Q8_0", 0.6, 0.12, false);
    if (!rw_test_sanitized() && rw_kernel_tier_is_avx512(rw_kernel_tier_current())) {
        rw_numerics_set(RW_NUMERICS_GGML);
        check_file("Q8_0", 0, 0, true);
        rw_numerics_set(RW_NUMERICS_AUTO);
    }
    return rw_test_done();
}
