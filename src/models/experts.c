/* experts.c - the routed experts of a mixture-of-experts FFN as grouped
 * matrix products: the slots of a batch gathered per expert, so that each
 * expert's weights are read once per call however many tokens chose it. */
#include "models/model_int.h"

rw_status rw_models__experts_matmul(const rw_gguf_tensor *t, int n_expert, const int32_t *sel, int64_t n_slots, int k,
                                    bool x_by_token, const float *x, int64_t x_stride, float *y, int64_t y_stride,
                                    int32_t *rows, rw_matmul_group *groups, rw_threadpool *pool, rw_error *err) {
    uint64_t row_bytes;
    rw_dtype_row_bytes(t->type, t->ne[0], &row_bytes);
    const size_t expert_bytes = (size_t)t->ne[1] * row_bytes;
    /* rows: per expert its slots (y rows), then, after n_slots, their x rows */
    int32_t *yr = rows, *xr = rows + n_slots;
    int64_t ng = 0, at = 0;
    for (int e = 0; e < n_expert; e++) {
        const int64_t start = at;
        for (int64_t s = 0; s < n_slots; s++)
            if (sel[s] == e) {
                yr[at] = (int32_t)s;
                xr[at] = (int32_t)(x_by_token ? s / k : s);
                at++;
            }
        if (at == start) continue;
        groups[ng++] = (rw_matmul_group){.data = (const char *)t->data + (size_t)e * expert_bytes,
                                         .x_rows = xr + start,
                                         .y_rows = yr + start,
                                         .n_rows = at - start};
    }
    const rw_matrix w = {.type = t->type,
                         .data = t->data,
                         .n_in = (int64_t)t->ne[0],
                         .n_out = (int64_t)t->ne[1],
                         .row_stride = (size_t)row_bytes};
    return rw_matmul_grouped(&w, groups, ng, x, x_stride, y, y_stride, pool, err);
}
