/* ops_attn.c - causal GQA attention of a run of new tokens over one
 * sequence's KV cache (ops.h), one (token, head) task at a time on top of
 * rw_attn_head (ops_model.h), which owns the arithmetic and its tiers. */
#include "kernels/ops.h"

typedef struct {
    const rw_attn_kv *kv;
    const float *q;
    int64_t q_stride, pos0, n_ctx, out_stride;
    int n_head, group, hd_k, hd_v;
    float scale;
    float *out, *scratch;
} attn_job;

static void attn_task(void *p, int64_t task, int thread) {
    const attn_job *j = p;
    const int64_t t = task / j->n_head;
    const int h = (int)(task % j->n_head), g = h / j->group;
    const rw_attn_kv *kv = j->kv;
    const size_t esz = kv->f16 ? sizeof(rw_f16) : sizeof(float);
    const char *k = (const char *)kv->k + (size_t)(g * kv->k_head_stride) * esz;
    const char *vt = (const char *)kv->vt + (size_t)(g * kv->v_head_stride) * esz;
    rw_attn_head(j->q + t * j->q_stride + (int64_t)h * j->hd_k, k, vt, kv->v_stride, kv->f16, j->pos0 + t + 1, j->hd_k,
                 j->hd_v, j->scale, j->scratch + (int64_t)thread * j->n_ctx,
                 j->out + t * j->out_stride + (int64_t)h * j->hd_v);
}

void rw_attn_causal(const rw_attn_kv *kv, const float *q, int64_t q_stride, int64_t pos0, int64_t n_q, int n_head,
                    int n_head_kv, int hd_k, int hd_v, float scale, float *out, int64_t out_stride, float *scratch,
                    rw_threadpool *pool) {
    attn_job j = {.kv = kv, .q = q, .q_stride = q_stride, .pos0 = pos0, .n_ctx = pos0 + n_q,
                  .out_stride = out_stride, .n_head = n_head, .group = n_head / n_head_kv, .hd_k = hd_k,
                  .hd_v = hd_v, .scale = scale, .out = out, .scratch = scratch};
    rw_threadpool_run(pool, attn_task, &j, n_q * n_head);
}
