/* ops_attn_block_avx512.c - attention of several queries at once (prefill)
 * in the AVX-512 tier: the queries of a few consecutive tokens that share a
 * KV head, taken four at a time, against four keys (or four value rows) at
 * a time, so that each loaded vector feeds four products instead of one.
 * The one-query forms (ops_avx512.c) load a key row, then one query row per
 * product: load-bound, and the reduction of each score costs as much as its
 * products at head size 64-128.
 *
 * Every result is bitwise rw_attn_head_paged_ref's: a score is rw_dot_ggml
 * (lane l of accumulator c takes elements 64s + 16c + l in order of s, by
 * fma), reduced as rw_reduce64_ref ((a0 + a2) + (a1 + a3) per lane, then the
 * pairs l / l+8, l / l+4, l / l+2, l / l+1), times scale; an output value is
 * the same over positions from the query's window block b0 to its n_pos,
 * the last 64-block masked as the one-query form masks it. Here the
 * accumulator of each c is finished before the next c starts (the chains
 * are independent), and sixteen reductions run side by side in one
 * transposition network whose additions pair exactly the reference's
 * elements. Queries of different tokens see different position ranges: a
 * 64-block all four queries own is computed jointly, the others query by
 * query, so no query ever multiplies a value outside its own range. */
#include "kernels/ops_int.h"
#include "kernels/simd_avx512_int.h"

#include <immintrin.h>

/* rw_reduce16_ref of sixteen vectors t[4m + n] at once: the result's lane
 * 4n + m is the sum of t[4m + n]'s lanes. */
static inline __m512 reduce16x16(const __m512 t[16]) {
    __m512 x[8], z[4];
#pragma GCC unroll 16
    for (int p = 0; p < 8; p++) /* lanes l + 8 and l: the first halves of t[2p] and t[2p + 1] */
        x[p] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], 0xEE),
                             _mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], 0x44));
