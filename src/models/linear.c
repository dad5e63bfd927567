/* linear.c - y = W x over rows. TEMPORARY plain F32 loop until
 * kernels/matmul.h lands; then this forwards to rw_matmul. */
#include "models/model_int.h"

bool mdl_matmul_supports(rw_dtype t) { return t == RW_TYPE_F32; }

rw_status mdl_matmul(const mdl_matrix *w, const float *x, int64_t n, float *y, rw_threadpool *pool, rw_error *err) {
    (void)pool;
    if (w->type != RW_TYPE_F32) return rw_errorf(err, RW_ERR_UNSUPPORTED, "matmul: type %s", rw_dtype_name(w->type));
    const float *W = w->data;
    for (int64_t r = 0; r < n; r++)
        for (int64_t o = 0; o < w->n_out; o++) {
            const float *a = W + o * w->n_in, *b = x + r * w->n_in;
            float s = 0.0f;
            for (int64_t i = 0; i < w->n_in; i++) s += a[i] * b[i];
            y[r * w->n_out + o] = s;
        }
    return RW_OK;
}
