/* test_models_fixtures.c - every fixture architecture's forward passes against llama.cpp's
 * goldens in ../shared/fixtures (README.md there: tolerances; gemma3/README.md
 * for gemma3 F32's own).
 *
 * For every file: the batch pass (all prompt tokens in one call) against
 * logits_batch, the step pass (one token per call) against logits_seq, both
 * with an F32 KV cache, max and rms error within the file type's tolerance;
 * the top-1 token of each prompt row against prompt_top1; the greedy
 * continuation against greedy_ids for greedy_reliable_prefix tokens; batch
 * and step logits bitwise equal (the forward pass is batch-invariant); F32
 * files also the residual stream after every layer, and an F16 KV cache
 * within its looser tolerance.
 *
 * Then, with RW_NUMERICS_GGML (the ops follow ggml's vector code, and every
 * tier computes the AVX-512 tier's bits), the quantized files whose logits must equal llama.cpp's bit for bit in
 * both passes; the K-quant ones also with the default numerics. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler.h"
#include "kernels/matmul.h"
#include "harness.h"
#include "models/model.h"
#include "models/model_int.h"

typedef struct {
    const char *model, *type;
    double max, rms;     /* tolerance on logits */
    double top1_min;     /* fraction of prompt rows whose argmax must match */
} fixture;

/* Tolerances from ../shared/fixtures/README.md. Quantized files: top-1 must
 * agree on every row whose golden top1-top2 margin is at least TOP1_MARGIN
 * (rows closer to a tie may flip with one activation rounded the other way);
 * the fraction over all rows is printed and must reach top1_min. */
#define TOP1_MARGIN 0.25
static const fixture FIXTURES[] = {
    {"qwen3", "F32", 1e-3, 1e-4, 1.0},
    {"qwen3", "Q8_0", 0.6, 0.1, 0.97},
    {"llama", "F32", 1e-3, 1e-4, 1.0},
    {"llama", "Q8_0", 0.6, 0.1, 0.97},
    {"qwen3", "F16", 0.15, 0.03, 0.97},
    {"qwen3", "BF16", 0.25, 0.04, 0.97},
    {"qwen3", "Q4_0", 0.6, 0.1, 0.97},
    {"qwen3", "Q4_K_M", 1.0, 0.1, 0.97},
    {"qwen3", "Q5_K_M", 1.0, 0.1, 0.97},
    {"qwen3", "Q6_K", 1.0, 0.1, 0.97},
    /* Hybrid (gated DeltaNet + gated attention). F32 and the K-quant files
     * meet the table (with the default numerics the K-quants sum in ggml's
     * order: their logits equal llama.cpp's one-token-at-a-time ones). The
     * Q8_0 and Q4_0 files are held to the table's max but a looser rms
     * (0.12 instead of 0.1) and top-1 (0.93): the default numerics sum those
     * types in another order than ggml's, the last-bit differences now and
     * then round an activation quant the other way, and the recurrent state
     * carries that on (rms 0.060-0.071, top-1 0.969-0.977;
     * RW_NUMERICS_GGML makes them exact, checked at the end). A real bug
     * moves rms to whole units. */
    {"qwen35", "F32", 1e-3, 1e-4, 1.0},
    {"qwen35", "Q8_0", 0.6, 0.12, 0.93},
    {"qwen35", "Q4_0", 0.6, 0.12, 0.93},
    {"qwen35", "Q5_K_M", 1.0, 0.1, 0.97},
    {"qwen35", "Q4_K_M", 1.0, 0.1, 0.97},
    {"qwen35", "Q6_K", 1.0, 0.1, 0.97},
    {"qwen35moe", "F32", 1e-3, 1e-4, 1.0},
    {"qwen35moe", "Q8_0", 0.6, 0.1, 0.97},
    {"qwen3next", "F32", 1e-3, 1e-4, 1.0},
    {"qwen3next", "Q8_0", 0.6, 0.1, 0.97},
    {"granitehybrid", "F32", 1e-3, 1e-4, 1.0},
    /* granitehybrid Q8_0: 121 of 128 rows agree, every differing row has a
     * golden top1-top2 margin below TOP1_MARGIN (near ties: the README gives
     * this file a greedy reliable prefix of only 3); held to 0.93 for now. */
    {"granitehybrid", "Q8_0", 0.6, 0.1, 0.93},
    /* lfm2 (short conv + attention). Q8_0: our batch and step passes both
     * give llama.cpp's one-token-at-a-time logits bit for bit; its batch
     * pass is 0.245 max / 0.029 rms from those (a rounding tie, README). */
    {"lfm2", "F32", 1e-3, 1e-4, 1.0},
    {"lfm2", "Q8_0", 0.6, 0.1, 0.97},
    /* Nemotron-H: Mamba2, attention and squared-ReLU MLP blocks; its layer
     * goldens are the block outputs (nemotron_h_block_out) */
    {"nemotron_h", "F32", 1e-3, 1e-4, 1.0},
    {"nemotron_h", "Q8_0", 0.6, 0.1, 0.97},
    /* gemma3 F32: llama.cpp's GELU rounds its input to a half and reads an
     * fp16 table, so its own batch and one-token paths differ by 3.5e-3 /
     * 4.9e-4; the file's README gives max 3e-2, rms 5e-3 for logits and
     * 0.05*(1+|ref|), rms 2e-2 for the layers (post-norm gains of about 8;
     * LAYER_TOL below). rw_geglu uses the same table: measured 3.9e-3 /
     * 4.6e-4. The quantized files as the table. */
    {"gemma3", "F32", 3e-2, 5e-3, 1.0},
    {"gemma3", "Q8_0", 0.6, 0.1, 0.97},
    {"gemma3", "Q4_K_M", 1.0, 0.1, 0.97},
};

