/* test_models_embed.c - the embedding row conversion (models/embed_tmp.c)
 * against the quantization zoo's reference dequantized values, bit for bit
 * (../shared/fixtures/quant: llama.cpp's own dequantization). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/model_int.h"

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    const char *types[] = {"F16", "BF16", "Q8_0", "Q6_K", "Q4_0", "Q5_0", "Q4_K", "Q5_K"};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        char rel[128];
        snprintf(rel, sizeof rel, "quant/zoo-%s.gguf", types[k]);
        rw_error err = {0};
        rw_gguf *g = NULL;
        if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err)) {
            CHECK_MSG(0, "%s: %s", rel, err.msg);
            continue;
        }
        snprintf(rel, sizeof rel, "quant/zoo-%s.dequant.f32", types[k]);
        size_t size = 0;
        float *want = rw_test_read_file(rw_test_fixture_path(rel), &size);
        CHECK_MSG(want != NULL, "%s missing", rel);
        size_t off = 0, bad = 0;
        for (size_t i = 0; want && i < rw_gguf_n_tensors(g); i++) {
            const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
            CHECK(mdl_tmp_can_embed(t->type));
            const int64_t cols = (int64_t)t->ne[0], rows = (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
            const size_t row_bytes = (size_t)(t->nbytes / (uint64_t)rows);
            float *row = malloc((size_t)cols * sizeof(float));
            for (int64_t r = 0; r < rows; r++) {
                CHECK(mdl_tmp_embed_row(t->type, (const char *)t->data + (size_t)r * row_bytes, row, cols) == RW_OK);
                for (int64_t c = 0; c < cols; c++) /* equal values (0 and -0 included) */
                    bad += row[c] != want[off + (size_t)(r * cols + c)];
            }
            off += (size_t)(rows * cols);
            free(row);
        }
        CHECK_MSG(want == NULL || off * 4 == size, "%s: %zu values read, file has %zu", types[k], off, size / 4);
        CHECK_MSG(bad == 0, "%s: %zu values differ from the reference", types[k], bad);
        printf("%-5s %zu values %s\n", types[k], off, bad ? "DIFFER" : "identical");
        free(want);
        rw_gguf_close(g);
    }
    return rw_test_done();
}
