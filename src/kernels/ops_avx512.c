/* ops_avx512.c - AVX-512 twins of the ops.h kernels (see ops_int.h), written
 * to follow ggml's vector code: its expf for SiLU and softmax, and for the
 * recurrences the order of ggml_vec_dot_f32 (four 16-lane FMA accumulators
 * over 64-element steps, reduced pairwise, the elements past the last
 * multiple of 64 fused one by one onto the float sum), ggml_vec_mad_f32 (FMA) and
 * ggml_vec_scale_f32. Passes that ggml makes separately over the delta-rule
 * state are fused here (scale with the first dot, update with the second):
 * every element still sees the same operations in the same order. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"
#include "kernels/simd_avx512_int.h"

#define INLINE static inline __attribute__((always_inline))

/* The kernel-4 causal conv over a run of n_t tokens, 16 channels at a time
 * through every token (taps and state stay in registers), with ops_conv.c's
 * operations per channel: the four products added one by one onto +0
 * (oldest tap first; a multiply then an add, or one fma if fused), then the
 * bias. The [channel][4] weights and [channel][3] state are taken apart and
 * put back together with permutes, once per 16 channels. Returns the
 * channels done (a multiple of 16); ops_conv.c does the rest. */
int rw_conv_k4_avx512(const float *x, int64_t x_stride, int64_t n_t, int C, const float *w, const float *bias,
                      bool fused, float *state, float *y, int64_t y_stride) {
    const __m512i i4 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i i3 = _mm512_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45);
    const __mmask16 past32[3] = {0xF800, 0xF800, 0xFC00}; /* lanes whose 3j + k >= 32 */
    /* the state [s0 s1 s2] per channel as stored: element e = 16m + l of
     * the output is register k = e % 3's lane j = e / 3 (sk[k] below) */
    __m512i put[3];
    __mmask16 from_x[3] = {0, 0, 0};
    for (int m = 0; m < 3; m++) {
        int src[16];
        for (int l = 0; l < 16; l++) {
            const int e = 16 * m + l, j = e / 3, k = e % 3;
            src[l] = k == 2 ? j : j + 16 * k;
            if (k == 2) from_x[m] |= (__mmask16)(1u << l);
        }
        put[m] = _mm512_loadu_si512(src);
    }
    int c = 0;
    for (; c + 16 <= C; c += 16) {
        const float *wc = w + (int64_t)c * 4;
        float *st = state + (int64_t)c * 3;
        const __m512 l0 = _mm512_loadu_ps(wc), l1 = _mm512_loadu_ps(wc + 16), l2 = _mm512_loadu_ps(wc + 32),
                     l3 = _mm512_loadu_ps(wc + 48);
        const __m512 s0 = _mm512_loadu_ps(st), s1 = _mm512_loadu_ps(st + 16), s2 = _mm512_loadu_ps(st + 32);
        __m512 wk[4], sk[3];
        for (int k = 0; k < 4; k++) { /* tap k of channels 0-7 from l0:l1, 8-15 from l2:l3 */
            const __m512i ik = _mm512_add_epi32(i4, _mm512_set1_epi32(k));
            const __m512 lo = _mm512_permutex2var_ps(l0, ik, l1), hi = _mm512_permutex2var_ps(l2, ik, l3);
            wk[k] = _mm512_insertf32x8(lo, _mm512_castps512_ps256(hi), 1);
        }
        for (int k = 0; k < 3; k++) { /* state k of channel j is element 3j + k of s0:s1:s2 */
            const __m512i ik = _mm512_add_epi32(i3, _mm512_set1_epi32(k));
            const __m512 t = _mm512_permutex2var_ps(s0, ik, s1);
            sk[k] = _mm512_mask_permutexvar_ps(t, past32[k], _mm512_sub_epi32(ik, _mm512_set1_epi32(32)), s2);
        }
        const __m512 b = bias ? _mm512_loadu_ps(bias + c) : _mm512_setzero_ps();
        for (int64_t t = 0; t < n_t; t++) {
            const __m512 xc = _mm512_loadu_ps(x + t * x_stride + c); /* read before y (which may be x) is written */
            __m512 sum = _mm512_setzero_ps();
            if (fused) {
                sum = _mm512_fmadd_ps(sk[0], wk[0], sum);
                sum = _mm512_fmadd_ps(sk[1], wk[1], sum);
                sum = _mm512_fmadd_ps(sk[2], wk[2], sum);
                sum = _mm512_fmadd_ps(xc, wk[3], sum);
            } else {
                sum = _mm512_add_ps(sum, _mm512_mul_ps(sk[0], wk[0]));
                sum = _mm512_add_ps(sum, _mm512_mul_ps(sk[1], wk[1]));
                sum = _mm512_add_ps(sum, _mm512_mul_ps(sk[2], wk[2]));
                sum = _mm512_add_ps(sum, _mm512_mul_ps(xc, wk[3]));
            }
            if (bias) sum = _mm512_add_ps(sum, b);
            _mm512_storeu_ps(y + t * y_stride + c, sum);
            sk[0] = sk[1], sk[1] = sk[2], sk[2] = xc;
        }
        /* the state [s0 s1 s2] per channel back in its [channel][3] layout */
        for (int m = 0; m < 3; m++) {
            const __m512 o = _mm512_permutex2var_ps(sk[0], put[m], sk[1]);
            _mm512_storeu_ps(st + 16 * m, _mm512_mask_permutexvar_ps(o, from_x[m], put[m], sk[2]));
        }
    }
    return c;
}