/* F32 layer outputs: |d| <= abs + rel*|ref| everywhere and rms <= rms;
 * 1e-3 + 1e-4*|ref|, 1e-4 unless the architecture's README says otherwise
 * (gemma3: its fp16 GELU, above). */
typedef struct {
    const char *model;
    double abs, rel, rms;
} layer_tol;
static const layer_tol LAYER_TOL[] = {{"gemma3", 0.05, 0.05, 2e-2}};

static layer_tol layer_tolerance(const char *model) {
    for (size_t i = 0; i < sizeof LAYER_TOL / sizeof LAYER_TOL[0]; i++)
        if (!strcmp(LAYER_TOL[i].model, model)) return LAYER_TOL[i];
    return (layer_tol){model, 1e-3, 1e-4, 1e-4};
}

typedef struct {
    double max, rms;
} diff;

static diff compare(const float *a, const float *b, size_t n) {
    diff d = {0, 0};
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= d.max)) d.max = e; /* NaN propagates */
        d.rms += e * e;
    }
    d.rms = sqrt(d.rms / (double)n);
    return d;
}

static float *load_f32(const char *rel, size_t n) {
    size_t size = 0;
    float *p = rw_test_read_file(rw_test_fixture_path(rel), &size);
    if (p && size != n * sizeof(float)) {
        free(p);
        return NULL;
    }
    return p;
}

/* Runs ids through a fresh sequence, in one call (step = false) or one call
 * per token, writing [n][n_vocab] logits. Returns the sequence (caller frees). */
static rw_model_seq *run(rw_model *m, rw_kv_type kv, const int32_t *ids, int64_t n, bool step, float *logits,
                         float *layers) {
    rw_error err = {0};
    rw_model_seq *s = NULL;
    rw_status st = rw_model_seq_new(m, kv, 0, &s, &err);
    CHECK_MSG(st == RW_OK, "%s", err.msg);
    if (st) return NULL;
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    for (int64_t t = 0; t < n; t += step ? 1 : n) {
        rw_forward_args a = {.tokens = ids + t, .n = step ? 1 : n, .logits = logits + t * V, .all_logits = true,
                             .layer_out = step ? NULL : layers};
        st = rw_model_forward(m, s, &a, &err);
        CHECK_MSG(st == RW_OK, "%s", err.msg);
        if (st) break;
    }
    return s;
}

