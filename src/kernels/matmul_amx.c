/* matmul_amx.c - the AMX tier: the AVX-512 tier's kernels, with the
 * many-row products of Q8_0, Q4_K, Q5_K and Q6_K computing their exact
 * integer sums on the AMX int8 tiles.
 *
 * Why the results are bitwise the AVX-512 tier's (and the reference's):
 * every output is a float step per block over exact integer block sums.
 * The tiles only compute those integers (in any order: integer sums are
 * exact); the float step after them is the AVX-512 forms', the same
 * operations in the same order, per output. So a row's result does not
 * depend on which tier, form, row count or thread computed it.
 *
 * Tiles (palette 1): C (up to 16 rows x 16 int32) += A (up to 16 rows x K
 * bytes) . B (K/4 rows x 16 columns x 4 bytes).
 *
 * Q8_0 (the group form, from 12 rows): its rows go into A as stored (16
 * weight rows x one block's 32 quants), 16 activation rows into B; one
 * tdpbssd per block gives the 16 x 16 block sums. Nothing is repacked.
 *
 * Q4_K (the group form, 6 to 159 rows): its rows as stored in A, each
 * super-block of 16 rows unpacked once per call into the products below in
 * row order; the activation rows rearranged into B once per call.
 *
 * Q4_K (from 160 rows), Q5_K and Q6_K (from 32 rows), the panel form:
 * their own panels (rw_avx512_amx_pack_*, packed with the AVX-512 code):
 * per super-block the
 * products w = sc * q of the scale and the (unsigned) quant, as the
 * AVX-512 form's integer sum isum = sum_j sc_j * dot_j uses them; w fits 16
 * bits, so it is split into an unsigned low byte and a signed high byte,
 * and isum = (x . lo) + 256 * (x . hi), two tile products per 64 elements
 * (|isum| <= 256 * 8064 * 127 < 2^31); activation rows in A, weights in B.
 * The min term and the float step are the AVX-512 form's vector code.
 *
 * The 32-block types decoded to int8 (Q4_0, Q5_0, IQ4_NL, MXFP4) stay on
 * the AVX-512 tier: tile products over the AVX-512 panels measured 0.98x
 * its speed (each block's 16 x 16 sums must leave the tiles through memory
 * before the float step, which then costs what the VNNI products cost).
 */
#include <pthread.h>

#include "kernels/matmul_avx512_int.h"

/* AMX_ROWS: weight rows of a panel, activation rows of a tile. The
 * K-quants' panel form packs AMX_PANEL_ROWS weight rows at a time (4
 * panels: the activation rows, re-read per call, are then read once per 64
 * weight rows; for long rows they do not fit L2) and takes up to
 * AMX_PANEL_NP activation rows a call (p_rows * max_np is within matmul.c's
 * MAX_TILE, a stack buffer of the calling thread). */
enum { AMX_ROWS = 16, AMX_PANEL_ROWS = 64, AMX_PANEL_NP = 64 };

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

/* Loads configuration c unless the thread's tiles already have it:
 * ldtilecfg costs about as much as 20 tile products (it also zeroes the
 * tiles), reading the configuration back about 2. Tiles are left
 * configured after a call (the next call of the thread usually wants the
 * same); whatever configured them last, the check sees it. */
static void amx_use(const amx_cfg *c) {
    amx_cfg now;
    __asm__ volatile("sttilecfg %0" : "=m"(now));
    if (memcmp(&now, c, sizeof now)) __asm__ volatile("ldtilecfg %0" ::"m"(*c));
}

/* ---- Q8_0 straight from its rows: the group form --------------------------
 *
 * Q8_0's quants are int8 as stored, so its blocks go into the tiles without
 * repacking: A holds 16 weight rows x one block's 32 quants, read in place
 * (the rows ws bytes apart), B the block of 16 activation rows in 4-byte
 * pieces (convert_q8_0_ga), and tdpbssd gives C[weight row][activation
 * row], the block's exact sums. Serving any row count from 2 at the cost of
 * a conversion of the activations only, it takes the few-row products
 * (batched decode, verification) as well as prefill. The float step per
 * output is the other forms': acc[k] = fma(isum_b, dw_b * dx_b, acc[k]) over
 * the blocks of k in order, y = (acc[0] + acc[1]) + (acc[2] + acc[3]); here
 * a register holds one weight row's outputs for 16 activation rows, turned
 * around at the end. */
typedef struct {
    int8_t q[8][64]; /* piece s of the block for activation rows 0..15 at [s][4 * row] */
    float dx[16];
} xa_q8_blk;

/* QA_NW weight rows and QA_NG groups of 16 activation rows per call; from
 * QA_MIN_ROWS rows (fewer take the AVX-512 quad form: a pass of the tiles
 * over a block of 16 weight rows costs about what the quad form's 4-row
 * passes cost for 8 rows, measured on a Sapphire Rapids class VM). */
