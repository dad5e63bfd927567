/* test_quant_models.c - every tensor of the quantized qwen3 fixtures,
 * dequantized, is close to the same tensor of qwen3-F32.gguf.
 *
 * The zoo test proves the block decoding bit for bit on synthetic data; this
 * one runs it on the real model files, where a wrong block scale, a swapped
 * nibble order or a misread type id would show as a relative RMSE near 1
 * instead of the few percent quantization costs. The bound per type is a
 * little above the quantization error of its bit width (about 2^-bits of a
 * block's range), far below what a decoding mistake gives. */
#include <math.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "kernels/quant.h"

/* Largest allowed |deq - f32|_rms / |f32|_rms for a tensor of type t. */
static double rel_rmse_bound(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: return 0;
    case RW_TYPE_F16: return 1e-3;
    case RW_TYPE_BF16: return 8e-3;
    case RW_TYPE_Q8_0: return 0.01;
    case RW_TYPE_Q6_K: return 0.03;
    case RW_TYPE_Q5_0: case RW_TYPE_Q5_1: case RW_TYPE_Q5_K: return 0.06;
    case RW_TYPE_Q4_0: case RW_TYPE_Q4_1: case RW_TYPE_Q4_K: return 0.12;
    case RW_TYPE_Q3_K: return 0.25;
    default: return 0.5;
    }
}

/* Dequantizes all of tensor t into a new array (caller frees); NULL on error. */
static float *dequantize_tensor(const rw_gguf_tensor *t, uint64_t *count) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) n *= t->ne[d];
    uint64_t cols = t->ne[0], row_bytes;
    if (!rw_dtype_row_bytes(t->type, cols, &row_bytes)) return NULL;
    float *out = malloc(n * sizeof *out);
    if (!out) return NULL;
    for (uint64_t r = 0; r < n / cols; r++) {
        if (rw_dequantize_row(t->type, (const uint8_t *)t->data + r * row_bytes, out + r * cols, (int64_t)cols) != RW_OK) {
            free(out);
            return NULL;
        }
    }
    *count = n;
    return out;
}

static void check_file(const rw_gguf *ref, const char *quant) {
    char rel[128];
    snprintf(rel, sizeof rel, "qwen3/qwen3-%s.gguf", quant);
    rw_gguf *g;
    rw_error err;
    if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err) != RW_OK) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
        return;
    }
    CHECK_EQ_INT((long long)rw_gguf_n_tensors(g), (long long)rw_gguf_n_tensors(ref));
    double worst = 0;
    const char *worst_name = "";
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        const rw_gguf_tensor *r = rw_gguf_find_tensor(ref, t->name);
        CHECK_MSG(r && r->type == RW_TYPE_F32, "%s: %s missing or not F32 in the F32 file", quant, t->name);
        if (!r || r->type != RW_TYPE_F32) continue;
        uint64_t n = 0, nr = 0;
        float *x = dequantize_tensor(t, &n);
        float *want = dequantize_tensor(r, &nr);
        CHECK_MSG(x && want && n == nr, "%s: %s (%s) cannot be dequantized", quant, t->name, rw_dtype_name(t->type));
        if (x && want && n == nr) {
            double se = 0, ss = 0;
            for (uint64_t k = 0; k < n; k++) {
                double e = (double)x[k] - want[k];
                se += e * e;
                ss += (double)want[k] * want[k];
            }
            double rel_rmse = ss > 0 ? sqrt(se / ss) : sqrt(se);
            double bound = rel_rmse_bound(t->type);
            CHECK_MSG(rel_rmse <= bound, "%s: %s (%s) relative RMSE %.4g > %.4g", quant, t->name, rw_dtype_name(t->type),
                      rel_rmse, bound);
            if (t->type != RW_TYPE_F32 && rel_rmse / bound > worst) {
                worst = rel_rmse / bound;
                worst_name = t->name;
            }
        }
        free(x);
        free(want);
    }
    printf("%-7s %zu tensors, closest to its bound: %s at %.2f of it\n", quant, rw_gguf_n_tensors(g), worst_name, worst);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_gguf *ref;
    rw_error err;
    if (rw_gguf_open(rw_test_fixture_path("qwen3/qwen3-F32.gguf"), &ref, &err) != RW_OK) {
        CHECK_MSG(false, "qwen3-F32.gguf: %s", err.msg);
        return rw_test_done();
    }
    const char *files[] = {"F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) check_file(ref, files[i]);
    rw_gguf_close(ref);
    return rw_test_done();
}