void rw_silu_avx512(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, rw_silu16(_mm512_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

/* rw_relu_sq_ref 16 values at a time: the lanes not above 0 (NaN among
 * them) become 0. */
void rw_relu_sq_avx512(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512 r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
        _mm512_storeu_ps(x + i, _mm512_mul_ps(r, r));
    }
    if (i < n) rw_relu_sq_ref(x + i, n - i);
}

/* rw_geglu_ref 16 values at a time: F16C's conversion rounds to nearest
 * even as rw_f32_to_f16 does, the clamps are ordered compares (false for
 * NaN, as the reference's ifs), the products the same one multiply. A block
 * holding a NaN goes to the reference, whose NaN half (rw_f32_to_f16) F16C
 * need not match in its payload. */
void rw_geglu_avx512(float *g, const float *u, int64_t n) {
    const float *tab = rw_gelu_f16_table();
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i), uv = _mm512_loadu_ps(u + i);
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) {
            rw_geglu_ref(g + i, u + i, 16);
            continue;
        }
        const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m512 y = _mm512_mul_ps(_mm512_i32gather_ps(h, tab, 4), uv);
        y = _mm512_mask_mul_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x, uv);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), _mm512_setzero_ps());
        _mm512_storeu_ps(g + i, y);
    }
    if (i < n) rw_geglu_ref(g + i, u + i, n - i);
}

void rw_softmax_avx512(const float *x, float *y, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    const __m512 vmx = _mm512_set1_ps(mx);
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = rw_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmx));
        _mm512_storeu_ps(y + i, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    for (; i < n; i++) {
        y[i] = expf(x[i] - mx);
        sum += (double)y[i];
    }
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
    for (; i < n; i++) y[i] *= (float)(1.0 / sum);
}

void rw_rmsnorm_gated_avx512(const float *x, const float *w, const float *z, int n_groups, int gs,
                             const float *scales, float *y) {
    for (int g = 0; g < n_groups; g++) {
        const float *xg = x + (int64_t)g * gs, *zg = z + (int64_t)g * gs;
        float *yg = y + (int64_t)g * gs;
        const float scale = scales[g];
        const __m512 vs = _mm512_set1_ps(scale);
        int i = 0;
        for (; i + 16 <= gs; i += 16) {
            const __m512 nx = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(xg + i), vs), _mm512_loadu_ps(w + i));
            _mm512_storeu_ps(yg + i, _mm512_mul_ps(nx, rw_silu16(_mm512_loadu_ps(zg + i))));
        }
        for (; i < gs; i++) yg[i] = ((xg[i] * scale) * w[i]) * (zg[i] / (1.0f + expf(-zg[i])));
    }
}