#pragma GCC unroll 16
    for (int s = 0; s < 4; s++) /* l + 4 and l: one quarter per vector t[4s + k] */
        z[s] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * s], x[2 * s + 1], 0xDD),
                             _mm512_shuffle_f32x4(x[2 * s], x[2 * s + 1], 0x88));
    /* per quarter k: (u0 + u2), (u1 + u3) of t[4s + k], then their sum */
    const __m512 v0 = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 v1 = _mm512_add_ps(_mm512_shuffle_ps(z[2], z[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_ps(z[2], z[3], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The accumulators of c in the order 0, 2, 1, 3 folded into
 * (a0 + a2) + (a1 + a3): fold(step, a, part, t). */
static inline void fold(int step, const __m512 a[16], __m512 part[2][16], __m512 t[16]) {
#pragma GCC unroll 16
    for (int x = 0; x < 16; x++) {
        if (step == 0) part[0][x] = a[x];
        else if (step == 1) part[0][x] = _mm512_add_ps(part[0][x], a[x]);
        else if (step == 2) part[1][x] = a[x];
        else t[x] = _mm512_add_ps(part[0][x], _mm512_add_ps(part[1][x], a[x]));
    }
}

static const int c_order[4] = {0, 2, 1, 3};

/* keys ahead that the score loop prefetches (four keys a step) */
enum { ATTN_PF_KEYS = 16 };

/* s[4n + m] = rw_dot_ggml(key n, query m) * scale for four queries and four
 * keys (hd_k a multiple of 64). */
static inline __attribute__((always_inline)) void scores4x4(const float *const q[4], const void *const k[4],
                                                            const bool f16, int hd_k, __m512 scale, float s[16]) {
    __m512 part[2][16], t[16];
#pragma GCC unroll 4
    for (int step = 0; step < 4; step++) {
        const int c = c_order[step];
        __m512 a[16];
#pragma GCC unroll 16
        for (int x = 0; x < 16; x++) a[x] = _mm512_setzero_ps();
        for (int i = 16 * c; i < hd_k; i += 64) {
            __m512 kv[4], qv[4];
#pragma GCC unroll 16
            for (int n = 0; n < 4; n++) kv[n] = rw_load16(k[n], f16, i);
#pragma GCC unroll 16
            for (int m = 0; m < 4; m++) qv[m] = _mm512_loadu_ps(q[m] + i);
#pragma GCC unroll 16
            for (int m = 0; m < 4; m++)
#pragma GCC unroll 16
                for (int n = 0; n < 4; n++) a[4 * m + n] = _mm512_fmadd_ps(kv[n], qv[m], a[4 * m + n]);
        }
        fold(step, a, part, t);
    }
    _mm512_storeu_ps(s, _mm512_mul_ps(reduce16x16(t), scale));
}

/* One query of a block: its rows and its range of positions. */
typedef struct {
    const float *q; /* hd_k floats */
    float *p;       /* its scores, then probabilities, indexed by position */
    float *out;     /* hd_v floats; NULL for a pad (its results dropped) */
    int64_t first, b0, n_pos;
    const float *sink;
} blk_query;

/* a[4m + n] += V row (dim n) x p_m over the 64-block at k0 (page page, offset
 * off in it), lanes 16c.. of it; m in [m0, m1) only, each with its own mask
 * (np_m positions left from k0), or all four unmasked (joint). */
static inline __attribute__((always_inline)) void values_block(const void *const vrow[4], const bool f16, int64_t off,
                                                               const blk_query *qb, int64_t k0, int c, bool joint,
                                                               __m512 a[16]) {
    if (joint) {
        __m512 vv[4], pv[4];
#pragma GCC unroll 16
        for (int n = 0; n < 4; n++) vv[n] = rw_load16(vrow[n], f16, off + 16 * c);
#pragma GCC unroll 16
        for (int m = 0; m < 4; m++) pv[m] = _mm512_loadu_ps(qb[m].p + k0 + 16 * c);
#pragma GCC unroll 16
        for (int m = 0; m < 4; m++)
#pragma GCC unroll 16
            for (int n = 0; n < 4; n++) a[4 * m + n] = _mm512_fmadd_ps(vv[n], pv[m], a[4 * m + n]);
        return;
    }
#pragma GCC unroll 16
    for (int m = 0; m < 4; m++) {
        if (k0 < qb[m].b0 || k0 >= qb[m].n_pos) continue; /* not this query's block */
        const int64_t left = qb[m].n_pos - k0 - 16 * c;   /* as the one-query form's masked tail */
        if (left <= 0) continue;
        const __mmask16 mk = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512 pv = _mm512_maskz_loadu_ps(mk, qb[m].p + k0 + 16 * c);
#pragma GCC unroll 16
        for (int n = 0; n < 4; n++)
            a[4 * m + n] = _mm512_fmadd_ps(rw_load16m(vrow[n], f16, off + 16 * c, mk), pv, a[4 * m + n]);
    }
}

/* out_m[i0 + n] for the four queries and value dims i0..i0+3. */
static inline __attribute__((always_inline)) void values4x4(const rw_attn_pages *kv, const bool f16, int i0, int hd_v,
                                                            const blk_query *qb, float o[16]) {
    const size_t esz = f16 ? 2 : 4;
    const int64_t P = kv->page_len;
    int64_t lo = qb[0].b0, hi = qb[0].n_pos, jlo = qb[0].b0, jhi = qb[0].n_pos;
#pragma GCC unroll 16
    for (int m = 1; m < 4; m++) {
        lo = qb[m].b0 < lo ? qb[m].b0 : lo, hi = qb[m].n_pos > hi ? qb[m].n_pos : hi;
        jlo = qb[m].b0 > jlo ? qb[m].b0 : jlo, jhi = qb[m].n_pos < jhi ? qb[m].n_pos : jhi;
    }
    jhi &= ~(int64_t)63; /* joint: the full 64-blocks of every query */
    __m512 part[2][16], t[16];
#pragma GCC unroll 4
    for (int step = 0; step < 4; step++) {
        const int c = c_order[step];
        __m512 a[16];
#pragma GCC unroll 16
        for (int x = 0; x < 16; x++) a[x] = _mm512_setzero_ps();
        /* the page of block k0 and k0's offset in it, kept as k0 moves (no
         * division per block: a page holds a multiple of 64 positions) */
        int64_t pg = lo / P, off = lo % P;
        const void *vrow[4];
#pragma GCC unroll 16
        for (int n = 0; n < 4; n++)
            vrow[n] = (const char *)kv->v_pages[pg] + (size_t)(kv->v_off + (int64_t)(i0 + n) * kv->v_stride) * esz;
        for (int64_t k0 = lo; k0 < hi; k0 += 64, off += 64) {
            if (off == P) {
                pg++, off = 0;
#pragma GCC unroll 16
                for (int n = 0; n < 4; n++)
                    vrow[n] =
                        (const char *)kv->v_pages[pg] + (size_t)(kv->v_off + (int64_t)(i0 + n) * kv->v_stride) * esz;
            }
            /* on the first pass, this block of the next four dimensions'
             * rows, into L2 (the four passes over these rows come first):
             * in a paged cache each page's piece of a row is a few lines
             * of another allocation, which the hardware prefetchers do not
             * follow (decode over 4096 f16 positions in pages of 64: the
             * value pass waited on them) */
            if (step == 0 && i0 + 4 < hd_v)
#pragma GCC unroll 16
                for (int n = 0; n < 4; n++)
                    for (int64_t b = 0; b < 64 * (int64_t)esz; b += 64)
                        _mm_prefetch((const char *)vrow[n] + (size_t)(4 * kv->v_stride + off) * esz + b, _MM_HINT_T1);
            values_block(vrow, f16, off, qb, k0, c, k0 >= jlo && k0 < jhi, a);
        }
        fold(step, a, part, t);
    }
    _mm512_storeu_ps(o, reduce16x16(t));
}

/* The n_q (<= 4) queries of qb (padded to four by repeating the last one,
 * its out NULL) over the KV head's pages. */
static void attn_block4(const rw_attn_pages *kv, const bool f16, blk_query *qb, int hd_k, int hd_v, float scale) {
    const size_t esz = f16 ? 2 : 4;
    const int64_t P = kv->page_len;
    int64_t lo = qb[0].b0, hi = qb[0].n_pos;
#pragma GCC unroll 16
    for (int m = 1; m < 4; m++) lo = qb[m].b0 < lo ? qb[m].b0 : lo, hi = qb[m].n_pos > hi ? qb[m].n_pos : hi;
    const __m512 vscale = _mm512_set1_ps(scale);
    const float *q[4] = {qb[0].q, qb[1].q, qb[2].q, qb[3].q};
    for (int64_t j0 = lo; j0 < hi; j0 += 4) { /* scores at keys past a query's n_pos are never read */
        const void *k[4];
        /* one division per four keys: from a multiple of 4 they never straddle two pages (a page holds a
         * multiple of 64 positions, or there is one page) */
        const int64_t pg = j0 / P, off = j0 % P;
#pragma GCC unroll 16
        for (int n = 0; n < 4; n++) {
            const int64_t j = j0 + n < hi ? j0 + n : hi - 1;
            k[n] = (const char *)kv->k_pages[pg] + (size_t)(kv->k_off + (off + (j - j0)) * hd_k) * esz;
        }
        /* the four keys ATTN_PF_KEYS on (one page: a multiple of 4 from a
         * multiple of 4), as the values above: the next page is another
         * allocation. Rows past hi are in the page or past its end: a
         * prefetch, never a load. */
        const int64_t jp = j0 + ATTN_PF_KEYS;
        if (jp < hi) {
            const char *kp = (const char *)kv->k_pages[jp / P] + (size_t)(kv->k_off + (jp % P) * hd_k) * esz;
            for (size_t b = 0; b < 4 * (size_t)hd_k * esz; b += 64) _mm_prefetch(kp + b, _MM_HINT_T0);
        }
        float s[16];
        scores4x4(q, k, f16, hd_k, vscale, s);
        for (int n = 0; n < 4 && j0 + n < hi; n++)
#pragma GCC unroll 16
            for (int m = 0; m < 4; m++) qb[m].p[j0 + n] = s[4 * n + m];
    }
#pragma GCC unroll 16
    for (int m = 0; m < 4; m++)
        if (qb[m].out) rw_attn_softmax_avx512(qb[m].p, qb[m].first, qb[m].b0, qb[m].n_pos, qb[m].sink);
#pragma GCC unroll 16
    for (int m = 1; m < 4; m++) /* a pad: the probabilities of the query it repeats */
        if (!qb[m].out) qb[m].p = qb[m - 1].p;
    for (int i0 = 0; i0 < hd_v; i0 += 4) {
        float o[16];
        values4x4(kv, f16, i0, hd_v, qb, o);
#pragma GCC unroll 16
        for (int m = 0; m < 4; m++)
            if (qb[m].out)
#pragma GCC unroll 16
                for (int n = 0; n < 4; n++) qb[m].out[i0 + n] = o[4 * n + m];
    }
}

void rw_attn_tokens_avx512(const float *q, int64_t q_stride, int n_tok, int r, const rw_attn_pages *kv, bool f16,
                           int64_t n_pos0, int64_t window, int hd_k, int hd_v, float scale, float *scores,
                           int64_t scores_stride, float *out, int64_t out_stride) {
    const int nq = n_tok * r;
    for (int x0 = 0; x0 < nq; x0 += 4) {
        blk_query qb[4];
#pragma GCC unroll 16
        for (int m = 0; m < 4; m++) {
            const int x = x0 + m < nq ? x0 + m : nq - 1, t = x / r, h = x % r;
            const int64_t n_pos = n_pos0 + t;
            const int64_t first = window > 0 && n_pos > window ? n_pos - window : 0;
            qb[m] = (blk_query){.q = q + t * q_stride + (int64_t)h * hd_k,
                                .p = scores + (int64_t)m * scores_stride,
                                .out = x0 + m < nq ? out + t * out_stride + (int64_t)h * hd_v : NULL,
                                .first = first,
                                .b0 = first & ~(int64_t)63,
                                .n_pos = n_pos,
                                .sink = kv->sinks ? kv->sinks + h : NULL};
        }
        if (f16) attn_block4(kv, true, qb, hd_k, hd_v, scale);
        else attn_block4(kv, false, qb, hd_k, hd_v, scale);
    }
}
