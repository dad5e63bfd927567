/* ops_avx2.c - AVX2 twins of the recurrences of ops.h (see ops_int.h), for
 * machines without AVX-512: the delta rule and the Mamba2 scan with 8-lane
 * vectors in the order of ggml's AVX2 build (ggml_vec_dot_f32 with four
 * 8-lane FMA accumulators over 32-element steps, reduced pairwise and then
 * across the lanes with two horizontal adds; ggml_vec_mad_f32 as FMA). */
#include <immintrin.h>
#include <math.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

/* (a0 + a2) + (a1 + a3), then the 8 lanes: low + high half, two hadds. */
static inline float reduce4_8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

/* row *= decay, returning dot(row, k) in ggml_vec_dot_f32's AVX2 order. */
static inline float scale_dot8(float *row, float decay, const float *k, int n) {
    const __m256 vd = _mm256_set1_ps(decay);
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int c = 0; c < 4; c++) {
            const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i + 8 * c), vd);
            _mm256_storeu_ps(row + i + 8 * c, r);
            a[c] = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i + 8 * c), a[c]);
        }
    double sum = (double)reduce4_8(a[0], a[1], a[2], a[3]);
    for (int i = np; i < n; i++) {
        row[i] *= decay;
        sum += (double)(row[i] * k[i]);
    }
    return (float)sum;
}

/* row += k * d (FMA), returning dot(row, q) in the same order. */
static inline float mad_dot8(float *row, const float *k, float d, const float *q, int n) {
    const __m256 vd = _mm256_set1_ps(d);
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int c = 0; c < 4; c++) {
            const __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 8 * c), vd, _mm256_loadu_ps(row + i + 8 * c));
            _mm256_storeu_ps(row + i + 8 * c, r);
            a[c] = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i + 8 * c), a[c]);
        }
    double sum = (double)reduce4_8(a[0], a[1], a[2], a[3]);
    for (int i = np; i < n; i++) {
        row[i] = fmaf(k[i], d, row[i]);
        sum += (double)(row[i] * q[i]);
    }
    return (float)sum;
}

void rw_delta_rule_head_avx2(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                             int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                             const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                             float *scratch) {
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
            for (int j = j0; j < j1; j++) d[j] = (vt[j] - scale_dot8(S + (int64_t)j * dk, decay, kt, dk)) * b;
            for (int j = j0; j < j1; j++) ot[j] = mad_dot8(S + (int64_t)j * dk, kt, d[j], qt, dk) * scale;
        }
    }
}

void rw_ssm_scan_head_avx2(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride,
                           const float *dt, int64_t dt_stride, float dt_bias, float A, const float *B, const float *C,
                           int64_t bc_stride, float D, float *y, int64_t y_stride) {
    const int np = ds & ~31;
    for (int64_t t = 0; t < n_t; t++) {
        const float *xt = x + t * x_stride, *Bt = B + t * bc_stride, *Ct = C + t * bc_stride;
        float *yt = y + t * y_stride;
        const float dtp = rw_softplus1(dt[t * dt_stride] + dt_bias);
        const float dA = expf(dtp * A);
        const __m256 vdA = _mm256_set1_ps(dA);
        for (int i = 0; i < hd; i++) {
            float *si = state + (int64_t)i * ds;
            const float xdt = xt[i] * dtp;
            const __m256 vx = _mm256_set1_ps(xdt);
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int s = 0; s < np; s += 32)
                for (int c = 0; c < 4; c++) {
                    const int at = s + 8 * c;
                    const __m256 st = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(si + at), vdA),
                                                    _mm256_mul_ps(_mm256_loadu_ps(Bt + at), vx));
                    acc[c] = _mm256_fmadd_ps(st, _mm256_loadu_ps(Ct + at), acc[c]);
                    _mm256_storeu_ps(si + at, st);
                }
            float sum = np ? reduce4_8(acc[0], acc[1], acc[2], acc[3]) : 0.0f;
            for (int s = np; s < ds; s++) { /* ggml's scalar tail as GCC contracts it (ops_ssm.c) */
                const float v = fmaf(si[s], dA, Bt[s] * xdt);
                sum = fmaf(v, Ct[s], sum);
                si[s] = v;
            }
            yt[i] = sum + xt[i] * D;
        }
    }
}
