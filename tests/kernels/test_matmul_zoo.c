/* test_matmul_zoo.c - every tier's block decoding against llama.cpp's values.
 *
 * The quantization zoo (../shared/fixtures/quant) holds tensors of every type
 * with their dequantized values from gguf-py. Multiplying a matrix by the
 * unit vector e_i gives column i of the matrix, so W·e_i must equal the
 * dequantized column, up to the rounding of the one-hot activation itself
 * (Q8_0's f16 scale 1/127 makes x = 0.99994; Q8_1's f16 sum 0.9995): we allow
 * 1e-3 of the row's largest value. Any mistake in a block layout (nibble
 * order, scale packing, high bits) moves whole values and fails.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "kernels/matmul.h"

static const char *const type_names[] = {"F16",  "BF16", "Q4_0", "Q4_1", "Q5_0",   "Q5_1",   "Q8_0",  "Q2_K",
                                         "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4", NULL};

static void check_type(const char *tname, int col_step) {
    char rel[64];
    snprintf(rel, sizeof rel, "quant/zoo-%s.gguf", tname);
    rw_error err;
    rw_gguf *g = NULL;
    if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err) != RW_OK) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    snprintf(rel, sizeof rel, "quant/zoo-%s.dequant.f32", tname);
    size_t deq_size = 0;
    float *deq = rw_test_read_file(rw_test_fixture_path(rel), &deq_size);
    CHECK(deq != NULL);
    size_t deq_off = 0;
    for (size_t ti = 0; deq && ti < rw_gguf_n_tensors(g); ti++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, ti);
        int64_t n_in = (int64_t)t->ne[0], n_out = (int64_t)(t->ne[1] * t->ne[2]);
        CHECK(deq_off + (size_t)(n_in * n_out) <= deq_size / sizeof(float));
        if (deq_off + (size_t)(n_in * n_out) > deq_size / sizeof(float)) break;
        const float *dq = deq + deq_off;
        deq_off += (size_t)(n_in * n_out);
        rw_matrix w = {t->type, t->data, n_in, n_out, 0, NULL, NULL};
        int64_t n_cols = (n_in + col_step - 1) / col_step;
        float *x = calloc((size_t)(n_cols * n_in), sizeof(float));
        float *y = malloc(sizeof(float) * (size_t)(n_cols * n_out));
        for (int64_t c = 0; c < n_cols; c++) x[c * n_in + c * col_step] = 1.0f;
        for (int tier = 0; tier < RW_TIER_COUNT; tier++) {
            if (!rw_kernel_tier_set((rw_kernel_tier)tier)) continue;
            if (rw_kernel_tier_for((rw_kernel_tier)tier, t->type) != (rw_kernel_tier)tier) continue;
            CHECK(rw_matmul(&w, x, n_in, n_cols, y, n_out, NULL, &err) == RW_OK);
            int bad = 0;
            for (int64_t o = 0; o < n_out && bad < 3; o++) {
                double rmax = 0;
                for (int64_t i = 0; i < n_in; i++) rmax = fmax(rmax, fabs(dq[o * n_in + i]));
                for (int64_t c = 0; c < n_cols && bad < 3; c++) {
                    double want = dq[o * n_in + c * col_step], got = y[c * n_out + o];
                    if (fabs(got - want) > 1e-3 * rmax + 1e-30) {
                        bad++;
                        CHECK_MSG(0, "%s %s tier %s: row %lld col %lld: got %.8g want %.8g", tname, t->name,
                                  rw_kernel_tier_name((rw_kernel_tier)tier), (long long)o,
                                  (long long)(c * col_step), got, want);
                    }
                }
            }
        }
        free(x);
        free(y);
    }
    free(deq);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_kernel_tier best = rw_kernel_tier_current();
    int col_step = rw_test_sanitized() ? 13 : 1;
    for (int i = 0; type_names[i]; i++) check_type(type_names[i], col_step);
    rw_kernel_tier_set(best);
    return rw_test_done();
}
