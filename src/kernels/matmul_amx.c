/* matmul_amx.c - the AMX tier: the AVX-512 tier's kernels, with the panel
 * form (many activation rows over repacked weights) computing its exact
 * integer sums on the AMX int8 tiles.
 *
 * Why the results are bitwise the AVX-512 tier's (and the reference's):
 * every output is a float step per block over exact integer block sums.
 * The tiles only compute those integers (in any order: integer sums are
 * exact); the float step after them is the AVX-512 panel form's, the same
 * operations in the same order, per output. So a row's result does not
 * depend on which tier, form, row count or thread computed it.
 *
 * Tiles (palette 1): C (up to 16 rows x 16 int32) += A (up to 16 rows x K
 * bytes, signed) . B (K/4 rows x 16 columns x 4 bytes), where A holds
 * activation rows and B 16 weight rows, 4 consecutive elements per dword
 * (the AVX-512 panels' layout: one dword per weight row).
 *
 * Q8_0 and the 32-block types decoded to int8 (Q4_0, Q5_0, IQ4_NL, MXFP4)
 * take the AVX-512 tier's panels as they are: per block, 8 x 64 bytes
 * (dword s of 16 rows, biased +128 to unsigned), so one tdpbsud with K = 32
 * gives the 16 x 16 block sums + 128 * the activation quants' sum, which
 * the activation's correction removes, as the AVX-512 form does.
 *
 * Q4_K, Q5_K and Q6_K take their own panels (rw_avx512_amx_pack_*, packed
 * with the AVX-512 code): per super-block the products w = sc * q of the
 * scale and the (unsigned) quant, as the AVX-512 form's integer sum
 * isum = sum_j sc_j * dot_j uses them; w fits 16 bits, so it is split into
 * an unsigned low byte and a signed high byte, and
 * isum = (x . lo) + 256 * (x . hi), two tile products per 64 elements
 * (|isum| <= 256 * 8064 * 127 < 2^31). The min term (the bsums against the
 * min pairs) and the float step are the AVX-512 form's vector code.
 */
#include <pthread.h>

#include "kernels/matmul_avx512_int.h"

enum { AMX_ROWS = 16, AMX_MAX_NX = 32 };

/* The tile configuration (palette 1) as ldtilecfg reads it. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* GCC 12's tile intrinsics tell the compiler nothing of the memory they
 * touch (ldtilecfg's operand is one pointer wide, tilestored has none), so
 * stores into the configuration are dropped as dead and reads of stored
 * sums could move above the store: these say what they read and write.
 * Loads read weights and activations that nothing here writes. */
#define AMX_LOAD(t, base, stride) __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"((long)(stride)))
/* 16 rows of 16 int32 sums into out (64 bytes a row) */
#define AMX_STORE16(t, out) \
    __asm__ volatile("tilestored %%tmm" #t ", (%1,%2,1)" : "=m"(*(int32_t(*)[16][16])(out)) : "r"(out), "r"(64L))

/* Tiles 0-3: accumulators (C), 4-5: activation rows (A), 6-7: weights (B).
 * m0, m1: activation rows in the first and second group of 16 (m1 may be
 * 0: tiles 2, 3 and 5 unused); a_bytes: A's row bytes (K); b_rows: K / 4. */
static void amx_configure(int m0, int m1, int a_bytes, int b_rows) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int m[4] = {m0, m0, m1, m1};
    for (int t = 0; t < 4; t++)
        if (m[t]) c.rows[t] = (uint8_t)m[t], c.colsb[t] = 64;
    c.rows[4] = (uint8_t)m0, c.colsb[4] = (uint16_t)a_bytes;
    if (m1) c.rows[5] = (uint8_t)m1, c.colsb[5] = (uint16_t)a_bytes;
    for (int t = 6; t < 8; t++) c.rows[t] = (uint8_t)b_rows, c.colsb[t] = 64;
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
}

/* ---- Q8_0 and the decoded 32-block types ------------------------------- */

#define Q8A_PF_DIST 4096 /* bytes ahead that the panel is prefetched */

