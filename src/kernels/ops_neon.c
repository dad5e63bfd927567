/* ops_neon.c - NEON twins of some ops.h kernels (see ops_int.h): SiLU,
 * SwiGLU, softmax, the gated RMS norm, the attention of one head, the
 * gated delta rule and the Mamba2 scan. Each computes bit for bit what
 * the reference (and so every other tier) computes: the reference's
 * 16-lane part is four 4-lane registers here, element-wise steps are the
 * same operations, and ggml's vector expf (rw_exp_ggml) is written with
 * the same fused and rounded steps; its final scaling by 2^n is two
 * multiplies by powers of two, the first exact, as the reference does it.
 * The other ops run their reference versions on ARM. */
#include <arm_neon.h>
#include <math.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

#define INLINE static inline __attribute__((always_inline))

/* 2^k for integers k in [-126, 127], as floats. */
INLINE float32x4_t pow2i(int32x4_t k) { return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k, vdupq_n_s32(127)), 23)); }

/* rw_exp_ggml on 4 lanes. */
INLINE float32x4_t exp4(float32x4_t x) {
    const float32x4_t shift = vdupq_n_f32(0x1.8p23f);
    const float32x4_t z = vfmaq_f32(shift, x, vdupq_n_f32(0x1.715476p+0f));
    const float32x4_t n = vsubq_f32(z, shift);
    const float32x4_t b = vfmsq_f32(vfmsq_f32(x, n, vdupq_n_f32(0x1.62e4p-1f)), n, vdupq_n_f32(0x1.7f7d1cp-20f));
    const float32x4_t u = vmulq_f32(b, b);
    const float32x4_t hi = vfmaq_f32(vfmaq_f32(vdupq_n_f32(0x1.fffdb6p-2f), vdupq_n_f32(0x1.555e66p-3f), b),
                                     vfmaq_f32(vdupq_n_f32(0x1.573e2ep-5f), vdupq_n_f32(0x1.0e4020p-7f), b), u);
    const float32x4_t poly = vfmaq_f32(vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0x1.ffffecp-1f), b), hi, u);
    int32x4_t k = vcvtq_s32_f32(n); /* n is an integer; out-of-range lanes are replaced below */
    k = vminq_s32(vmaxq_s32(k, vdupq_n_s32(-192)), vdupq_n_s32(192));
    const int32x4_t k1 = vshrq_n_s32(k, 1);
    float32x4_t r = vmulq_f32(vmulq_f32(poly, pow2i(k1)), pow2i(vsubq_s32(k, k1)));
    const uint32x4_t big = vcgtq_f32(vabsq_f32(n), vdupq_n_f32(192.0f));
    if (vmaxvq_u32(big)) {
        const uint32x4_t neg = vcltq_f32(x, vdupq_n_f32(0.0f));
        r = vbslq_f32(vandq_u32(big, neg), vdupq_n_f32(0.0f), r);
        r = vbslq_f32(vbicq_u32(big, neg), vdupq_n_f32(INFINITY), r);
    }
    return r;
}

/* rw_silu_ggml on 4 lanes: x / (1 + exp(0 - x)). */
INLINE float32x4_t silu4(float32x4_t x) {
    const float32x4_t e = exp4(vsubq_f32(vdupq_n_f32(0.0f), x));
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), e));
}

/* rw_reduce16_ref of the 16 lanes [a0 | a1 | a2 | a3]. */
INLINE float reduce16(float32x4_t a0, float32x4_t a1, float32x4_t a2, float32x4_t a3) {
    const float32x4_t u = vaddq_f32(vaddq_f32(a3, a1), vaddq_f32(a2, a0));
    return (vgetq_lane_f32(u, 0) + vgetq_lane_f32(u, 2)) + (vgetq_lane_f32(u, 1) + vgetq_lane_f32(u, 3));
}