enum { QA_NW = 64, QA_NG = 4, QA_MIN_ROWS = 12 };

static size_t g_bytes_q8a(int64_t n) { return (size_t)(n / 32) * sizeof(xa_q8_blk); }

static void convert_q8_0_ga(const float *const *rows, int n_rows, void *xg, int64_t n) {
    xa_q8_blk *g = xg;
    memset(xg, 0, g_bytes_q8a(n)); /* padding rows: quants and scales 0 */
    for (int r = 0; r < n_rows; r++)
        for (int64_t b = 0; b < n / 32; b++) {
            int8_t q[32];
            float d, d_raw;
            int sum;
            quantize_block32(rows[r] + b * 32, q, &d, &d_raw, &sum);
            for (int p = 0; p < 8; p++) memcpy(&g[b].q[p][4 * r], q + 4 * p, 4);
            g[b].dx[r] = d;
        }
}

/* C 0, 1 (nl weight rows x 16 activation rows), A 4, 5 (nl weight rows x 32
 * quants), B 6, 7 (8 x 64): by parity, as amx_configure's. */
static void amx_configure_qa(int nl) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 2; t++) c.rows[t] = (uint8_t)nl, c.colsb[t] = 64;
    for (int t = 4; t < 6; t++) c.rows[t] = (uint8_t)nl, c.colsb[t] = 32;
    for (int t = 6; t < 8; t++) c.rows[t] = 8, c.colsb[t] = 64;
    amx_use(&c);
}

INLINE void qa_sums(const int s, const uint8_t *wq, size_t ws, const xa_q8_blk *x, int32_t (*isum)[16]) {
    if (s == 0) {
        AMX_LOAD(4, wq, ws);
        AMX_LOAD(6, x->q, 64);
        _tile_zero(0);
        _tile_dpbssd(0, 4, 6);
        AMX_STORE16(0, isum);
    } else {
        AMX_LOAD(5, wq, ws);
        AMX_LOAD(7, x->q, 64);
        _tile_zero(1);
        _tile_dpbssd(1, 5, 7);
        AMX_STORE16(1, isum);
    }
}

/* Weight rows w .. w + 15 (nl kept) against one group of 16 activation rows
 * (nx real); out[r * os + i]. Blocks in k-runs, each block's float step
 * after the next-but-one's tile products (as q8_amx_panel). next: the
 * next 16 rows, fetched into the cache during the pass (the tile loads of
 * 16 rows at once would wait on memory for each), or NULL. */
static void qa_pass(int64_t n, const uint8_t *w, size_t ws, int nl, const xa_q8_blk *xg, int nx, float *out, int64_t os,
                    const uint8_t *next) {
    const int64_t nb = n / 32;
    const int64_t lines = AMX_ROWS * (int64_t)((ws + 63) / 64), per = (lines + nb - 1) / nb;
    int64_t run0[5] = {0};
    for (int k = 0; k < 4; k++) {
        int64_t len = 0;
        for (int64_t b = 2 * k; b < nb; b += 8) len += b + 1 < nb ? 2 : 1;
        run0[k + 1] = run0[k] + len;
    }
#define QA_BLOCK(pos, k) (8 * (((pos)-run0[k]) / 2) + 2 * (k) + ((pos)-run0[k]) % 2)
    const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32((int)ws));
    const __mmask16 live = (__mmask16)((1u << nl) - 1);
    int32_t isum[3][AMX_ROWS][16] __attribute__((aligned(64)));
    float dw[AMX_ROWS] __attribute__((aligned(64)));
    __m512 part[2][AMX_ROWS], acc[AMX_ROWS];
    _Pragma("GCC unroll 16") for (int r = 0; r < AMX_ROWS; r++) acc[r] = _mm512_setzero_ps();
    int k = 0, ki = 0;
    for (int64_t i = 0; i < nb + 2; i++) {
        if (i < nb) {
            while (i >= run0[ki + 1]) ki++;
            const int64_t b = QA_BLOCK(i, ki);
            if (next) /* a share of the next 16 rows, so that their pass finds them in the cache */
                for (int64_t l = i * per; l < (i + 1) * per && l < lines; l++)
                    _mm_prefetch((const char *)next + (size_t)(l % AMX_ROWS) * ws + 64 * (size_t)(l / AMX_ROWS),
                                 _MM_HINT_T0);
            const uint8_t *wq = w + (size_t)b * sizeof(rw_block_q8_0) + offsetof(rw_block_q8_0, qs);
            if (i % 2 == 0) qa_sums(0, wq, ws, xg + b, isum[i % 3]);
            else qa_sums(1, wq, ws, xg + b, isum[i % 3]);
        }
        const int64_t j = i - 2; /* the block finished now */
        if (j < 0) continue;
        const int64_t bj = QA_BLOCK(j, k);
        const __m512i dh =
            _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows, w + (size_t)bj * sizeof(rw_block_q8_0), 1);
        _mm512_store_ps(dw, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dh))); /* the f16 in each dword's low half */
        const __m512 dx = _mm512_loadu_ps(xg[bj].dx);
        const int32_t(*is)[16] = isum[j % 3];
        _Pragma("GCC unroll 16") for (int r = 0; r < AMX_ROWS; r++) {
            const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(dw[r]), dx);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(is[r])), sc, acc[r]);
        }
        while (k < 4 && j == run0[k + 1] - 1) { /* the last of run k (runs past 2k >= nb are empty) */
            _Pragma("GCC unroll 16") for (int r = 0; r < AMX_ROWS; r++) {
                part[k / 2][r] = k % 2 == 0 ? acc[r] : _mm512_add_ps(part[k / 2][r], acc[r]);
                acc[r] = _mm512_setzero_ps();
            }
            k++;
        }
    }
    for (; k < 4; k++)
        _Pragma("GCC unroll 16") for (int r = 0; r < AMX_ROWS; r++) part[k / 2][r] =
            k % 2 == 0 ? acc[r] : _mm512_add_ps(part[k / 2][r], acc[r]);