/* One panel (16 outputs, nl kept) against nx <= 32 activation rows; the
 * tiles are configured (amx_configure(m0, nx - m0, 32, 8)). The AVX-512
 * form's float step per output: acc[k] = fma(isum_b, dw_b * dx_b, acc[k])
 * over blocks 8o+2k, 8o+2k+1 in the panel's order, then
 * y = (acc[0] + acc[1]) + (acc[2] + acc[3]). */
static void q8_amx_panel(int64_t n, const wp_q8_blk *P, const uint8_t *xp, size_t xps, int nx, int nl, float *out,
                         int64_t os, const int F32S) {
    const int64_t nb = n / 32, n_oct = (nb + 7) / 8;
    const uint16_t(*D)[16] = (const uint16_t(*)[16])(P + nb);
    const float(*DF)[16] = (const float(*)[16])(P + nb);
    const int two = nx > AMX_ROWS;
    int32_t isum[AMX_MAX_NX][16] __attribute__((aligned(64)));
    __m512 part[2][AMX_MAX_NX], acc[AMX_MAX_NX];
    for (int k = 0; k < 4; k++) {
        for (int r = 0; r < nx; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t o = 0; o < n_oct; o++)
            for (int h = 0; h < 2; h++) {
                const int64_t b = 8 * o + 2 * k + h;
                if (b >= nb) break;
                for (int c = 0; c < 8; c++) _mm_prefetch((const char *)P->q[c] + Q8A_PF_DIST, _MM_HINT_T0);
                AMX_LOAD(6, P->q, 64);
                _tile_zero(0);
                AMX_LOAD(4, xp + (size_t)b * sizeof(xp_q8_blk), xps);
                _tile_dpbsud(0, 4, 6);
                if (two) {
                    _tile_zero(2);
                    AMX_LOAD(5, xp + AMX_ROWS * xps + (size_t)b * sizeof(xp_q8_blk), xps);
                    _tile_dpbsud(2, 5, 6);
                }
                AMX_STORE16(0, isum[0]);
                if (two) AMX_STORE16(2, isum[AMX_ROWS]);
                const __m512 dw =
                    F32S ? _mm512_loadu_ps(*DF) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)*D));
                P++, D++, DF++;
                for (int r = 0; r < nx; r++) {
                    const xp_q8_blk *xb = (const xp_q8_blk *)(xp + (size_t)r * xps) + b;
                    const __m512i ia = _mm512_add_epi32(_mm512_load_si512(isum[r]), _mm512_set1_epi32(xb->corr));
                    const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xb->d));
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), sc, acc[r]);
                }
            }
        for (int r = 0; r < nx; r++) part[k / 2][r] = k % 2 == 0 ? acc[r] : _mm512_add_ps(part[k / 2][r], acc[r]);
    }
    const __mmask16 lanes = (__mmask16)((1u << nl) - 1);
    for (int r = 0; r < nx; r++) _mm512_mask_storeu_ps(out + r * os, lanes, _mm512_add_ps(part[0][r], part[1][r]));
}

/* w: the panel of weight row 0 (ws: bytes per row in the GGUF layout, so a
 * panel spans 16 * ws); nw rows from there, nx <= AMX_MAX_NX activation
 * rows; out[r * os + i]. */
static void q8_amx_tile(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os, const int F32S) {
    const int m0 = nx < AMX_ROWS ? nx : AMX_ROWS;
    amx_configure(m0, nx - m0, 32, 8);
    for (int i = 0; i < nw; i += AMX_ROWS) {
        const int nl = nw - i < AMX_ROWS ? nw - i : AMX_ROWS;
        q8_amx_panel(n, (const wp_q8_blk *)(w + (size_t)i * ws), xp, xps, nx, nl, out + i, os, F32S);
    }
    _tile_release();
}

static void tile_p_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os) {
    q8_amx_tile(n, w, ws, nw, xp, xps, nx, out, os, 0);
}
static void tile_p_wt(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, float *out,
                      int64_t os) {
    q8_amx_tile(n, w, ws, nw, xp, xps, nx, out, os, 1);
}