/* row *= decay, returning dot(row, k) in ggml_vec_dot_f32's order. */
static inline float scale_dot(float *row, float decay, const float *k, int n) {
    const __m512 vd = _mm512_set1_ps(decay);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64) {
        const __m512 r0 = _mm512_mul_ps(_mm512_loadu_ps(row + i), vd);
        const __m512 r1 = _mm512_mul_ps(_mm512_loadu_ps(row + i + 16), vd);
        const __m512 r2 = _mm512_mul_ps(_mm512_loadu_ps(row + i + 32), vd);
        const __m512 r3 = _mm512_mul_ps(_mm512_loadu_ps(row + i + 48), vd);
        _mm512_storeu_ps(row + i, r0);
        _mm512_storeu_ps(row + i + 16, r1);
        _mm512_storeu_ps(row + i + 32, r2);
        _mm512_storeu_ps(row + i + 48, r3);
        a0 = _mm512_fmadd_ps(r0, _mm512_loadu_ps(k + i), a0);
        a1 = _mm512_fmadd_ps(r1, _mm512_loadu_ps(k + i + 16), a1);
        a2 = _mm512_fmadd_ps(r2, _mm512_loadu_ps(k + i + 32), a2);
        a3 = _mm512_fmadd_ps(r3, _mm512_loadu_ps(k + i + 48), a3);
    }
    float sum = rw_reduce4(a0, a1, a2, a3);
    for (int i = np; i < n; i++) {
        row[i] *= decay;
        sum = fmaf(row[i], k[i], sum);
    }
    return sum;
}

/* row += k * d (fused multiply-add, as ggml_vec_mad_f32), returning
 * dot(row, q) in ggml_vec_dot_f32's order. */
static inline float mad_dot(float *row, const float *k, float d, const float *q, int n) {
    const __m512 vd = _mm512_set1_ps(d);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64) {
        const __m512 r0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), vd, _mm512_loadu_ps(row + i));
        const __m512 r1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16), vd, _mm512_loadu_ps(row + i + 16));
        const __m512 r2 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 32), vd, _mm512_loadu_ps(row + i + 32));
        const __m512 r3 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 48), vd, _mm512_loadu_ps(row + i + 48));
        _mm512_storeu_ps(row + i, r0);
        _mm512_storeu_ps(row + i + 16, r1);
        _mm512_storeu_ps(row + i + 32, r2);
        _mm512_storeu_ps(row + i + 48, r3);
        a0 = _mm512_fmadd_ps(r0, _mm512_loadu_ps(q + i), a0);
        a1 = _mm512_fmadd_ps(r1, _mm512_loadu_ps(q + i + 16), a1);
        a2 = _mm512_fmadd_ps(r2, _mm512_loadu_ps(q + i + 32), a2);
        a3 = _mm512_fmadd_ps(r3, _mm512_loadu_ps(q + i + 48), a3);
    }
    float sum = rw_reduce4(a0, a1, a2, a3);
    for (int i = np; i < n; i++) {
        row[i] = fmaf(k[i], d, row[i]);
        sum = fmaf(row[i], q[i], sum);
    }
    return sum;
}

/* _mm512_reduce_add_ps of each of v[0..15], lane j = row j, bitwise: the
 * same pairwise tree (lanes i + i+8, then + i+4, then + i+2, then + i+1)
 * run on 16 rows at once by interleaving them (IEEE addition commutes, so
 * only the pairing matters). The loops are unrolled so that the tree stays
 * in registers (as loops each level went through the stack, on the delta
 * rule's chain from one token to the next). */