#undef QA_BLOCK
    __m512i y[AMX_ROWS]; /* weight row r's outputs, then turned around: activation row t's */
    _Pragma("GCC unroll 16") for (int r = 0; r < AMX_ROWS; r++) y[r] =
        _mm512_castps_si512(_mm512_add_ps(part[0][r], part[1][r]));
    transpose16x16(y);
    for (int t = 0; t < nx; t++) _mm512_mask_storeu_ps(out + t * os, live, _mm512_castsi512_ps(y[t]));
}

/* The group form's tile: nw <= QA_NW weight rows from w, nx <= 16 * QA_NG
 * activation rows in groups of 16 (xgs bytes apart). */
static void tile_g_q8_0a(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xg, size_t xgs, int nx,
                         float *out, int64_t os) {
    for (int i = 0; i < nw; i += AMX_ROWS) {
        const int nl = nw - i < AMX_ROWS ? nw - i : AMX_ROWS;
        amx_configure_qa(nl);
        for (int g = 0; 16 * g < nx; g++) /* rows past the matrix end may be fetched: harmless */
            qa_pass(n, w + (size_t)i * ws, ws, nl, (const xa_q8_blk *)(xg + (size_t)g * xgs),
                    nx - 16 * g < 16 ? nx - 16 * g : 16, out + (int64_t)16 * g * os + i, os,
                    g == 0 ? w + (size_t)(i + AMX_ROWS) * ws : NULL);
    }
}

/* ---- Q4_K, Q5_K, Q6_K ----------------------------------------------------
 *
 * A panel holds per super-block (RW_AMX_K_SB_BYTES):
 *   lo  [64 dwords][16 rows]: the low bytes of w = sc * q, unsigned; dword
 *       g holds elements 4g .. 4g+3, so bytes 1024 ks .. 1024 ks + 1023 are
 *       the B tile of elements 64 ks .. 64 ks + 63;
 *   hi  the same for the high bytes, signed;
 *   pairs [8][16 rows] int16 pairs: Q4_K / Q5_K (m_2t, m_2t+1) for t < 4,
 *         against the activation's sub-block sums (in x_super's padding:
 *         rw_avx512_convert_q8_K_sums); Q6_K (32 sc_2k, 32 sc_2k+1) against
 *         its bsums pairs;
 *   d, dmin [16 rows] f32 each. */
enum { KA_Q45 = 0, KA_Q6 = 1 };

/* The tiles of the K-quants (amx_configure_k): C 0, 1: the low and high
 * sums of activation rows 0-15, C 2, 3: of rows 16-31; A 4, 5: those rows;
 * B 6, 7: the low and high bytes of the weights. m0, m1: the rows of each
 * group (m1 may be 0). */
static void amx_configure_k(int m0, int m1) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int m[6] = {m0, m0, m1, m1, m0, m1};
    for (int t = 0; t < 6; t++)
        if (m[t]) c.rows[t] = (uint8_t)m[t], c.colsb[t] = 64;
    for (int t = 6; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
    amx_use(&c);
}

/* Elements 64 ks .. 64 ks + 63 of super-block B against the rows at x (and
 * x1: the second group, when two). B's two loads are shared by the groups,
 * and each load is followed by products that do not wait on the next. */
INLINE void k_amx_step(const uint8_t *B, int ks, const uint8_t *x0, const uint8_t *x1, size_t xps, int two) {
    const char *next = (const char *)B + RW_AMX_K_SB_BYTES + 1024 * ks; /* the next super-block's */
    for (int c = 0; c < 16; c++) {
        _mm_prefetch(next + 64 * c, _MM_HINT_T0);
        _mm_prefetch(next + 4096 + 64 * c, _MM_HINT_T0);
    }
    if (ks < 3) _mm_prefetch(next - 1024 * ks + 8192 + 256 * ks, _MM_HINT_T0);
    if (ks < 2) _mm_prefetch(next - 1024 * ks + 8192 + 256 * ks + 128, _MM_HINT_T0);
    AMX_LOAD(6, B + 1024 * ks, 64);
    AMX_LOAD(4, x0 + 64 * ks, xps);
    if (two) AMX_LOAD(5, x1 + 64 * ks, xps);
    AMX_LOAD(7, B + 4096 + 1024 * ks, 64);
    _tile_dpbsud(0, 4, 6);
    if (two) _tile_dpbsud(2, 5, 6);
    _tile_dpbssd(1, 4, 7);
    if (two) _tile_dpbssd(3, 5, 7);
}