void rw_silu_neon(const float *x, float *y, int64_t n) {
    const int64_t nv = n & ~(int64_t)15; /* the reference's vector part */
    int64_t i = 0;
    for (; i < nv; i += 4) vst1q_f32(y + i, silu4(vld1q_f32(x + i)));
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

void rw_swiglu_neon(float *g, const float *u, int64_t n) {
    const int64_t nv = n & ~(int64_t)15;
    int64_t i = 0;
    for (; i < nv; i += 4) vst1q_f32(g + i, vmulq_f32(silu4(vld1q_f32(g + i)), vld1q_f32(u + i)));
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* rw_relu_sq_ref 4 values at a time (compare and select: vmaxq would keep
 * a NaN). */
void rw_relu_sq_neon(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float32x4_t r = vbslq_f32(vcgtq_f32(v, vdupq_n_f32(0.0f)), v, vdupq_n_f32(0.0f));
        vst1q_f32(x + i, vmulq_f32(r, r));
    }
    if (i < n) rw_relu_sq_ref(x + i, n - i);
}

/* rw_geglu_ref 4 values at a time: the half conversion rounds to nearest
 * even (FPCR's default mode) as rw_f32_to_f16 does, the table looked up
 * lane by lane, the clamps ordered compares (false for NaN, as the
 * reference's ifs), the products the same one multiply; a block holding a
 * NaN goes to the reference. */
void rw_geglu_neon(float *g, const float *u, int64_t n) {
    const float *tab = rw_gelu_f16_table();
    const float32x4_t lo = vdupq_n_f32(-10.0f), hi = vdupq_n_f32(10.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = vld1q_f32(g + i), uv = vld1q_f32(u + i);
        if (vminvq_u32(vceqq_f32(x, x)) == 0) {
            rw_geglu_ref(g + i, u + i, 4);
            continue;
        }
        const uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(x));
        const float t[4] = {tab[vget_lane_u16(h, 0)], tab[vget_lane_u16(h, 1)], tab[vget_lane_u16(h, 2)],
                            tab[vget_lane_u16(h, 3)]};
        float32x4_t y = vmulq_f32(vld1q_f32(t), uv);
        y = vbslq_f32(vcgeq_f32(x, hi), vmulq_f32(x, uv), y);
        y = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), vcleq_f32(x, lo))); /* +0 */
        vst1q_f32(g + i, y);
    }
    if (i < n) rw_geglu_ref(g + i, u + i, n - i);
}

/* The KV cache's f16 rows: the conversions 4 at a time (round to nearest
 * even, as rw_f32_to_f16), the tail scalar. */
void rw_f32_to_f16_row_neon(const float *src, rw_f16 *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) dst[i] = rw_f32_to_f16(src[i]);
}

void rw_f16_to_f32_row_neon(const rw_f16 *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
    for (; i < n; i++) dst[i] = rw_f16_to_f32(src[i]);
}

void rw_softmax_neon(const float *x, float *y, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    const float32x4_t vmx = vdupq_n_f32(mx);
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t e[4];
        for (int c = 0; c < 4; c++) {
            e[c] = exp4(vsubq_f32(vld1q_f32(x + i + 4 * c), vmx));
            vst1q_f32(y + i + 4 * c, e[c]);
        }
        sum += (double)reduce16(e[0], e[1], e[2], e[3]);
    }
    for (; i < n; i++) {
        y[i] = expf(x[i] - mx);
        sum += (double)y[i];
    }
    const float inv = (float)(1.0 / sum);
    const float32x4_t vinv = vdupq_n_f32(inv);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(y + i), vinv));
    for (; i < n; i++) y[i] *= inv;
}

void rw_rmsnorm_gated_neon(const float *x, const float *w, const float *z, int n_groups, int gs, const float *scales,
                           float *y) {
    for (int g = 0; g < n_groups; g++) {
        const float *xg = x + (int64_t)g * gs, *zg = z + (int64_t)g * gs;
        float *yg = y + (int64_t)g * gs;
        const float scale = scales[g];
        const float32x4_t vs = vdupq_n_f32(scale);
        const int nv = gs & ~15;
        int i = 0;
        for (; i < nv; i += 4) {
            const float32x4_t nx = vmulq_f32(vmulq_f32(vld1q_f32(xg + i), vs), vld1q_f32(w + i));
            vst1q_f32(yg + i, vmulq_f32(nx, silu4(vld1q_f32(zg + i))));
        }
        for (; i < gs; i++) yg[i] = ((xg[i] * scale) * w[i]) * (zg[i] / (1.0f + expf(-zg[i])));
    }
}

/* ==== attention =========================================================== */

/* 4 elements at base[i..], f32 or f16 (converted exactly). */
INLINE float32x4_t load4(const void *base, bool f16, int64_t i) {
    if (f16) return vcvt_f32_f16(vld1_f16((const float16_t *)base + i));
    return vld1q_f32((const float *)base + i);
}