static inline __m512 reduce_add16(const __m512 v[16]) {
    __m512 z[8], w[4], u[2];
    _Pragma("GCC unroll 8") for (int p = 0; p < 8; p++) /* row 2p in lanes 0-7, row 2p+1 in 8-15: lane i + lane i+8 */
        z[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) /* 128-bit lane r = row 4p + r: + lane i+4 */
        w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * p], z[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(z[2 * p], z[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) /* + lane i+2: rows 8p + r and 8p + 4 + r in 128-bit lane r */
        u[p] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* + lane i+1: lane 4r + c holds row 4c + r */
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(idx, r);
}

/* One row of a block through one step of the blocked delta rule below:
 * with UPD the previous token's update (row += k * d) and dot(row, q), with
 * DEC this token's decay (row *= decay) and dot(row, k), the row loaded and
 * stored once for both; each dot with the four accumulators of
 * ggml_vec_dot_f32 (chunk c onto c % 4), reduced (a0 + a2) + (a1 + a3). */
INLINE void delta_row_step(float *row, const int DK, const bool UPD, const bool DEC, __m512 vd, const __m512 *ku,
                           const __m512 *qu, __m512 vdec, const float *kn, __m512 *po, __m512 *pa) {
    const __m512 z = _mm512_setzero_ps();
    __m512 bo[4] = {z, z, z, z}, ba[4] = {z, z, z, z};
    _Pragma("GCC unroll 8") for (int c = 0; c < DK / 16; c++) {
        __m512 u = _mm512_loadu_ps(row + 16 * c);
        if (UPD) {
            u = _mm512_fmadd_ps(ku[c], vd, u);
            bo[c % 4] = _mm512_fmadd_ps(u, qu[c], bo[c % 4]);
        }
        if (DEC) {
            u = _mm512_mul_ps(u, vdec);
            ba[c % 4] = _mm512_fmadd_ps(u, _mm512_loadu_ps(kn + 16 * c), ba[c % 4]);
        }
        _mm512_storeu_ps(row + 16 * c, u);
    }
    *po = _mm512_add_ps(_mm512_add_ps(bo[0], bo[2]), _mm512_add_ps(bo[1], bo[3]));
    *pa = _mm512_add_ps(_mm512_add_ps(ba[0], ba[2]), _mm512_add_ps(ba[1], ba[3]));
}

/* A step of a block of 16 rows: the previous token's update (k kp, q qp, d
 * from din) and output into orow (UPD), this token's decay, k kn, and d =
 * (v - S^T k) * beta into dout (DEC). kp and qp sit in registers. Each row's
 * d is a lane of the d vector broadcast in registers, not a float reloaded
 * from the vector just stored. */
INLINE void delta_block_step(float *blk, const int DK, const bool UPD, const bool DEC, const float *kp, const float *qp,
                             const float *kn, const __m512 *din, __m512 *dout, const float *vrow, float decay,
                             float beta, float scale, float *orow) {
    __m512 ku[8], qu[8];
    if (UPD)
        for (int c = 0; c < DK / 16; c++) ku[c] = _mm512_loadu_ps(kp + 16 * c), qu[c] = _mm512_loadu_ps(qp + 16 * c);
    const __m512 vdec = _mm512_set1_ps(decay);
    __m512 po[16], pa[16];
    _Pragma("GCC unroll 2") for (int r = 0; r < 16; r++) {
        const __m512 vd = UPD ? _mm512_permutexvar_ps(_mm512_set1_epi32(r), *din) : _mm512_setzero_ps();
        delta_row_step(blk + r * DK, DK, UPD, DEC, vd, ku, qu, vdec, kn, &po[r], &pa[r]);
    }
    if (UPD) _mm512_storeu_ps(orow, _mm512_mul_ps(reduce_add16(po), _mm512_set1_ps(scale)));
    if (DEC) *dout = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(vrow), reduce_add16(pa)), _mm512_set1_ps(beta));
}

/* The delta rule for dk = DK (64 or 128) and dv a multiple of 16: as the
 * general code below, element by element the same operations in the same
 * order, but
 *   - rows of S^T evolve independently (row j needs only its own d[j]), so
 *     a block of 16 rows (8 KiB) runs through a tile of tokens before the
 *     next block: it stays in L1 instead of the whole state streaming
 *     through L2 at every token;
 *   - the tile's k and q are copied together first (kb, qb: token t0 - 1 + i
 *     at row i of each): in the layer's rows, a multiple of 4 KiB apart, every
 *     token's k and q fell in the same L1 sets as each other's and the
 *     block's, and evicted each other;
 *   - one pass over a row does token t's update and token t+1's decay, so
 *     the row is loaded and stored once per token;
 *   - the 16 rows' dot products are reduced together (reduce_add16) and d,
 *     o computed as vectors.
 * A block's d of the last token of a tile waits in dpend (dv floats). With
 * no tail past the last 64 the general code's tail loop is empty. */