/* The float step of one super-block f for rows [r0, r1) of a chunk: its
 * stored sums L, H, the activation rows at xp (xps apart), the panel's
 * super-block F; acc[r] += the AVX-512 panel form's step. */
INLINE void k_amx_finish(const int MODE, const uint8_t *F, const uint8_t *xp, size_t xps, int64_t f,
                         const int32_t (*L)[16], const int32_t (*H)[16], int r0, int r1, __m512 *acc) {
    /* the first super-block starts the sums at +0 (no zeroing store in between: a string store here
     * waits for the tile stores in flight) */
    const __m512i *PR = (const __m512i *)(F + 8192);
    const __m512 dw = _mm512_load_ps(F + 8192 + 512), dm = _mm512_load_ps(F + 8192 + 576);
    for (int r = r0; r < r1; r++) {
        const x_super *xs = (const x_super *)(xp + (size_t)r * xps) + f;
        const __m512i is = _mm512_add_epi32(_mm512_load_si512(L[r]), _mm512_slli_epi32(_mm512_load_si512(H[r]), 8));
        __m512i ms = _mm512_setzero_si512();
        if (MODE == KA_Q6)
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) ms = _mm512_dpwssd_epi32(
                ms, _mm512_load_si512(PR + k), _mm512_set1_epi32(*(const i32u *)(xs->bsums + 2 * k)));
        else
            _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) ms =
                _mm512_dpwssd_epi32(ms, _mm512_load_si512(PR + t), _mm512_set1_epi32(((const i32u *)xs->pad)[t]));
        const __m512 dx = _mm512_set1_ps(xs->d);
        const __m512 a = f == 0 ? _mm512_setzero_ps() : acc[r];
        if (MODE == KA_Q6) {
            acc[r] =
                _mm512_add_ps(a, _mm512_mul_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(_mm512_sub_epi32(is, ms))));
        } else {
            const __m512 t = _mm512_mul_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(is));
            const __m512 u = _mm512_mul_ps(_mm512_mul_ps(dm, dx), _mm512_cvtepi32_ps(ms));
            acc[r] = _mm512_add_ps(a, _mm512_sub_ps(t, u));
        }
    }
}

/* nw weight rows (panels of 16 from w, ws bytes a row) against nx <= AMX_PANEL_NP
 * activation rows (chunks of 32); out[r * os + i]. One pipeline over every
 * (chunk, panel, super-block) step: a step's tile products are issued a
 * quarter at a time, each quarter followed by the float steps of a quarter
 * of the rows of the step before (whose sums are stored), so the tiles and
 * the vector units work at once, also across panels. A (chunk, panel)
 * pair's sums start at +0 and take the super-blocks in order, as the
 * AVX-512 form's. */