static void check_file(const fixture *fx) {
    char rel[256], name[64];
    snprintf(name, sizeof name, "%s-%s", fx->model, fx->type);
    snprintf(rel, sizeof rel, "%s/%s.json", fx->model, name);
    json_error_t jerr;
    json_t *js = json_load_file(rw_test_fixture_path(rel), 0, &jerr);
    CHECK_MSG(js != NULL, "%s: %s", rel, jerr.text);
    if (!js) return;
    snprintf(rel, sizeof rel, "%s/%s.gguf", fx->model, name);
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    const bool f32 = !strcmp(fx->type, "F32");
    rw_status st = rw_gguf_open(rw_test_fixture_path(rel), &g, &err);
    if (st == RW_OK) st = rw_model_load(g, &m, &err);
    CHECK_MSG(st == RW_OK, "%s: %s", name, err.msg);
    if (st) goto out;
    const rw_model_hparams *hp = rw_model_get_hparams(m);
    json_t *jids = json_object_get(js, "prompt_ids");
    const int64_t n = (int64_t)json_array_size(jids), V = hp->n_vocab;
    CHECK_EQ_INT(V, json_integer_value(json_object_get(js, "n_vocab")));
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
    const size_t nl = (size_t)(n * V);
    float *batch = malloc(nl * sizeof(float)), *step = malloc(nl * sizeof(float));
    float *layers = f32 ? malloc((size_t)hp->n_layer * (size_t)n * (size_t)hp->n_embd * sizeof(float)) : NULL;
    snprintf(rel, sizeof rel, "%s/%s.logits_batch.f32", fx->model, name);
    float *gold_batch = load_f32(rel, nl);
    snprintf(rel, sizeof rel, "%s/%s.logits_seq.f32", fx->model, name);
    float *gold_seq = load_f32(rel, nl);
    CHECK_MSG(gold_batch && gold_seq, "%s: goldens missing", name);

    rw_model_seq *sb = run(m, RW_KV_F32, ids, n, false, batch, layers);
    rw_model_seq *ss = run(m, RW_KV_F32, ids, n, true, step, NULL);
    if (gold_batch && gold_seq && sb && ss) {
        diff db = compare(batch, gold_batch, nl), ds = compare(step, gold_seq, nl);
        printf("%-14s batch max %.3g rms %.3g | step max %.3g rms %.3g\n", name, db.max, db.rms, ds.max, ds.rms);
        CHECK_MSG(db.max <= fx->max && db.rms <= fx->rms, "%s batch: max %g rms %g", name, db.max, db.rms);
        CHECK_MSG(ds.max <= fx->max && ds.rms <= fx->rms, "%s step: max %g rms %g", name, ds.max, ds.rms);
        /* batch invariance: every row bitwise equal */
        CHECK_MSG(memcmp(batch, step, nl * sizeof(float)) == 0, "%s: batch and step logits differ", name);
        /* top-1 per prompt row */
        json_t *top = json_object_get(js, "prompt_top1"), *margin = json_object_get(js, "prompt_top1_margin");
        int64_t agree = 0;
        for (int64_t t = 0; t < n; t++) {
            const bool same = rw_argmax(batch + t * V, V) == json_integer_value(json_array_get(top, (size_t)t));
            const double mg = json_real_value(json_array_get(margin, (size_t)t));
            agree += same;
            CHECK_MSG(same || (!f32 && mg < TOP1_MARGIN), "%s: row %lld top-1 differs (golden margin %g)", name,
                      (long long)t, mg);
        }
        printf("%-14s top-1 agrees on %lld of %lld rows\n", name, (long long)agree, (long long)n);
        CHECK_MSG((double)agree >= fx->top1_min * (double)n, "%s: top-1 agrees on %lld of %lld rows", name,
                  (long long)agree, (long long)n);
        /* greedy continuation from the batch state */
        json_t *greedy = json_object_get(js, "greedy_ids");
        const int64_t reliable = json_integer_value(json_object_get(js, "greedy_reliable_prefix"));
        float *row = malloc((size_t)V * sizeof(float));
        memcpy(row, batch + (n - 1) * V, (size_t)V * sizeof(float));
        for (int64_t k = 0; k < reliable; k++) {
            int32_t tok = rw_argmax(row, V);
            CHECK_MSG(tok == json_integer_value(json_array_get(greedy, (size_t)k)), "%s: greedy token %lld is %d, expected %lld",
                      name, (long long)k, (int)tok, (long long)json_integer_value(json_array_get(greedy, (size_t)k)));
            if (tok != json_integer_value(json_array_get(greedy, (size_t)k))) break;
            rw_forward_args a = {.tokens = &tok, .n = 1, .logits = row};
            st = rw_model_forward(m, sb, &a, &err);
            CHECK_MSG(st == RW_OK, "%s", err.msg);
            if (st) break;
        }
        free(row);
    }
    if (f32 && layers) {
        snprintf(rel, sizeof rel, "%s/%s.layers.f32", fx->model, name);
        const size_t ne = (size_t)hp->n_layer * (size_t)n * (size_t)hp->n_embd;
        float *gold = load_f32(rel, ne);
        CHECK_MSG(gold != NULL, "%s missing", rel);
        if (gold) {
            size_t bad = 0;
            diff d = compare(layers, gold, ne);
            const layer_tol lt = layer_tolerance(fx->model);
            for (size_t i = 0; i < ne; i++) bad += !(fabs((double)layers[i] - gold[i]) <= lt.abs + lt.rel * fabs(gold[i]));
            printf("%-14s layers max %.3g rms %.3g\n", name, d.max, d.rms);
            CHECK_MSG(bad == 0 && d.rms <= lt.rms, "%s layers: %zu values out of tolerance, rms %g", name, bad, d.rms);
        }
        free(gold);
        /* F16 KV cache: llama.cpp's own F16-KV runs differ by up to 1e-2 */
        rw_model_seq *s16 = run(m, RW_KV_F16, ids, n, false, step, NULL);
        if (s16 && gold_batch) {
            diff d = compare(step, gold_batch, nl);
            printf("%-14s kv f16 max %.3g rms %.3g\n", name, d.max, d.rms);
            CHECK_MSG(d.max <= 3e-2 && d.rms <= 5e-3, "%s kv f16: max %g rms %g", name, d.max, d.rms);
        }
        rw_model_seq_free(s16);
    }
    rw_model_seq_free(sb);
    rw_model_seq_free(ss);
    free(gold_batch);
    free(gold_seq);
    free(batch);
    free(step);
    free(layers);
    free(ids);
out:
    rw_model_free(m);
    rw_gguf_close(g);
    json_decref(js);
}