INLINE void delta_blocked(float *S, const int DK, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                          int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                          const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                          float *dpend) {
    float kb[RW_DELTA_TILE + 1][128] __attribute__((aligned(64))),
        qb[RW_DELTA_TILE + 1][128] __attribute__((aligned(64)));
    for (int64_t t0 = 0; t0 < n_t; t0 += RW_DELTA_TILE) {
        const int64_t t1 = t0 + RW_DELTA_TILE < n_t ? t0 + RW_DELTA_TILE : n_t;
        float dec[RW_DELTA_TILE + 1]; /* the tokens' decays, once for all blocks */
        for (int64_t t = t0 > 0 ? t0 - 1 : 0; t < t1; t++) {
            memcpy(kb[t - t0 + 1], k + t * k_stride, sizeof(float) * DK);
            memcpy(qb[t - t0 + 1], q + t * q_stride, sizeof(float) * DK);
            dec[t - t0 + 1] = expf(g[t * g_stride]);
        }
        for (int j0 = 0; j0 < dv; j0 += 16) {
            float *blk = S + (int64_t)j0 * DK;
            __m512 d[2];
            int64_t s = t0;
            if (s == 0)
                delta_block_step(blk, DK, false, true, NULL, NULL, kb[1], NULL, &d[0], v + j0, dec[1], beta[0], scale,
                                 NULL),
                    s++;
            else d[(s - 1) & 1] = _mm512_loadu_ps(dpend + j0);
            for (; s < t1; s++) {
                rw_delta_prefetch(s + RW_DELTA_AHEAD, n_t, j0 == 0, DK, q, q_stride, k, k_stride, v + j0, v_stride);
                const int i = (int)(s - t0) + 1;
                delta_block_step(blk, DK, true, true, kb[i - 1], qb[i - 1], kb[i], &d[(s - 1) & 1], &d[s & 1],
                                 v + s * v_stride + j0, dec[i], beta[s * beta_stride], scale,
                                 o + (s - 1) * o_stride + j0);
            }
            if (t1 < n_t) _mm512_storeu_ps(dpend + j0, d[(t1 - 1) & 1]);
            else
                delta_block_step(blk, DK, true, false, kb[t1 - t0], qb[t1 - t0], NULL, &d[(n_t - 1) & 1], NULL, NULL,
                                 1.0f, 0.0f, scale, o + (n_t - 1) * o_stride + j0);
        }
    }
}

void rw_delta_rule_head_avx512(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride,
                               const float *k, int64_t k_stride, const float *v, int64_t v_stride, const float *g,
                               int64_t g_stride, const float *beta, int64_t beta_stride, float scale, float *o,
                               int64_t o_stride, float *scratch) {
    if ((dk == 64 || dk == 128) && dv % 16 == 0) {
        if (dk == 64)
            delta_blocked(S, 64, dv, n_t, q, q_stride, k, k_stride, v, v_stride, g, g_stride, beta, beta_stride, scale,
                          o, o_stride, scratch);
        else
            delta_blocked(S, 128, dv, n_t, q, q_stride, k, k_stride, v, v_stride, g, g_stride, beta, beta_stride,
                          scale, o, o_stride, scratch);
        return;
    }
    float *d = scratch;
    for (int64_t t = 0; t < n_t; t++) {
        const float *qt = q + t * q_stride, *kt = k + t * k_stride, *vt = v + t * v_stride;
        const float decay = expf(g[t * g_stride]), b = beta[t * beta_stride];
        float *ot = o + t * o_stride;
        /* Row j of S^T needs only its own d[j], so both passes run over a
         * block of 16 rows at a time: the block stays in L1 between them and
         * its rows' reductions are independent, so they overlap. */
        for (int j0 = 0; j0 < dv; j0 += 16) {
            const int j1 = j0 + 16 < dv ? j0 + 16 : dv;
            for (int j = j0; j < j1; j++) d[j] = (vt[j] - scale_dot(S + (int64_t)j * dk, decay, kt, dk)) * b;
            for (int j = j0; j < j1; j++) ot[j] = mad_dot(S + (int64_t)j * dk, kt, d[j], qt, dk) * scale;
        }
    }
}

/* Rows i .. i + R - 1 of one token's state (R <= SSM_ROWS), the states
 * below np: each row's operations in the one-row order (ops_ssm.c), the
 * rows side by side so that their chains overlap and B and C are loaded
 * once for all of them (one row at a time, the accumulator chains and the
 * horizontal sums ran one after another: about 8 cycles a vector on Zen 5).
 * sums[r]: row r's four accumulators added (a0 + a2) + (a1 + a3), as
 * rw_reduce4 adds them before it sums the lanes. */