static void k_amx_tile(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os, const int MODE) {
    enum { CH = 2 * AMX_ROWS, Q = CH / 4 };
    const int64_t nsb = n / 256;
    const int np = (nw + AMX_ROWS - 1) / AMX_ROWS, nc = (nx + CH - 1) / CH;
    const int64_t steps = (int64_t)nc * np * nsb;
    int32_t lo[2][CH][16] __attribute__((aligned(64))), hi[2][CH][16] __attribute__((aligned(64)));
    __m512 acc[2][CH]; /* by the (chunk, panel) pair's parity */
    int configured = 0;
    int pc = 0, pi = 0, pm = 0; /* the previous step's chunk, panel, rows */
    int64_t psb = -1;
    for (int64_t s = 0; s <= steps; s++) {
        const int have = s < steps;
        const int c = have ? (int)(s / (np * nsb)) : 0, i = have ? (int)(s / nsb % np) : 0;
        const int64_t sb = have ? s % nsb : 0;
        const int m = nx - CH * c < CH ? nx - CH * c : CH, two = m > AMX_ROWS;
        const uint8_t *B = w + (size_t)i * AMX_ROWS * ws + (size_t)sb * RW_AMX_K_SB_BYTES;
        const uint8_t *x0 = xp + (size_t)c * CH * xps + (size_t)sb * sizeof(x_super);
        if (have) {
            if (m != configured)
                amx_configure_k(m < AMX_ROWS ? m : AMX_ROWS, m - AMX_ROWS > 0 ? m - AMX_ROWS : 0), configured = m;
            _tile_zero(0);
            _tile_zero(1);
            if (two) {
                _tile_zero(2);
                _tile_zero(3);
            }
        }
        /* the step before: pair (pc, pi), super-block psb */
        const int pp = (pc * np + pi) & 1;
        const uint8_t *F = w + (size_t)pi * AMX_ROWS * ws + (size_t)psb * RW_AMX_K_SB_BYTES;
        const uint8_t *px = xp + (size_t)pc * CH * xps;
        for (int ks = 0; ks < 4; ks++) {
            if (have) k_amx_step(B, ks, x0, x0 + AMX_ROWS * xps, xps, two);
            if (psb < 0) continue;
            const int r1 = Q * (ks + 1) < pm ? Q * (ks + 1) : pm;
            k_amx_finish(MODE, F, px, xps, psb, (const int32_t(*)[16])lo[(s - 1) & 1],
                         (const int32_t(*)[16])hi[(s - 1) & 1], Q * ks, r1, acc[pp]);
        }
        if (psb == nsb - 1) { /* the pair is done */
            const int nl = nw - AMX_ROWS * pi < AMX_ROWS ? nw - AMX_ROWS * pi : AMX_ROWS;
            const __mmask16 keep = (__mmask16)((1u << nl) - 1);
            for (int r = 0; r < pm; r++)
                _mm512_mask_storeu_ps(out + ((int64_t)pc * CH + r) * os + AMX_ROWS * pi, keep, acc[pp][r]);
        }
        if (have) {
            AMX_STORE16(0, lo[s & 1][0]);
            AMX_STORE16(1, hi[s & 1][0]);
            if (two) {
                AMX_STORE16(2, lo[s & 1][AMX_ROWS]);
                AMX_STORE16(3, hi[s & 1][AMX_ROWS]);
            }
        }
        pc = c, pi = i, pm = m, psb = have ? sb : -1;
    }
}

static void tile_p_q45(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os) {
    k_amx_tile(n, w, ws, nw, xp, xps, nx, out, os, KA_Q45);
}
static void tile_p_q6(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, float *out,
                      int64_t os) {
    k_amx_tile(n, w, ws, nw, xp, xps, nx, out, os, KA_Q6);
}

/* ---- Q4_K straight from its rows: the group form ------------------------
 *
 * For few activation rows (batched decode, verification, short prefills)
 * packing panels costs more than the products. Here each super-block of 16
 * weight rows is unpacked once per call, in row order, into the products
 * w = sc * q (int16, as the AVX-512 forms' isum = sum_j sc_j * dot_j uses
 * them) split into low and high bytes (ka_rows: the weights are the A
 * tiles, nothing is transposed); the activation rows are what is
 * rearranged, once per call (xa_k_blk: 16 rows in the B layout). C0 + 256
 * C1 = (lo . x) + 256 (hi . x) is isum (|C0| <= 256 * 255 * 127). The min
 * term and the float step are the panel form's (k_amx_finish), a register
 * holding one weight row's outputs for 16 activation rows, turned around
 * at the end.
 *
 * Q5_K and Q6_K unpack into more instructions per weight (their fifth and
 * sixth bits, Q6_K's 16 scales): this form measured 1.0-1.1x (Q5_K) and
 * 0.8-1.0x (Q6_K) the AVX-512 forms at 8-16 rows, so they keep those. */
typedef struct {
    int8_t q[4][16][64]; /* element 64 ks + 4 g + i of activation row a at [ks][g][4 a + i]: the B tiles */
    float d[16];
    int32_t pr[4][16]; /* the sub-block sums (2t, 2t + 1) as int16 pairs */
} xa_k_blk;

/* One super-block of up to 16 weight rows, unpacked: the products' low
 * (unsigned) and high bytes; the min pairs (m_2t, m_2t+1), d and dmin. */
typedef struct {
    uint8_t lo[AMX_ROWS][256], hi[AMX_ROWS][256];
} ka_rows;
typedef struct {
    int32_t pairs[AMX_ROWS][4];
    float d[AMX_ROWS], dmin[AMX_ROWS];
} ka_meta;

/* KA_NW weight rows and KA_NG groups of 16 activation rows per call (the
 * unpacking is per call: 64 rows share it); from KA_MIN_ROWS rows (below,
 * the AVX-512 tile costs less than a pass of the tiles), up to
 * KA_PANEL_ROWS, from where the panel form's products (each weight
 * super-block once per 16 activation rows) cost less than unpacking per
 * call (measured on a Sapphire Rapids class VM: 1024 x 6144, 1.3x the
 * AVX-512 form at 8 rows, 1.4-1.5x at 16, 1.8x the panel form at 32, equal
 * at about 160). */
enum { KA_NW = 64, KA_NG = 4, KA_MIN_ROWS = 6, KA_PANEL_ROWS = 160, KA_AHEAD = 2 };

static size_t g_bytes_ka(int64_t n) { return (size_t)(n / 256) * sizeof(xa_k_blk); }