/* ---- Q4_K, Q5_K, Q6_K ----------------------------------------------------
 *
 * A panel holds per super-block (RW_AMX_K_SB_BYTES):
 *   lo  [64 dwords][16 rows]: the low bytes of w = sc * q, unsigned; dword
 *       g holds elements 4g .. 4g+3, so bytes 1024 ks .. 1024 ks + 1023 are
 *       the B tile of elements 64 ks .. 64 ks + 63;
 *   hi  the same for the high bytes, signed;
 *   pairs [8][16 rows] int16 pairs: Q4_K / Q5_K (m_j, m_j), Q6_K
 *         (32 sc_2k, 32 sc_2k+1), against the activation's bsums pairs;
 *   d, dmin [16 rows] f32 each. */
enum { KA_Q45 = 0, KA_Q6 = 1 };

static void k_amx_panel(int64_t nsb, const uint8_t *P, const uint8_t *xp, size_t xps, int nx, int nl, float *out,
                        int64_t os, const int MODE) {
    const int two = nx > AMX_ROWS;
    int32_t lo[AMX_MAX_NX][16] __attribute__((aligned(64))), hi[AMX_MAX_NX][16] __attribute__((aligned(64)));
    __m512 acc[AMX_MAX_NX];
    for (int r = 0; r < nx; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *B = P + (size_t)sb * RW_AMX_K_SB_BYTES;
        const uint8_t *x0 = xp + (size_t)sb * sizeof(x_super), *x1 = x0 + AMX_ROWS * xps;
        _tile_zero(0);
        _tile_zero(1);
        if (two) {
            _tile_zero(2);
            _tile_zero(3);
        }
        for (int ks = 0; ks < 4; ks++) {
            const char *next = (const char *)B + RW_AMX_K_SB_BYTES + 1024 * ks; /* the next super-block's */
            for (int c = 0; c < 16; c++) {
                _mm_prefetch(next + 64 * c, _MM_HINT_T0);
                _mm_prefetch(next + 4096 + 64 * c, _MM_HINT_T0);
            }
            if (ks < 3) _mm_prefetch(next - 1024 * ks + 8192 + 256 * ks, _MM_HINT_T0);
            if (ks < 2) _mm_prefetch(next - 1024 * ks + 8192 + 256 * ks + 128, _MM_HINT_T0);
            AMX_LOAD(6, B + 1024 * ks, 64);
            AMX_LOAD(7, B + 4096 + 1024 * ks, 64);
            AMX_LOAD(4, x0 + 64 * ks, xps);
            _tile_dpbsud(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            if (two) {
                AMX_LOAD(5, x1 + 64 * ks, xps);
                _tile_dpbsud(2, 5, 6);
                _tile_dpbssd(3, 5, 7);
            }
        }
        AMX_STORE16(0, lo[0]);
        AMX_STORE16(1, hi[0]);
        if (two) {
            AMX_STORE16(2, lo[AMX_ROWS]);
            AMX_STORE16(3, hi[AMX_ROWS]);
        }
        const __m512i *PR = (const __m512i *)(B + 8192);
        const __m512 dw = _mm512_load_ps(B + 8192 + 512), dm = _mm512_load_ps(B + 8192 + 576);
        for (int r = 0; r < nx; r++) {
            const x_super *xs = (const x_super *)(xp + (size_t)r * xps) + sb;
            const __m512i is =
                _mm512_add_epi32(_mm512_load_si512(lo[r]), _mm512_slli_epi32(_mm512_load_si512(hi[r]), 8));
            __m512i ms = _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) ms = _mm512_dpwssd_epi32(
                ms, _mm512_load_si512(PR + k), _mm512_set1_epi32(*(const i32u *)(xs->bsums + 2 * k)));
            const __m512 dx = _mm512_set1_ps(xs->d);
            if (MODE == KA_Q6) {
                acc[r] = _mm512_add_ps(
                    acc[r], _mm512_mul_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(_mm512_sub_epi32(is, ms))));
            } else {
                const __m512 t = _mm512_mul_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(is));
                const __m512 u = _mm512_mul_ps(_mm512_mul_ps(dm, dx), _mm512_cvtepi32_ps(ms));
                acc[r] = _mm512_add_ps(acc[r], _mm512_sub_ps(t, u));
            }
        }
    }
    const __mmask16 keep = (__mmask16)((1u << nl) - 1);
    for (int r = 0; r < nx; r++) _mm512_mask_storeu_ps(out + r * os, keep, acc[r]);
}

