/* ops_attn.c - causal GQA attention of a run of new tokens over one
 * sequence's KV cache (ops.h). One task per (token, KV head) computes the
 * group of query heads sharing that KV head: in the AVX-512 tier with
 * rw_attn_group_avx512 and in the AVX2 tier with rw_attn_group_avx2, which
 * read each K and V row once for the group (decode at long context is bound
 * by those reads) and give every head exactly the bits of rw_attn_head; in
 * the other tiers with rw_attn_head per head (ops_model.h), which owns the
 * arithmetic. All read the cache through its pages (rw_attn_pages). */
#include "kernels/ops.h"
#include "kernels/ops_int.h"

typedef struct {
    const rw_attn_kv *kv;
    const float *q;
    int64_t q_stride, pos0, n_ctx, out_stride;
    int n_head_kv, group, hd_k, hd_v;
    float scale;
    bool avx512, avx2;
    int block; /* > 0: tokens per task, their queries four at a time (rw_attn_tokens_avx512) */
    float *out, *scratch;
} attn_job;

static void attn_task(void *p, int64_t task, int thread) {
    const attn_job *j = p;
#if defined(__x86_64__)
    if (j->block) {
        const int64_t t0 = task / j->n_head_kv * j->block, n_q = j->n_ctx - j->pos0;
        const int g = (int)(task % j->n_head_kv), h0 = g * j->group;
        const rw_attn_kv *kv = j->kv;
        const rw_attn_pages head = {.k_pages = kv->k_pages, .v_pages = kv->v_pages, .page_len = kv->page_len,
                                    .k_off = g * kv->k_head_stride, .v_off = g * kv->v_head_stride,
                                    .v_stride = kv->v_stride, .sinks = kv->sinks ? kv->sinks + h0 : NULL};
        const int n_tok = (int)(n_q - t0 < j->block ? n_q - t0 : j->block);
        rw_attn_tokens_avx512(j->q + t0 * j->q_stride + (int64_t)h0 * j->hd_k, j->q_stride, n_tok, j->group, &head,
                              kv->f16, j->pos0 + t0 + 1, kv->window, j->hd_k, j->hd_v, j->scale,
                              j->scratch + (int64_t)thread * 4 * j->n_ctx, j->n_ctx,
                              j->out + t0 * j->out_stride + (int64_t)h0 * j->hd_v, j->out_stride);
        return;
    }
#endif
    const int64_t t = task / j->n_head_kv;
    const int g = (int)(task % j->n_head_kv), h0 = g * j->group;
    const rw_attn_kv *kv = j->kv;
    const int64_t n_pos = j->pos0 + t + 1;
    /* a sliding window is the query's own: positions n_pos-window..n_pos-1 */
    const int64_t first = kv->window > 0 && n_pos > kv->window ? n_pos - kv->window : 0;
    const rw_attn_pages head = {.k_pages = kv->k_pages, .v_pages = kv->v_pages, .page_len = kv->page_len,
                                .k_off = g * kv->k_head_stride, .v_off = g * kv->v_head_stride,
                                .v_stride = kv->v_stride, .first = first,
                                .sinks = kv->sinks ? kv->sinks + h0 : NULL};
    const float *q = j->q + t * j->q_stride + (int64_t)h0 * j->hd_k;
    float *out = j->out + t * j->out_stride + (int64_t)h0 * j->hd_v;
    float *scores = j->scratch + (int64_t)thread * j->group * j->n_ctx;
#if defined(__x86_64__)
    if (j->avx512) {
        rw_attn_group_avx512(q, j->group, &head, kv->f16, n_pos, j->hd_k, j->hd_v, j->scale, scores, out);
        return;
    }
    if (j->avx2 && j->group > 1 && rw_attn_group_avx2_fits(&head, j->hd_k)) {
        rw_attn_group_avx2(q, j->group, &head, kv->f16, n_pos, j->hd_k, j->hd_v, j->scale, scores, out);
        return;
    }
#endif
    for (int h = 0; h < j->group; h++) {
        rw_attn_pages one = head;
        if (one.sinks) one.sinks += h;
        rw_attn_head_paged(q + (int64_t)h * j->hd_k, &one, kv->f16, n_pos, j->hd_k, j->hd_v, j->scale, scores,
                           out + (int64_t)h * j->hd_v);
    }
}

int64_t rw_attn_scratch_floats(int n_threads, int n_head, int n_head_kv, int64_t n_ctx) {
    const int rows = n_head / n_head_kv > 4 ? n_head / n_head_kv : 4; /* a group, or a block of four queries */
    return (int64_t)n_threads * rows * n_ctx;
}

/* Tokens per task for the four-query blocks: enough that their queries
 * (tokens x group) fill blocks of four; 0 = one token per task. Decode (one
 * token) takes them when its group fills blocks (measured on Zen 5, one
 * thread, f16 pages of 64 positions at 4096: Qwen3.5-0.8B's layer 2.1x and
 * Qwen3-4B's 1.5x faster than the group form, whose reductions of each
 * score cost as much as its products); a few tokens whose queries are under
 * four would be mostly padding. */
static int block_tokens(int64_t n_q, int group, int hd_k, int hd_v) {
    if (hd_k % 64 || hd_v % 4 || n_q * group < 4 || (n_q == 1 && group % 4)) return 0;
    return group % 4 == 0 ? 1 : group % 2 == 0 ? 2 : 4;
}

void rw_attn_causal(const rw_attn_kv *kv, const float *q, int64_t q_stride, int64_t pos0, int64_t n_q, int n_head,
                    int n_head_kv, int hd_k, int hd_v, float scale, float *out, int64_t out_stride, float *scratch,
                    rw_threadpool *pool) {
    attn_job j = {.kv = kv, .q = q, .q_stride = q_stride, .pos0 = pos0, .n_ctx = pos0 + n_q,
                  .out_stride = out_stride, .n_head_kv = n_head_kv, .group = n_head / n_head_kv, .hd_k = hd_k,
                  .hd_v = hd_v, .scale = scale, .avx512 = rw_ops_use_avx512(),
                  .avx2 = rw_ops_use_avx2(), .out = out, .scratch = scratch};
    if (j.avx512) j.block = block_tokens(n_q, j.group, hd_k, hd_v);
    const int64_t n_tasks = j.block ? (n_q + j.block - 1) / j.block : n_q;
    rw_threadpool_run(pool, attn_task, &j, n_tasks * n_head_kv);
}
