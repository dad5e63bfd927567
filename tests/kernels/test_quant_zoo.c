/* test_quant_zoo.c - the quantization-format zoo of ../shared/fixtures/quant:
 * dequantization of every type equals ggml's values exactly; the reference
 * quantizers reproduce llama-quantize's bytes for every type they support
 * (F16, BF16, Q4_0..Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4), and so their
 * RMSE against the originals is ggml's (checked within 1.1x as well). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "kernels/quant.h"

static float *original;
static json_t *index_root;

static void check_type(const char *name, json_t *info) {
    char path[256];
    snprintf(path, sizeof path, "quant/%s", json_string_value(json_object_get(info, "gguf")));
    rw_gguf *g;
    rw_error err;
    if (rw_gguf_open(rw_test_fixture_path(path), &g, &err) != RW_OK) {
        CHECK_MSG(false, "%s: %s", path, err.msg);
        return;
    }
    snprintf(path, sizeof path, "quant/%s", json_string_value(json_object_get(info, "dequant")));
    float *want = rw_test_read_file(rw_test_fixture_path(path), NULL);
    CHECK_MSG(want != NULL, "cannot read %s", path);
    rw_dtype t;
    CHECK(rw_dtype_from_name(name, &t));
    json_t *tensors = json_object_get(index_root, "tensors");
    size_t ti;
    json_t *tj;
    bool bytes_exact = t == RW_TYPE_F16 || t == RW_TYPE_BF16 || t == RW_TYPE_Q4_0 || t == RW_TYPE_Q4_1 ||
                       t == RW_TYPE_Q5_0 || t == RW_TYPE_Q5_1 || t == RW_TYPE_Q8_0 || t == RW_TYPE_Q4_K ||
                       t == RW_TYPE_Q5_K || t == RW_TYPE_Q6_K || t == RW_TYPE_IQ4_NL || t == RW_TYPE_IQ4_XS || t == RW_TYPE_Q2_K || t == RW_TYPE_Q3_K ||
                       t == RW_TYPE_TQ1_0 || t == RW_TYPE_TQ2_0 || t == RW_TYPE_MXFP4;
    json_array_foreach(tensors, ti, tj) {
        const char *tname = json_string_value(json_object_get(tj, "name"));
        const rw_gguf_tensor *gt = rw_gguf_find_tensor(g, tname);
        CHECK_MSG(gt && gt->type == t, "%s: tensor %s", name, tname);
        if (!gt || !want) continue;
        int64_t off = json_integer_value(json_object_get(tj, "offset_floats"));
        int64_t rows = json_integer_value(json_object_get(tj, "rows")), cols = json_integer_value(json_object_get(tj, "cols"));
        uint64_t row_bytes;
        rw_dtype_row_bytes(t, (uint64_t)cols, &row_bytes);
        float *row = malloc((size_t)cols * sizeof *row);
        uint8_t *q = malloc(row_bytes);
        double se = 0;
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *src = (const uint8_t *)gt->data + r * row_bytes;
            CHECK(rw_dequantize_row(t, src, row, cols) == RW_OK);
            int64_t bad = 0;
            for (int64_t c = 0; c < cols; c++)
                if (!(row[c] == want[off + r * cols + c])) bad++;
            CHECK_MSG(bad == 0, "%s %s row %lld: %lld values differ from ggml's", name, tname, (long long)r, (long long)bad);
            if (!rw_can_quantize(t)) continue;
            const float *orig = original + off + r * cols;
            CHECK(rw_quantize_row(t, orig, q, cols) == RW_OK);
            if (bytes_exact) {
                CHECK_MSG(!memcmp(q, src, row_bytes), "%s %s row %lld: quantized bytes differ from llama-quantize's", name,
                          tname, (long long)r);
            }
            CHECK(rw_dequantize_row(t, q, row, cols) == RW_OK);
            for (int64_t c = 0; c < cols; c++) se += ((double)row[c] - orig[c]) * ((double)row[c] - orig[c]);
        }
        if (rw_can_quantize(t)) {
            double rmse = sqrt(se / (double)(rows * cols));
            double ggml = json_real_value(json_object_get(json_object_get(json_object_get(info, "tensors"), tname), "rmse"));
            CHECK_MSG(rmse <= 1.1 * ggml + 1e-12, "%s %s: RMSE %g vs ggml's %g", name, tname, rmse, ggml);
            printf("%-6s %-24s rmse %.6g (ggml %.6g)\n", name, tname, rmse, ggml);
        }
        free(row);
        free(q);
    }
    free(want);
    rw_gguf_close(g);
}

static void awkward_inputs(void) {
    float x[256], y[256];
    uint8_t buf[1024];
    rw_dtype types[] = {RW_TYPE_Q8_0, RW_TYPE_Q4_0, RW_TYPE_Q4_1, RW_TYPE_Q5_0, RW_TYPE_Q5_1, RW_TYPE_Q4_K,
                        RW_TYPE_Q5_K, RW_TYPE_Q6_K, RW_TYPE_Q8_K, RW_TYPE_F16, RW_TYPE_BF16};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        rw_dtype t = types[k];
        memset(x, 0, sizeof x); /* all zero: zeros back, never NaN */
        CHECK(rw_quantize_row(t, x, buf, 256) == RW_OK);
        CHECK(rw_dequantize_row(t, buf, y, 256) == RW_OK);
        for (int i = 0; i < 256; i++) CHECK_MSG(y[i] == 0, "%s: zero row gives %g", rw_dtype_name(t), y[i]);
        for (int i = 0; i < 256; i++) x[i] = 0.7f; /* a constant comes back close */
        CHECK(rw_quantize_row(t, x, buf, 256) == RW_OK);
        CHECK(rw_dequantize_row(t, buf, y, 256) == RW_OK);
        for (int i = 0; i < 256; i++) CHECK_MSG(fabsf(y[i] - 0.7f) < 0.05f, "%s: constant gives %g", rw_dtype_name(t), y[i]);
        if (rw_dtype_block_size(t) > 1) CHECK(rw_quantize_row(t, x, buf, 33) == RW_ERR_INVALID_ARG);
        CHECK(rw_dequantize_row(t, buf, y, 256 + (rw_dtype_block_size(t) > 1 ? 1 : 0)) ==
              (rw_dtype_block_size(t) > 1 ? RW_ERR_INVALID_ARG : RW_OK));
    }
    CHECK(rw_dequantize_row(RW_TYPE_IQ2_XXS, buf, y, 256) == RW_ERR_UNSUPPORTED);
    /* f16 edge cases: subnormals, overflow, NaN */
    CHECK(rw_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(rw_f32_to_f16(0x1p-25f) == 0x0000 && rw_f32_to_f16(0x1.8p-25f) == 0x0001);
    CHECK(rw_f32_to_f16(70000.f) == 0x7c00 && rw_f32_to_f16(65504.f) == 0x7bff);
    CHECK(isnan(rw_f16_to_f32(rw_f32_to_f16(NAN))) && isnan(rw_bf16_to_f32(rw_f32_to_bf16(NAN))));
    CHECK(rw_f32_to_bf16(1.00390625f) == 0x3f80); /* a tie rounds to even */
}

int main(void) {
    awkward_inputs();
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures (awkward-input checks passed)");
    json_error_t je;
    index_root = json_load_file(rw_test_fixture_path("quant/index.json"), 0, &je);
    original = rw_test_read_file(rw_test_fixture_path("quant/zoo.original.f32"), NULL);
    CHECK(index_root && original);
    if (!index_root || !original) return rw_test_done();
    const char *key;
    json_t *info;
    int n = 0;
    json_object_foreach(json_object_get(index_root, "types"), key, info) {
        check_type(key, info);
        n++;
    }
    CHECK(n >= 16);
    free(original);
    json_decref(index_root);
    return rw_test_done();
}