static void k_amx_tile(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os, const int MODE) {
    const int m0 = nx < AMX_ROWS ? nx : AMX_ROWS;
    amx_configure(m0, nx - m0, 64, 16);
    for (int i = 0; i < nw; i += AMX_ROWS) {
        const int nl = nw - i < AMX_ROWS ? nw - i : AMX_ROWS;
        k_amx_panel(n / 256, w + (size_t)i * ws, xp, xps, nx, nl, out + i, os, MODE);
    }
    _tile_release();
}

static void tile_p_q45(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os) {
    k_amx_tile(n, w, ws, nw, xp, xps, nx, out, os, KA_Q45);
}
static void tile_p_q6(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, float *out,
                      int64_t os) {
    k_amx_tile(n, w, ws, nw, xp, xps, nx, out, os, KA_Q6);
}

/* ---- the tier's kernels ---------------------------------------------------
 *
 * The AVX-512 kernels (one-row tile, quad and group forms) with the panel
 * form replaced; a type without an AMX panel form is the AVX-512 tier's
 * (NULL here). Built once, on the first lookup. */

enum { AMX_Q8_0, AMX_Q4_0, AMX_Q5_0, AMX_IQ4_NL, AMX_MXFP4, AMX_Q4_K, AMX_Q5_K, AMX_Q6_K, AMX_N };

static rw_mm_kernel amx_kernels[AMX_N];
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_build(void) {
    static const struct {
        const rw_mm_kernel *base;
        void (*tile_p)(int64_t, const uint8_t *, size_t, int, const uint8_t *, size_t, int, float *, int64_t);
        void (*pack_p)(const uint8_t *, size_t, int64_t, int64_t, uint8_t *);
    } from[AMX_N] = {
        [AMX_Q8_0] = {&rw_avx512_kernel_q8_0, tile_p_q8_0, NULL},
        [AMX_Q4_0] = {&rw_avx512_kernel_q4_0, tile_p_wt, NULL},
        [AMX_Q5_0] = {&rw_avx512_kernel_q5_0, tile_p_wt, NULL},
        [AMX_IQ4_NL] = {&rw_avx512_kernel_iq4_nl, tile_p_wt, NULL},
        [AMX_MXFP4] = {&rw_avx512_kernel_mxfp4, tile_p_wt, NULL},
        [AMX_Q4_K] = {&rw_avx512_kernel_q4_K, tile_p_q45, rw_avx512_amx_pack_q4_K},
        [AMX_Q5_K] = {&rw_avx512_kernel_q5_K, tile_p_q45, rw_avx512_amx_pack_q5_K},
        [AMX_Q6_K] = {&rw_avx512_kernel_q6_K, tile_p_q6, rw_avx512_amx_pack_q6_K},
    };
    for (int i = 0; i < AMX_N; i++) {
        rw_mm_kernel k = *from[i].base;
        k.tile_p = from[i].tile_p;
        k.max_np = AMX_MAX_NX;
        if (from[i].pack_p) { /* the K-quants: their own panels over the panel form's Q8_K rows */
            k.pack_p = from[i].pack_p;
            k.p_wbytes = rw_avx512_amx_k_wbytes;
            k.p_bytes = x_bytes_super;
            k.convert_p = rw_avx512_convert_q8_K_p;
            k.p_rows = AMX_ROWS;
        }
        amx_kernels[i] = k;
    }
}

const rw_mm_kernel *rw_mm_kernel_amx(rw_dtype t) {
    int i;
    switch (t) {
    case RW_TYPE_Q8_0: i = AMX_Q8_0; break;
    case RW_TYPE_Q4_0: i = AMX_Q4_0; break;
    case RW_TYPE_Q5_0: i = AMX_Q5_0; break;
    case RW_TYPE_IQ4_NL: i = AMX_IQ4_NL; break;
    case RW_TYPE_MXFP4: i = AMX_MXFP4; break;
    case RW_TYPE_Q4_K: i = AMX_Q4_K; break;
    case RW_TYPE_Q5_K: i = AMX_Q5_K; break;
    case RW_TYPE_Q6_K: i = AMX_Q6_K; break;
    default: return NULL;
    }
    pthread_once(&amx_once, amx_build);
    return &amx_kernels[i];
}