enum { SSM_ROWS = 4 };
INLINE void ssm_rows_sums(float *state, int ds, int np, const float *xt, const float *Bt, const float *Ct, __m512 vdA,
                          float dtp, int i, const int R, __m512 *sums) {
    __m512 vx[SSM_ROWS], acc[SSM_ROWS][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
        vx[r] = _mm512_set1_ps(xt[i + r] * dtp);
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
    }
    for (int s = 0; s < np; s += 64)
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const int at = s + 16 * c;
            const __m512 b = _mm512_loadu_ps(Bt + at), cc = _mm512_loadu_ps(Ct + at);
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                float *si = state + (int64_t)(i + r) * ds + at;
                const __m512 st = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(si), vdA), _mm512_mul_ps(b, vx[r]));
                acc[r][c] = _mm512_fmadd_ps(st, cc, acc[r][c]);
                _mm512_storeu_ps(si, st);
            }
        }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) sums[r] =
        _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][2]), _mm512_add_ps(acc[r][1], acc[r][3]));
}

/* ssm_rows_sums' rows finished one by one: their lanes summed, then ggml's
 * scalar tail past np, then y. */
INLINE void ssm_rows(float *state, int ds, int np, const float *xt, const float *Bt, const float *Ct, float dA,
                     float dtp, float D, float *yt, int i, const int R) {
    __m512 sums[SSM_ROWS];
    ssm_rows_sums(state, ds, np, xt, Bt, Ct, _mm512_set1_ps(dA), dtp, i, R, sums);
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
        float *si = state + (int64_t)(i + r) * ds;
        const float xdt = xt[i + r] * dtp;
        float sum = np ? _mm512_reduce_add_ps(sums[r]) : 0.0f;
        for (int s = np; s < ds; s++) { /* ggml's scalar tail as GCC contracts it (ops_ssm.c) */
            const float v = fmaf(si[s], dA, Bt[s] * xdt);
            sum = fmaf(v, Ct[s], sum);
            si[s] = v;
        }
        yt[i + r] = sum + xt[i + r] * D;
    }
}

void rw_ssm_scan_head_avx512(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride,
                             const float *dt, int64_t dt_stride, float dt_bias, float A, const float *B,
                             const float *C, int64_t bc_stride, float D, float *y, int64_t y_stride) {
    const int np = ds & ~63;
    if (np == ds && hd % 16 == 0) {
        /* 16 rows' lane sums reduced together (reduce_add16: rw_reduce4's
         * tree, row by row) and their y written as one vector, y = sum +
         * x * D unfused as below: one row at a time, the horizontal sums
         * and the scalar stores were a sixth of the op */
        const __m512 vD = _mm512_set1_ps(D);
        for (int64_t t = 0; t < n_t; t++) {
            const float *xt = x + t * x_stride, *Bt = B + t * bc_stride, *Ct = C + t * bc_stride;
            float *yt = y + t * y_stride;
            const float dtp = rw_softplus1(dt[t * dt_stride] + dt_bias);
            const __m512 vdA = _mm512_set1_ps(expf(dtp * A));
            for (int i = 0; i < hd; i += 16) {
                __m512 sums[16];
                _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)
                    ssm_rows_sums(state, ds, ds, xt, Bt, Ct, vdA, dtp, i + 4 * q, SSM_ROWS, sums + 4 * q);
                const __m512 xd = _mm512_mul_ps(_mm512_loadu_ps(xt + i), vD);
                _mm512_storeu_ps(yt + i, _mm512_add_ps(reduce_add16(sums), xd));
            }
        }
        return;
    }
    for (int64_t t = 0; t < n_t; t++) {
        const float *xt = x + t * x_stride, *Bt = B + t * bc_stride, *Ct = C + t * bc_stride;
        float *yt = y + t * y_stride;
        const float dtp = rw_softplus1(dt[t * dt_stride] + dt_bias);
        const float dA = expf(dtp * A);
        int i = 0;
        for (; i + SSM_ROWS <= hd; i += SSM_ROWS) ssm_rows(state, ds, np, xt, Bt, Ct, dA, dtp, D, yt, i, SSM_ROWS);
        for (; i < hd; i++) ssm_rows(state, ds, np, xt, Bt, Ct, dA, dtp, D, yt, i, 1);
    }
}