static float elem(const void *base, bool f16, int64_t i) {
    return f16 ? rw_f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

/* rw_reduce64_ref of 64 lanes in 16 registers (lanes 4c .. 4c + 3 in a[c]):
 * lane l + (l + 32) + ((l + 16) + (l + 48)), then reduce16. */
INLINE float reduce64(const float32x4_t a[16]) {
    float32x4_t t[4];
    for (int r = 0; r < 4; r++) t[r] = vaddq_f32(vaddq_f32(a[r], a[8 + r]), vaddq_f32(a[4 + r], a[12 + r]));
    return reduce16(t[0], t[1], t[2], t[3]);
}

/* rw_dot_ggml of n elements of x (f32 or f16) and y: 64 lanes up to the last
 * multiple of 64, reduce64, then the rest fused onto the float sum (f32) or
 * added in double (f16). */
static float dot_ggml(const void *x, bool f16, const float *y, int64_t n) {
    float32x4_t a[16];
    for (int c = 0; c < 16; c++) a[c] = vdupq_n_f32(0.0f);
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int c = 0; c < 16; c++) a[c] = vfmaq_f32(a[c], load4(x, f16, i + 4 * c), vld1q_f32(y + i + 4 * c));
    const float red = reduce64(a);
    if (!f16) {
        float sum = red;
        for (int64_t i = np; i < n; i++) sum = fmaf(elem(x, f16, i), y[i], sum);
        return sum;
    }
    double sum = (double)red;
    for (int64_t i = np; i < n; i++) sum += (double)(elem(x, f16, i) * y[i]);
    return (float)sum;
}

/* rw_attn_head_paged_ref's arithmetic (ops_model.c): the scores, their
 * softmax in 16-element blocks, then each output as 64 lanes over the
 * positions. A 64-position block never crosses a page (pages hold a
 * multiple of 64 positions, or there is one). */
void rw_attn_head_neon(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                       float scale, float *scores, float *out) {
    const int64_t P = kv->page_len;
    const int64_t first = kv->first > 0 ? kv->first : 0, b0 = first & ~(int64_t)63;
    const size_t esz = f16 ? 2 : 4;
    for (int64_t j = b0; j < n_pos; j++) {
        const void *kj = (const char *)kv->k_pages[j / P] + (size_t)(kv->k_off + (j % P) * hd_k) * esz;
        scores[j] = dot_ggml(kj, f16, q, hd_k) * scale;
    }
    float mx = -INFINITY;
    for (int64_t j = first; j < n_pos; j++)
        if (scores[j] > mx) mx = scores[j];
    const float32x4_t vmx = vdupq_n_f32(mx);
    double sum = 0.0;
    for (int64_t j = b0; j < n_pos; j += 16) {
        if (j >= first && j + 16 <= n_pos) {
            float32x4_t e[4];
            for (int c = 0; c < 4; c++) {
                e[c] = exp4(vsubq_f32(vld1q_f32(scores + j + 4 * c), vmx));
                vst1q_f32(scores + j + 4 * c, e[c]);
            }
            sum += (double)reduce16(e[0], e[1], e[2], e[3]);
            continue;
        }
        float e[16];
        for (int l = 0; l < 16; l++) {
            e[l] = j + l < n_pos && j + l >= first ? rw_exp_ggml(scores[j + l] - mx) : 0.0f;
            if (j + l < n_pos) scores[j + l] = e[l];
        }
        sum += (double)rw_reduce16_ref(e);
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t j = b0; j < n_pos; j++) scores[j] *= inv;
    const int64_t nfull = b0 + ((n_pos - b0) & ~(int64_t)63);
    for (int i = 0; i < hd_v; i++) {
        float32x4_t a[16];
        for (int c = 0; c < 16; c++) a[c] = vdupq_n_f32(0.0f);
        for (int64_t j = b0; j < nfull; j += 64) {
            const void *vp = kv->v_pages[j / P];
            const int64_t off = kv->v_off + i * kv->v_stride + j % P;
            for (int c = 0; c < 16; c++)
                a[c] = vfmaq_f32(a[c], load4(vp, f16, off + 4 * c), vld1q_f32(scores + j + 4 * c));
        }
        if (nfull < n_pos) { /* the last, partial block one lane at a time */
            float l[64];
            for (int c = 0; c < 16; c++) vst1q_f32(l + 4 * c, a[c]);
            const void *vp = kv->v_pages[nfull / P];
            for (int64_t j = nfull; j < n_pos; j++)
                l[j % 64] = fmaf(elem(vp, f16, kv->v_off + i * kv->v_stride + j % P), scores[j], l[j % 64]);
            for (int c = 0; c < 16; c++) a[c] = vld1q_f32(l + 4 * c);
        }
        out[i] = reduce64(a);
    }
}

/* ==== the recurrences ===================================================== */