static void convert_ka(const float *const *rows, int n_rows, void *xg, int64_t n) {
    xa_k_blk *g = xg;
    memset(xg, 0, g_bytes_ka(n)); /* padding rows: quants, sums and scales 0 */
    for (int r = 0; r < n_rows; r++)
        for (int64_t b = 0; b < n / 256; b++) {
            x_super xs;
            convert_q8_K(rows[r] + 256 * b, &xs, 256); /* super-blocks quantize independently */
            for (int ks = 0; ks < 4; ks++)
                for (int i = 0; i < 16; i++) memcpy(&g[b].q[ks][i][4 * r], xs.qs + 64 * ks + 4 * i, 4);
            g[b].d[r] = xs.d;
            for (int t = 0; t < 4; t++) {
                const int16_t lo = (int16_t)(xs.bsums[4 * t] + xs.bsums[4 * t + 1]),
                              hi = (int16_t)(xs.bsums[4 * t + 2] + xs.bsums[4 * t + 3]);
                g[b].pr[t][r] = (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16);
            }
        }
}

/* The low and high bytes of the products p0 (elements 0-31) and p1 (32-63), in element order. */
INLINE void ka_split(__m512i p0, __m512i p1, uint8_t *lo, uint8_t *hi) {
    const __m512i even =
        _mm512_set_epi8(126, 124, 122, 120, 118, 116, 114, 112, 110, 108, 106, 104, 102, 100, 98, 96, 94, 92, 90, 88,
                        86, 84, 82, 80, 78, 76, 74, 72, 70, 68, 66, 64, 62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40,
                        38, 36, 34, 32, 30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    _mm512_store_si512((__m512i *)lo, _mm512_permutex2var_epi8(p0, even, p1));
    _mm512_store_si512((__m512i *)hi, _mm512_permutex2var_epi8(p0, _mm512_add_epi8(even, _mm512_set1_epi8(1)), p1));
}

/* One Q4_K row's super-block: w[e] = sc[e / 32] * q[e]; pairs (m_2t, m_2t+1)
 * (k4_scales_mins' bytes as int16); element 64j + l is the low nibble of
 * qs[32j + l], element 64j + 32 + l its high nibble. */
INLINE void ka_row(const rw_block_q4_K *blk, uint8_t *lo8, uint8_t *hi8, int32_t *pairs) {
    const __m128i sm = k4_scales_mins(blk->scales); /* sc0..7, m0..7 */
    _mm_storeu_si128((__m128i *)pairs, _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)));
    const __m512i scv = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
    const __m512i m4 = _mm512_set1_epi16(0x0F);
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        const __m512i q = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(blk->qs + 32 * j)));
        const __m512i s0 = _mm512_permutexvar_epi16(_mm512_set1_epi16((short)(2 * j)), scv),
                      s1 = _mm512_permutexvar_epi16(_mm512_set1_epi16((short)(2 * j + 1)), scv);
        ka_split(_mm512_mullo_epi16(_mm512_and_si512(q, m4), s0), _mm512_mullo_epi16(_mm512_srli_epi16(q, 4), s1),
                 lo8 + 64 * j, hi8 + 64 * j);
    }
}

/* Super-block sb of nl rows from wi (ws bytes apart) into W and M; d and
 * dmin of the 16 rows in one gather (each block's first dword). */
INLINE void ka_prep(const uint8_t *wi, size_t ws, int64_t sb, int nl, __m512i rows, ka_rows *W, ka_meta *M) {
    const uint8_t *b0 = wi + (size_t)sb * sizeof(rw_block_q4_K);
    for (int r = 0; r < nl; r++) ka_row((const rw_block_q4_K *)(b0 + (size_t)r * ws), W->lo[r], W->hi[r], M->pairs[r]);
    const __mmask16 live = (__mmask16)((1u << nl) - 1);
    const __m512i dd = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows, b0, 1);
    _mm512_store_ps(M->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
    _mm512_store_ps(M->dmin, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
}

/* acc[r] (r < nl) += the float step of super-block sb from its stored sums L, H. */
INLINE void ka_finish(const ka_meta *M, const xa_k_blk *x, const int32_t (*L)[16], const int32_t (*H)[16], int nl,
                      int64_t sb, __m512 *acc) {
    const __m512 dx = _mm512_loadu_ps(x->d);
    __m512i pr[4];
    for (int t = 0; t < 4; t++) pr[t] = _mm512_loadu_si512(x->pr[t]);
    for (int r = 0; r < nl; r++) {
        const __m512i is = _mm512_add_epi32(_mm512_load_si512(L[r]), _mm512_slli_epi32(_mm512_load_si512(H[r]), 8));
        __m512i ms = _mm512_setzero_si512();
        _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) ms =
            _mm512_dpwssd_epi32(ms, _mm512_set1_epi32(M->pairs[r][t]), pr[t]);
        const __m512 a = sb == 0 ? _mm512_setzero_ps() : acc[r];
        const __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(M->d[r]), dx), _mm512_cvtepi32_ps(is));
        const __m512 u = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(M->dmin[r]), dx), _mm512_cvtepi32_ps(ms));
        acc[r] = _mm512_add_ps(a, _mm512_sub_ps(t, u));
    }
}