void rw_f32_to_f16_row_avx512(const float *src, rw_f16 *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = rw_f32_to_f16(src[i]);
}

void rw_f16_to_f32_row_avx512(const rw_f16 *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = rw_f16_to_f32(src[i]);
}

/* ==== Attention of a GQA group ========================================== */

/* Scores of up to four query heads (hb) against key j, each exactly as
 * rw_dot_ggml: the key row is loaded once for all of them. */
static inline __attribute__((always_inline)) void group_scores(const float *q, int hd_k, int hb, const void *kj,
                                                               const bool f16, float scale, float *s,
                                                               int64_t s_stride) {
    if (hd_k % 64) {
        for (int h = 0; h < hb; h++) s[h * s_stride] = rw_dot_ggml(kj, f16, q + (int64_t)h * hd_k, hd_k) * scale;
        return;
    }
    __m512 a[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) a[h][c] = _mm512_setzero_ps();
    for (int i = 0; i < hd_k; i += 64)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512 kc = rw_load16(kj, f16, i + 16 * c);
#pragma GCC unroll 4
            for (int h = 0; h < 4; h++)
                if (h < hb) a[h][c] = _mm512_fmadd_ps(kc, _mm512_loadu_ps(q + (int64_t)h * hd_k + i + 16 * c), a[h][c]);
        }
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++)
        if (h < hb) s[h * s_stride] = rw_reduce4(a[h][0], a[h][1], a[h][2], a[h][3]) * scale;
}

/* out[h] = dot(V row i, p_h) for up to four heads, each exactly as
 * rw_dot_ggml_padded: the V row is loaded once for all of them. The row is
 * paged (ops_model.h's rw_attn_pages): the accumulators run on across pages,
 * whose lengths are multiples of 64, so the sums are those over one
 * contiguous row. */
static inline __attribute__((always_inline)) void group_values(const rw_attn_pages *kv, int i, const bool f16,
                                                               const float *p, int64_t b0, int64_t n, int hb,
                                                               float *out, int64_t out_stride) {
    __m512 a[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) a[h][c] = _mm512_setzero_ps();
    const int64_t P = kv->page_len;
    for (int64_t p0 = b0 - b0 % P, pg = b0 / P; p0 < n; p0 += P, pg++) { /* from b0: p is 0 before it (a window) */
        const void *row =
            (const char *)kv->v_pages[pg] + (size_t)(kv->v_off + (int64_t)i * kv->v_stride) * (f16 ? 2 : 4);
        const float *pp = p + p0;
        const int64_t np = n - p0 < P ? n - p0 : P;
        const int64_t nfull = np & ~(int64_t)63;
        /* in a paged cache, the next value dimension's piece of this page
         * (the row after this one): pages are visited once per dimension,
         * in pieces too far apart for the hardware prefetcher to follow
         * (bench ops: decode over 4096 f16 positions in pages of 64, about
         * 2x faster). A prefetch past the last dimension is harmless. */
        if (P < n) {
            const char *next = (const char *)row + (size_t)kv->v_stride * (f16 ? 2 : 4);
            const size_t bytes = (size_t)np * (f16 ? 2 : 4);
            for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
        }
        for (int64_t k = p0 < b0 ? b0 - p0 : 0; k < nfull; k += 64)
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m512 vc = rw_load16(row, f16, k + 16 * c);
#pragma GCC unroll 4
                for (int h = 0; h < 4; h++)
                    if (h < hb) a[h][c] = _mm512_fmadd_ps(vc, _mm512_loadu_ps(pp + h * n + k + 16 * c), a[h][c]);
            }
        for (int c = 0; c < 4; c++) { /* the masked tail: only in the last page */
            const int64_t at = nfull + 16 * c;
            if (at >= np) break;
            const __mmask16 m = np - at >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (np - at)) - 1);
            const __m512 vc = rw_load16m(row, f16, at, m);
            for (int h = 0; h < hb; h++)
                a[h][c] = _mm512_fmadd_ps(vc, _mm512_maskz_loadu_ps(m, pp + h * n + at), a[h][c]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++)
        if (h < hb) out[h * out_stride] = rw_reduce4(a[h][0], a[h][1], a[h][2], a[h][3]);
}