/* logits of every prompt position of a fixture file, one forward pass */
static float *file_logits(const char *rel, int64_t *n_out, int64_t *v_out) {
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    float *out = NULL;
    if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err) || rw_model_load(g, &m, &err)) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
    } else {
        size_t size;
        char *txt = rw_test_read_file(rw_test_fixture_path("qwen3next/qwen3next.prompt.ids"), &size);
        int32_t ids[1024];
        int64_t n = 0;
        for (char *p = txt; p && *p && n < 1024;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            ids[n++] = (int32_t)v;
            p = e;
        }
        free(txt);
        const int64_t V = rw_model_get_hparams(m)->n_vocab;
        out = malloc((size_t)(n * V) * sizeof *out);
        rw_model_seq *s = run(m, RW_KV_F32, ids, n, false, out, NULL);
        rw_model_seq_free(s);
        *n_out = n;
        *v_out = V;
    }
    rw_model_free(m);
    rw_gguf_close(g);
    return out;
}

/* Which files sum their 32-block matrices in ggml's order by default: those
 * whose K-quant weights outweigh their Q8_0 / Q4_0 / Q5_0 ones. */
static void check_order_policy(void) {
    static const struct {
        const char *rel;
        bool ggml;
    } files[] = {{"qwen35/qwen35-Q4_K_M.gguf", true}, {"qwen3/qwen3-Q6_K.gguf", true},
                 {"qwen35/qwen35-Q8_0.gguf", false}, {"qwen3/qwen3-Q4_0.gguf", false},
                 {"qwen35/qwen35-F32.gguf", false}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        rw_error err;
        rw_gguf *g = NULL;
        CHECK_MSG(rw_gguf_open(rw_test_fixture_path(files[i].rel), &g, &err) == RW_OK, "%s", err.msg);
        if (g) CHECK_MSG(rw_models__prefers_ggml_order(g) == files[i].ggml, "%s: order policy", files[i].rel);
        rw_gguf_close(g);
    }
}

/* A K-quant file with a few Q8_0 matrices (qwen35-Q4_K_M with its layer-0
 * and layer-3 FFN down matrices requantized, as llama-quantize's fallbacks
 * would be): under the default numerics the whole model sums in ggml's
 * order, so its logits equal those under RW_NUMERICS_GGML bit for bit. */