/* C 0, 1 (nl weight rows x 16 activation rows: the low and high sums), A
 * 2, 3 and 4, 5 (nl weight rows x 64 low / high bytes), B 6, 7 (64
 * elements of 16 activation rows); A and B by the step's parity. */
static void amx_configure_ka(int nl) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 6; t++) c.rows[t] = (uint8_t)nl, c.colsb[t] = 64;
    for (int t = 6; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
    amx_use(&c);
}

#define KA_STEP(ks, AL, AH, B)                               \
    do {                                                     \
        AMX_LOAD(AL, W->lo[0] + 64 * (ks), sizeof W->lo[0]); \
        AMX_LOAD(B, x->q[ks], 64);                           \
        _tile_dpbusd(0, AL, B);                              \
        AMX_LOAD(AH, W->hi[0] + 64 * (ks), sizeof W->hi[0]); \
        _tile_dpbssd(1, AH, B);                              \
    } while (0)

/* nw weight rows from w (16 at a time) against nx activation rows (groups
 * of 16, xgs bytes apart). One pipeline over the (super-block, group) steps
 * of 16 weight rows: a step's tile products are issued, the next
 * super-block is unpacked (at a super-block's first group), the float step
 * of the step before runs (its sums stored), then this step's sums are
 * stored; so the tiles work while the vector units do. */
static void tile_g_q4_Ka(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xg, size_t xgs, int nx,
                         float *out, int64_t os) {
    const int64_t nsb = n / 256;
    const int ng = (nx + AMX_ROWS - 1) / AMX_ROWS;
    const int64_t steps = nsb * ng;
    static _Thread_local ka_rows Wtl[2] __attribute__((aligned(64))); /* 16 KiB: not on a possibly small stack */
    /* its address taken once: in shared-library code that is a call, and a call brings a vzeroupper, which
     * between tile instructions costs about 100 ns (measured) */
    ka_rows *Wt = Wtl;
    __asm__("" : "+r"(Wt));                                      /* kept, not recomputed in the loop */
    ka_meta M[4] __attribute__((aligned(64)));                   /* by super-block: the float step reads sb - 1's */
    int32_t LH[2][2][AMX_ROWS][16] __attribute__((aligned(64))); /* by step */
    __m512 acc[KA_NG][AMX_ROWS];
    const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32((int)ws));
    for (int i = 0; i < nw; i += AMX_ROWS) {
        const int nl = nw - i < AMX_ROWS ? nw - i : AMX_ROWS;
        const uint8_t *wi = w + (size_t)i * ws;
        amx_configure_ka(nl);
        ka_prep(wi, ws, 0, nl, rows, &Wt[0], &M[0]);
        for (int64_t st = 0; st <= steps; st++) {
            const int64_t sb = st / ng;
            const int g = (int)(st % ng);
            if (st < steps) {
                const ka_rows *W = &Wt[sb & 1];
                const xa_k_blk *x = (const xa_k_blk *)(xg + (size_t)g * xgs) + sb;
                _tile_zero(0);
                _tile_zero(1);
                KA_STEP(0, 2, 3, 6);
                KA_STEP(1, 4, 5, 7);
                KA_STEP(2, 2, 3, 6);
                KA_STEP(3, 4, 5, 7);
                if (g == 0) {
                    /* KA_AHEAD super-blocks ahead, into the next 16 rows (and past the call's rows: the next
                     * call's or past the matrix; prefetches do not fault): 16 streams are more than the
                     * prefetchers follow */
                    const int64_t ahead = sb + KA_AHEAD;
                    const char *pf = (const char *)w + (size_t)(i + AMX_ROWS * (ahead / nsb)) * ws +
                                     (size_t)(ahead % nsb) * sizeof(rw_block_q4_K);
                    for (int r = 0; r < AMX_ROWS; r++)
                        for (size_t l = 0; l < sizeof(rw_block_q4_K); l += 64)
                            _mm_prefetch(pf + (size_t)r * ws + l, _MM_HINT_T1);
                    if (sb + 1 < nsb) ka_prep(wi, ws, sb + 1, nl, rows, &Wt[(sb + 1) & 1], &M[(sb + 1) & 3]);
                }
            }
            if (st > 0) {
                const int64_t pb = (st - 1) / ng;
                const int pg = (int)((st - 1) % ng);
                ka_finish(&M[pb & 3], (const xa_k_blk *)(xg + (size_t)pg * xgs) + pb,
                          (const int32_t(*)[16])LH[(st - 1) & 1][0], (const int32_t(*)[16])LH[(st - 1) & 1][1], nl, pb,
                          acc[pg]);
            }
            if (st < steps) {
                AMX_STORE16(0, LH[st & 1][0]);
                AMX_STORE16(1, LH[st & 1][1]);
            }
        }
        const __mmask16 live = (__mmask16)((1u << nl) - 1);
        for (int g = 0; g < ng; g++) {
            __m512i y[AMX_ROWS];
            for (int r = 0; r < AMX_ROWS; r++) y[r] = r < nl ? _mm512_castps_si512(acc[g][r]) : _mm512_setzero_si512();
            transpose16x16(y);
            const int m = nx - AMX_ROWS * g < AMX_ROWS ? nx - AMX_ROWS * g : AMX_ROWS;
            for (int t = 0; t < m; t++)
                _mm512_mask_storeu_ps(out + (int64_t)(AMX_ROWS * g + t) * os + i, live, _mm512_castsi512_ps(y[t]));
        }
    }
}
#undef KA_STEP