/* row *= decay, returning dot(row, k) in ggml_vec_dot_f32's order: 64
 * lanes up to the last multiple of 64, reduce64, the tail fused one by one. */
static inline float scale_dot(float *row, float decay, const float *k, int n) {
    float32x4_t a[16];
    for (int c = 0; c < 16; c++) a[c] = vdupq_n_f32(0.0f);
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64)
        for (int c = 0; c < 16; c++) {
            const float32x4_t r = vmulq_n_f32(vld1q_f32(row + i + 4 * c), decay);
            vst1q_f32(row + i + 4 * c, r);
            a[c] = vfmaq_f32(a[c], r, vld1q_f32(k + i + 4 * c));
        }
    float sum = reduce64(a);
    for (int i = np; i < n; i++) {
        row[i] *= decay;
        sum = fmaf(row[i], k[i], sum);
    }
    return sum;
}

/* row += k * d (fused), returning dot(row, q) in the same order. */
static inline float mad_dot(float *row, const float *k, float d, const float *q, int n) {
    const float32x4_t vd = vdupq_n_f32(d);
    float32x4_t a[16];
    for (int c = 0; c < 16; c++) a[c] = vdupq_n_f32(0.0f);
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64)
        for (int c = 0; c < 16; c++) {
            const float32x4_t r = vfmaq_f32(vld1q_f32(row + i + 4 * c), vld1q_f32(k + i + 4 * c), vd);
            vst1q_f32(row + i + 4 * c, r);
            a[c] = vfmaq_f32(a[c], r, vld1q_f32(q + i + 4 * c));
        }
    float sum = reduce64(a);
    for (int i = np; i < n; i++) {
        row[i] = fmaf(k[i], d, row[i]);
        sum = fmaf(row[i], q[i], sum);
    }
    return sum;
}

void rw_delta_rule_head_neon(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                             int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                             const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                             float *scratch) {
    float *d = scratch;
    for (int64_t t = 0; t < n_t; t++) {
        const float *qt = q + t * q_stride, *kt = k + t * k_stride, *vt = v + t * v_stride;
        const float decay = expf(g[t * g_stride]), b = beta[t * beta_stride];
        float *ot = o + t * o_stride;
        /* blocks of 16 rows of S^T: a row needs only its own d[j], and the
         * block stays in L1 between the two passes */
        for (int j0 = 0; j0 < dv; j0 += 16) {
            const int j1 = j0 + 16 < dv ? j0 + 16 : dv;
            for (int j = j0; j < j1; j++) d[j] = (vt[j] - scale_dot(S + (int64_t)j * dk, decay, kt, dk)) * b;
            for (int j = j0; j < j1; j++) ot[j] = mad_dot(S + (int64_t)j * dk, kt, d[j], qt, dk) * scale;
        }
    }
}

void rw_ssm_scan_head_neon(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride, const float *dt,
                           int64_t dt_stride, float dt_bias, float A, const float *B, const float *C, int64_t bc_stride,
                           float D, float *y, int64_t y_stride) {
    const int np = ds & ~63;
    for (int64_t t = 0; t < n_t; t++) {
        const float *xt = x + t * x_stride, *Bt = B + t * bc_stride, *Ct = C + t * bc_stride;
        float *yt = y + t * y_stride;
        const float dtp = rw_softplus1(dt[t * dt_stride] + dt_bias);
        const float dA = expf(dtp * A);
        for (int i = 0; i < hd; i++) {
            float *si = state + (int64_t)i * ds;
            const float xdt = xt[i] * dtp;
            float32x4_t acc[16];
            for (int c = 0; c < 16; c++) acc[c] = vdupq_n_f32(0.0f);
            for (int s = 0; s < np; s += 64)
                for (int c = 0; c < 16; c++) {
                    const int at = s + 4 * c;
                    const float32x4_t st =
                        vaddq_f32(vmulq_n_f32(vld1q_f32(si + at), dA), vmulq_n_f32(vld1q_f32(Bt + at), xdt));
                    acc[c] = vfmaq_f32(acc[c], st, vld1q_f32(Ct + at));
                    vst1q_f32(si + at, st);
                }
            float sum = np ? reduce64(acc) : 0.0f;
            for (int s = np; s < ds; s++) { /* ggml's scalar tail as GCC contracts it (ops_ssm.c) */
                const float v = fmaf(si[s], dA, Bt[s] * xdt);
                sum = fmaf(v, Ct[s], sum);
                si[s] = v;
            }
            yt[i] = sum + xt[i] * D;
        }
    }
}