static void check_mixed_file_order(void) {
    rw_error err = {0};
    rw_gguf *src = NULL;
    if (rw_gguf_open(rw_test_fixture_path("qwen35/qwen35-Q4_K_M.gguf"), &src, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    rw_gguf_writer *w = rw_gguf_writer_new();
    for (size_t i = 0; i < rw_gguf_n_kv(src); i++) rw_gguf_writer_add_kv(w, rw_gguf_kv_at(src, i)->key,
                                                                        &rw_gguf_kv_at(src, i)->value, &err);
    void *requant[2] = {NULL, NULL};
    int nr = 0;
    for (size_t i = 0; i < rw_gguf_n_tensors(src); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(src, i);
        const bool fallback = !strcmp(t->name, "blk.0.ffn_down.weight") || !strcmp(t->name, "blk.3.ffn_down.weight");
        if (!fallback) {
            rw_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL, &err);
            continue;
        }
        const int64_t n_in = (int64_t)t->ne[0], n_out = (int64_t)t->ne[1];
        uint64_t src_row, dst_row;
        rw_dtype_row_bytes(t->type, n_in, &src_row);
        rw_dtype_row_bytes(RW_TYPE_Q8_0, n_in, &dst_row);
        float *row = malloc(sizeof(float) * (size_t)n_in);
        uint8_t *q = malloc((size_t)(dst_row * (uint64_t)n_out)); /* freed after the write */
        for (int64_t o = 0; o < n_out; o++) {
            CHECK(rw_dequantize_row(t->type, (const uint8_t *)t->data + o * src_row, row, n_in) == RW_OK);
            CHECK(rw_quantize_row(RW_TYPE_Q8_0, row, q + o * dst_row, n_in) == RW_OK);
        }
        free(row);
        requant[nr++] = q;
        rw_gguf_writer_add_tensor(w, t->name, RW_TYPE_Q8_0, t->n_dims, t->ne, q, NULL, NULL, &err);
    }
    CHECK_EQ_INT(nr, 2);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    CHECK_MSG(rw_gguf_writer_write_stream(w, f, &err) == RW_OK, "%s", err.msg);
    fclose(f);
    rw_gguf_writer_free(w);
    free(requant[0]), free(requant[1]);
    rw_gguf_close(src);

    rw_gguf *g = NULL;
    CHECK_MSG(rw_gguf_open_memory(buf, size, &g, &err) == RW_OK, "%s", err.msg);
    CHECK(g && rw_models__prefers_ggml_order(g));
    static const int32_t ids[] = {3, 141, 59, 265, 358, 97, 93, 238, 46, 264, 33, 83};
    const int64_t n = sizeof ids / sizeof ids[0];
    float *logits[2] = {NULL, NULL};
    int64_t nl = 0;
    const rw_numerics modes[2] = {RW_NUMERICS_AUTO, RW_NUMERICS_GGML};
    for (int k = 0; k < 2 && g; k++) {
        rw_numerics_set(modes[k]); /* before the load, which repacks the weights */
        rw_model *m = NULL;
        CHECK_MSG(rw_model_load(g, &m, &err) == RW_OK, "%s", err.msg);
        if (!m) break;
        nl = n * rw_model_get_hparams(m)->n_vocab;
        logits[k] = malloc(sizeof(float) * (size_t)nl);
        rw_model_seq_free(run(m, RW_KV_F32, ids, n, false, logits[k], NULL));
        rw_model_free(m);
    }
    rw_numerics_set(RW_NUMERICS_AUTO);
    if (logits[0] && logits[1])
        CHECK_MSG(!memcmp(logits[0], logits[1], sizeof(float) * (size_t)nl),
                  "a K-quant file with Q8_0 matrices: default numerics differ from ggml's");
    free(logits[0]), free(logits[1]);
    rw_gguf_close(g);
    free(buf);
}

/* qwen3next's legacy layout (one ssm_in) gives exactly the standard file's logits. */
static void check_qwen3next_legacy(void) {
    int64_t n1 = 0, v1 = 0, n2 = 0, v2 = 0;
    float *a = file_logits("qwen3next/qwen3next-Q8_0.gguf", &n1, &v1);
    float *b = file_logits("qwen3next/qwen3next-Q8_0-ssm_in.gguf", &n2, &v2);
    CHECK(a && b && n1 == n2 && v1 == v2 && n1 > 0);
    if (a && b && n1 == n2 && v1 == v2)
        CHECK_MSG(!memcmp(a, b, (size_t)(n1 * v1) * sizeof *a), "legacy ssm_in layout gives other logits");
    free(a);
    free(b);
}

/* Under numerics mode nm the file gives llama.cpp's logits exactly. */
static void check_exact(const char *model, const char *type, rw_numerics nm) {
    char rel[256], name[64];
    const char *mode = nm == RW_NUMERICS_GGML ? "ggml" : "default";
    snprintf(name, sizeof name, "%s-%s", model, type);
    snprintf(rel, sizeof rel, "%s/%s.gguf", model, name);
    rw_numerics_set(nm); /* before the load, which repacks the weights */
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_status st = rw_gguf_open(rw_test_fixture_path(rel), &g, &err);
    if (st == RW_OK) st = rw_model_load(g, &m, &err);
    CHECK_MSG(st == RW_OK, "%s: %s", name, err.msg);
    snprintf(rel, sizeof rel, "%s/%s.prompt.ids", model, model);
    int64_t n = 0;
    int32_t *ids = NULL;
    FILE *f = fopen(rw_test_fixture_path(rel), "r");
    CHECK_MSG(f != NULL, "%s missing", rel);
    for (int v; f && fscanf(f, "%d", &v) == 1; n++) {
        ids = realloc(ids, (size_t)(n + 1) * sizeof *ids);
        ids[n] = v;
    }
    if (f) fclose(f);
    if (st == RW_OK && n > 0) {
        const size_t nl = (size_t)(n * rw_model_get_hparams(m)->n_vocab);
        float *batch = malloc(nl * sizeof(float)), *step = malloc(nl * sizeof(float));
        snprintf(rel, sizeof rel, "%s/%s.logits_seq.f32", model, name);
        float *gold = load_f32(rel, nl);
        rw_model_seq *sb = run(m, RW_KV_F32, ids, n, false, batch, NULL);
        rw_model_seq *ss = run(m, RW_KV_F32, ids, n, true, step, NULL);
        if (gold && sb && ss) {
            diff db = compare(batch, gold, nl), ds = compare(step, gold, nl);
            printf("%-14s %s numerics: batch max %.3g | step max %.3g\n", name, mode, db.max, ds.max);
            CHECK_MSG(db.max == 0 && ds.max == 0, "%s %s numerics: batch max %g step max %g", name, mode, db.max,
                      ds.max);
        }
        rw_model_seq_free(sb);
        rw_model_seq_free(ss);
        free(batch), free(step), free(gold);
    }
    free(ids);
    rw_model_free(m);
    rw_gguf_close(g);
    rw_numerics_set(RW_NUMERICS_AUTO);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    if (!rw_test_sanitized()) check_qwen3next_legacy();
    check_order_policy();
    if (!rw_test_sanitized()) check_mixed_file_order();
    const size_t n = sizeof FIXTURES / sizeof FIXTURES[0];
    /* RW_FIXTURE_MODEL=lfm2 (say) checks that model's files only (in the
     * exact checks below too), also under the sanitizers, which otherwise
     * check one F32 and one quantized file. */
    const char *only = getenv("RW_FIXTURE_MODEL");
    for (size_t i = 0, done = 0; i < n; i++) {
        if (only ? strcmp(FIXTURES[i].model, only) != 0 : rw_test_sanitized() && done >= 2) continue;
        check_file(&FIXTURES[i]);
        done++;
    }
    /* Every quantized file whose matmuls have a ggml-order kernel, against
     * llama.cpp's one-token-at-a-time logits (its batch pass differs from
     * those in the last bits for some files: its attention runs other
     * kernels there; for the others both goldens are the same). */
    if (!rw_test_sanitized()) {
        static const char *const exact[][2] = {
            {"llama", "Q8_0"},    {"qwen3", "Q8_0"},     {"qwen3", "Q4_0"},      {"qwen3", "Q4_K_M"},
            {"qwen3", "Q5_K_M"},  {"qwen3", "Q6_K"},     {"qwen35", "Q8_0"},     {"qwen35", "Q4_0"},
            {"qwen35", "Q4_K_M"}, {"qwen35", "Q5_K_M"},  {"qwen35", "Q6_K"},     {"qwen35moe", "Q8_0"},
            {"qwen3next", "Q8_0"},  {"granitehybrid", "Q8_0"}, {"lfm2", "Q8_0"},  {"nemotron_h", "Q8_0"},
            {"gemma3", "Q8_0"}, {"gemma3", "Q4_K_M"}};
        for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
            if (only && strcmp(exact[i][0], only) != 0) continue;
            check_exact(exact[i][0], exact[i][1], RW_NUMERICS_GGML);
            /* the default (auto) numerics sum the K-quants in ggml's order too */
            if (strchr(exact[i][1], 'K')) check_exact(exact[i][0], exact[i][1], RW_NUMERICS_AUTO);
        }
    }
    return rw_test_done();
}