/* The largest of s[j..n) (-inf for none), 16 at a time: the value the
 * reference's scalar scan (`if (s[j] > mx) mx = s[j]`) finds, NaNs skipped
 * as there (max_ps returns its second operand, the running maximum, when
 * either is a NaN). Only the sign of a zero maximum may differ, which no
 * later step sees: s - mx differs then only for s = +-0, and exp(+0) and
 * exp(-0) are both 1. (The scalar scan, a chain of dependent compares, was
 * 40% of prefill's softmax.) */
static inline float max_from(const float *s, int64_t j, int64_t n) {
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
    for (; j + 32 <= n; j += 32) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(s + j), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(s + j + 16), m1);
    }
    for (; j < n; j += 16) {
        const __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        m0 = _mm512_mask_max_ps(m0, k, _mm512_maskz_loadu_ps(k, s + j), m0);
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

/* Softmax of one head's scores in place, as rw_attn_head: max, ggml's vector
 * exp per (masked) 16-lane block, block sums added in double, times 1/sum.
 * A sliding window: s[b0..first) become 0 (b0 = first's 64-block), s before
 * b0 is not touched. */
void rw_attn_softmax_avx512(float *s, int64_t first, int64_t b0, int64_t n, const float *sink) {
    float mx = max_from(s, first, n);
    if (sink && *sink > mx) mx = *sink;
    const __m512 vmx = _mm512_set1_ps(mx);
    double sum = 0.0;
    for (int64_t j = b0; j < n; j += 16) {
        const __mmask16 m = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        const __mmask16 live = m & rw_lanes_from(first - j);
        const __m512 e = _mm512_maskz_mov_ps(live, rw_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), vmx)));
        _mm512_mask_storeu_ps(s + j, m, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    if (sink) sum += (double)expf(*sink - mx);
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (int64_t j = b0; j < n; j += 16) {
        const __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        _mm512_mask_storeu_ps(s + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), inv));
    }
}

static inline __attribute__((always_inline)) void attn_group(const float *q, int r, const rw_attn_pages *kv,
                                                             const bool f16, int64_t n_pos, int hd_k, int hd_v,
                                                             float scale, float *scores, float *out) {
    const size_t esz = f16 ? 2 : 4;
    const int64_t P = kv->page_len;
    /* a sliding window: from the 64-block holding `first` (ops_model.h) */
    const int64_t first = kv->first > 0 ? kv->first : 0, b0 = first & ~(int64_t)63;
    for (int h0 = 0; h0 < r; h0 += 4) {
        const int hb = r - h0 < 4 ? r - h0 : 4;
        const float *qb = q + (int64_t)h0 * hd_k;
        float *sb = scores + h0 * n_pos;
        for (int64_t p0 = b0 - b0 % P, pg = b0 / P; p0 < n_pos; p0 += P, pg++) {
            const char *k = (const char *)kv->k_pages[pg] + (size_t)kv->k_off * esz;
            const int64_t np = n_pos - p0 < P ? n_pos - p0 : P;
            for (int64_t j = p0 < b0 ? b0 - p0 : 0; j < np; j++)
                group_scores(qb, hd_k, hb, k + (size_t)(j * hd_k) * esz, f16, scale, sb + p0 + j, n_pos);
        }
        for (int h = 0; h < hb; h++)
            rw_attn_softmax_avx512(sb + h * n_pos, first, b0, n_pos, kv->sinks ? kv->sinks + h0 + h : NULL);
        for (int i = 0; i < hd_v; i++)
            group_values(kv, i, f16, sb, b0, n_pos, hb, out + (int64_t)h0 * hd_v + i, hd_v);
    }
}

void rw_attn_group_avx512(const float *q, int r, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                          float scale, float *scores, float *out) {
    if (f16) attn_group(q, r, kv, true, n_pos, hd_k, hd_v, scale, scores, out);
    else attn_group(q, r, kv, false, n_pos, hd_k, hd_v, scale, scores, out);
}