/* ---- the tier's kernels ---------------------------------------------------
 *
 * The AVX-512 kernels with Q8_0's group form and the K-quants' panel form
 * replaced (their other forms stay); a type not here is the AVX-512 tier's
 * (NULL). Built once, on the first lookup. */

enum { AMX_Q8_0, AMX_Q4_K, AMX_Q5_K, AMX_Q6_K, AMX_N };

static rw_mm_kernel amx_kernels[AMX_N];
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_build(void) {
    static const struct {
        const rw_mm_kernel *base;
        void (*tile_p)(int64_t, const uint8_t *, size_t, int, const uint8_t *, size_t, int, float *, int64_t);
        void (*pack_p)(const uint8_t *, size_t, int64_t, int64_t, uint8_t *);
        void (*convert_p)(const float *const *, int, void *, int64_t);
    } from[AMX_N] = {
        [AMX_Q8_0] = {&rw_avx512_kernel_q8_0, NULL, NULL, NULL},
        [AMX_Q4_K] = {&rw_avx512_kernel_q4_K, tile_p_q45, rw_avx512_amx_pack_q4_K, rw_avx512_convert_q8_K_sums},
        [AMX_Q5_K] = {&rw_avx512_kernel_q5_K, tile_p_q45, rw_avx512_amx_pack_q5_K, rw_avx512_convert_q8_K_sums},
        [AMX_Q6_K] = {&rw_avx512_kernel_q6_K, tile_p_q6, rw_avx512_amx_pack_q6_K, rw_avx512_convert_q8_K_p},
    };
    for (int i = 0; i < AMX_N; i++) {
        rw_mm_kernel k = *from[i].base;
        if (i == AMX_Q8_0) { /* the group form straight from the rows, the AVX-512 quad form below it */
            k.g_bytes = g_bytes_q8a, k.convert_g = convert_q8_0_ga, k.tile_g = tile_g_q8_0a;
            k.max_ng = QA_NG, k.g_min_rows = QA_MIN_ROWS, k.q_max_rows = QA_MIN_ROWS - 1;
            k.p_bytes = NULL, k.convert_p = NULL, k.tile_p = NULL, k.pack_p = NULL, k.p_wbytes = NULL;
            k.max_nw = QA_NW;
            amx_kernels[i] = k;
            continue;
        }
        if (i == AMX_Q4_K) { /* the group form straight from the rows, the panels from KA_PANEL_ROWS rows */
            k.g_bytes = g_bytes_ka, k.convert_g = convert_ka, k.tile_g = tile_g_q4_Ka;
            k.max_ng = KA_NG, k.g_min_rows = KA_MIN_ROWS, k.g_max_nw = KA_NW, k.p_min_rows = KA_PANEL_ROWS;
            k.tile_t = NULL; /* the group form on the tiles takes 6 rows up, not the per-call panels */
        }
        /* the K-quants: their own panels over the panel form's Q8_K rows */
        k.tile_p = from[i].tile_p;
        k.max_np = AMX_PANEL_NP;
        k.pack_p = from[i].pack_p;
        k.p_wbytes = rw_avx512_amx_k_wbytes;
        k.p_bytes = x_bytes_super;
        k.convert_p = from[i].convert_p;
        k.p_rows = AMX_PANEL_ROWS;
        k.fly_min_rows = 0; /* these panels' packer is not the AVX-512 one: matmul.c's default */
        k.pack_s = NULL, k.tile_s = NULL, k.expand_s = NULL; /* no stored panels: the tiles take the many rows */
        amx_kernels[i] = k;
    }
}

const rw_mm_kernel *rw_mm_kernel_amx(rw_dtype t) {
    int i;
    switch (t) {
    case RW_TYPE_Q8_0: i = AMX_Q8_0; break;
    case RW_TYPE_Q4_K: i = AMX_Q4_K; break;
    case RW_TYPE_Q5_K: i = AMX_Q5_K; break;
    case RW_TYPE_Q6_K: i = AMX_Q6_K; break;
    default: return NULL;
    }
    pthread_once(&amx_once, amx_build);
    return &amx_kernels[i];
}
