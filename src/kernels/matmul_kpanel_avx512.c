/* matmul_kpanel_avx512.c - the K-quant panel forms of the AVX-512 tier
 * (Q4_K, Q5_K, Q6_K over repacked weights, in the reference's order and in
 * ggml's), and those types' kernels, whose tiles are matmul_kquant_avx512.c's.
 *
 * A panel holds 16 weight rows, one per lane of a register, repacked per
 * call into per-thread scratch (kernels/matmul.c), so the model holds its
 * weights once. With 2 and 4 activation rows the repacking and the panels'
 * extra bytes cost more than they save, hence KP_MIN_ROWS.
 */
#include "kernels/matmul_avx512_int.h"

enum { KP_ROWS = 16, KP_MAX_NX = 16, KP_MIN_ROWS = 8 };
/* The group form (matmul_kgroup_avx512.c) costs about the same for 1 to 16
 * rows, the tile (with its float step done for 4 x 4 pairs at once) about
 * an eighth of that per row beyond the first (measured on Zen 5 with the
 * weights in cache). Q6_K: the group form from 7 rows (from memory, 2
 * threads, 128 experts of 512 x 2048 and 2048 x 512: 0.73-0.89x the
 * tile's time at 7 rows, 0.79-1.04x at 6). */
enum { KG_MIN_ROWS = 7 };
/* Q4_K and Q5_K: the tile up to 8 rows (as above: 1.06-1.26x the tile's
 * time at 8 rows in the group form, 1.0-1.04x at 7). */
enum { KG_MIN_ROWS_Q45 = 9 };
/* The panels are packed in registers (kx_pack) from 17 rows, where the
 * group form takes two groups a call (each weight super-block unpacked
 * once for both; without panels, RW_PANELS=0, that form serves every row
 * count). Measured on Zen 5 (`rewind bench experts`, 128 experts of
 * 512 x 2048 and 2048 x 512 from memory, 2 threads), two groups against
 * packing on the fly: Q4_K 1.0-1.2x the time at 17-20 rows, 0.96-1.0x at
 * 24, 0.86-1.03x at 28-32; Q6_K 1.05-1.20x at 17-24, 0.72-0.83x at
 * 26-32; and Qwen3.5-35B-A3B's prefill (experts of 1 to about 40 rows) was
 * 2-8% faster packing from 17 rows than from 33 for Q4_K. */
enum { KX_FLY_MIN = 17 };
/* Stored panels (experts) are expanded into that layout from more rows:
 * the stored tile decodes each super-block per pass of rows, but reads
 * half the bytes, and an expanded panel of long rows (with the pass's
 * activation rows) outgrows L1. Measured on Zen 5 (`rewind bench experts
 * --stored-panels`, 128 experts, 2 threads), expanding against the stored
 * tile: rows of 512 (2 super-blocks, a 10 KiB expanded panel) 1.03-1.2x
 * the time at 24 rows, 0.9-1.0x at 32, 0.7-0.9x from 40; rows of 2048
 * (40 KiB) 1.1-1.4x at 17-40 rows for Q4_K and Q6_K, 0.97-1.1x at 64,
 * and from 96 rows Q6_K 0.92x. */
static int ks_expand_min(int64_t n) { return n / 256 * 5120 <= 16384 ? 32 : 64; }
/* Weight rows of one group-form call: its outputs go to the caller's rows
 * (a grouped product's store_rows) in runs this long, not four at a time. */
enum { KG_CALL_NW = 64 };

/* One unpacked weight super-block in element order. */
typedef struct {
    uint8_t u[256];
    int32_t sc[16];
    int16_t mins[8][2];
    float d, dmin;
} kp_block;

/* Q4_K / Q5_K: 8 sub-block scales and mins, 6 bits each in 12 bytes. */
static void kp_scales_k4(const uint8_t s[12], rw_f16 d, rw_f16 dmin, kp_block *o) {
    for (int j = 0; j < 8; j++) {
        int sc, m;
        if (j < 4) sc = s[j] & 63, m = s[j + 4] & 63;
        else sc = (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4, m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        o->sc[j] = sc;
        o->mins[j][0] = o->mins[j][1] = (int16_t)m;
    }
    o->d = f16_to_f32(d);
    o->dmin = f16_to_f32(dmin);
}

/* The 256 nibbles of a Q4_K / Q5_K block in element order: elements
 * 64j + l and 64j + 32 + l (l < 32) are the low and high nibbles of
 * qs[32j + l]. Vector code: panels are also packed on the fly for every
 * prefill (kernels/matmul.c), so unpacking runs often. */
static void k4_nibbles(const uint8_t *qs, uint8_t *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
        _mm256_storeu_si256((__m256i *)(u + 64 * j), _mm256_and_si256(v, m4));
        _mm256_storeu_si256((__m256i *)(u + 64 * j + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    }
}

static void kp_unpack_q4_K(const uint8_t *blk, kp_block *o) {
    const rw_block_q4_K *b = (const rw_block_q4_K *)blk;
    kp_scales_k4(b->scales, b->d, b->dmin, o);
    k4_nibbles(b->qs, o->u);
}

static void kp_unpack_q5_K(const uint8_t *blk, kp_block *o) {
    const rw_block_q5_K *b = (const rw_block_q5_K *)blk;
    kp_scales_k4(b->scales, b->d, b->dmin, o);
    k4_nibbles(b->qs, o->u);
    const __m256i h = _mm256_loadu_si256((const __m256i *)b->qh), one = _mm256_set1_epi8(1);
    for (int j = 0; j < 8; j++) { /* bit j of qh[l] is element 32j + l's fifth bit */
        __m256i *u = (__m256i *)(o->u + 32 * j);
        const __m256i bit = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, j), one), 4);
        _mm256_storeu_si256(u, _mm256_or_si256(_mm256_loadu_si256(u), bit));
    }
}

static void kp_unpack_q6_K(const uint8_t *blk, kp_block *o) {
    const rw_block_q6_K *b = (const rw_block_q6_K *)blk;
    /* as the reference, without the -32 (the mins carry it): element
     * 128h + 32k + l is nibble k / 2 of ql[64h + 32(k % 2) + l] with bits
     * 2k, 2k+1 of qh[32h + l] above it */
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        for (int k = 0; k < 4; k++) {
            const __m256i ql = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (k % 2)));
            const __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
            const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2), 4);
            _mm256_storeu_si256((__m256i *)(o->u + 128 * h + 32 * k), _mm256_or_si256(lo, hi));
        }
    }
    for (int g = 0; g < 16; g++) o->sc[g] = b->scales[g];
    for (int t = 0; t < 8; t++) {
        o->mins[t][0] = (int16_t)(32 * b->scales[2 * t]);
        o->mins[t][1] = (int16_t)(32 * b->scales[2 * t + 1]);
    }
    o->d = f16_to_f32(b->d);
    o->dmin = o->d;
}

/* A K-quant panel family's per-type entry points: the panel bytes per
 * weight row (FAM_wbytes_TYPE) and the packer (pack_TYPE_SUFFIX). */
#define KPANEL_FNS(FAM, SUFFIX, name)                                                                         \
    static size_t FAM##_wbytes_##name(int64_t n) {                                                            \
        return (size_t)(n / 256) * FAM##_sb_bytes(&FAM##_##name) / KP_ROWS;                                   \
    }                                                                                                         \
    static void pack_##name##_##SUFFIX(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) { \
        FAM##_pack(&FAM##_##name, sizeof(rw_block_##name), w, ws, n, n_out, dst);                             \
    }

/* The activation: one Q8_K row in element order (x_super). */
static void convert_q8_K_p(const float *const *rows, int n_rows, void *xp, int64_t n) {
    if (n_rows < 1) memset(xp, 0, x_bytes_super(n));
    else convert_q8_K(rows[0], xp, n);
}

/* ---- K-quants in ggml's order, the panel form ---------------------------
 *
 * The ggml-order K-quant tile (matmul_kquant_avx512.c) with its lanes
 * turned around, as the panel form above does for ours: one register holds ggml lane l (< 8) of
 * 16 outputs. Per super-block, lane l is the integer
 *   sum over chunks c of scale(c, l) * dot4(q[32c+4l ..], x[32c+4l ..])
 * (vpdpbusd of 16 rows' 4 quants against the broadcast 4 activations, then
 * vpdpwssd with the 16 rows' scales), started, for Q6_K, at
 * -32 * (sc_2l * bs_2l + sc_2l+1 * bs_2l+1) (vpmaddwd), then
 * acc_l = fma(d * dx, (float)lane, acc_l). Q4_K's four min lanes k hold
 * m_2k * (bs_4k + bs_4k+1) + m_2k+1 * (bs_4k+2 + bs_4k+3) and Q5_K's one
 * min lane all eight such terms, with fma(dmin * -dx, ...). Integer sums are
 * exact in any order and every float operation is the tile's, so the result
 * is bitwise the tile's (and the reference's).
 *
 * A panel of 16 weight rows and nsb super-blocks holds
 *   quants [8 lanes][nsb][8 chunks][16 rows][4 bytes], unsigned;
 *   then per super-block (kgp_meta_bytes):
 *     scales [n_sc][8 chunks][16 rows] int32 (n_sc 2 for Q6_K: lanes 0-3
 *            and 4-7 of a chunk lie in different 16-groups);
 *     pairs  [8][16 rows] int16 pairs: Q4_K / Q5_K (m_j, m_j); Q6_K
 *            (-32 sc_2j, -32 sc_2j+1);
 *     d, dmin [16 rows] f32 each. */
enum { KGP_MINS_Q4K = 1, KGP_MINS_Q5K = 2, KGP_OFFSET_Q6K = 0 };

typedef struct {
    int n_sc;
    void (*unpack)(const uint8_t *blk, kp_block *o); /* the panel form's unpackers, element order */
} kgp_type;

static size_t kgp_meta_bytes(const kgp_type *t) { return (size_t)t->n_sc * 8 * 64 + 8 * 64 + 2 * 64; }
static size_t kgp_sb_bytes(const kgp_type *t) { return 4096 + kgp_meta_bytes(t); }

static const kgp_type kgp_q4_K = {1, kp_unpack_q4_K};
static const kgp_type kgp_q5_K = {1, kp_unpack_q5_K};
static const kgp_type kgp_q6_K = {2, kp_unpack_q6_K};

/* Dword j of bytes off .. off + 63 of rows 0 .. 15 (row r at p + r * ws;
 * rows >= nr read as zero) in lane r of t[j]: kp_transpose's shuffles on
 * the rows' bytes as they lie in the file. */
INLINE void kx_transpose_rows(const uint8_t *p, size_t ws, int nr, size_t off, __m512i t[16]) {
    __m512i r[16], u[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) r[i] =
        i < nr ? _mm512_loadu_si512(p + (size_t)i * ws + off) : _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int i = 0; i < 16; i += 4) {
        const __m512i a = _mm512_unpacklo_epi32(r[i], r[i + 1]), b = _mm512_unpackhi_epi32(r[i], r[i + 1]);
        const __m512i c = _mm512_unpacklo_epi32(r[i + 2], r[i + 3]), d = _mm512_unpackhi_epi32(r[i + 2], r[i + 3]);
        u[i] = _mm512_unpacklo_epi64(a, c); /* 128-bit lane L: rows i..i+3 of dword 4L + 0 */
        u[i + 1] = _mm512_unpackhi_epi64(a, c);
        u[i + 2] = _mm512_unpacklo_epi64(b, d);
        u[i + 3] = _mm512_unpackhi_epi64(b, d);
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        const __m512i x0 = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i x1 = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i y0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i y1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
        t[j] = _mm512_shuffle_i32x4(x0, y0, _MM_SHUFFLE(2, 0, 2, 0));
        t[4 + j] = _mm512_shuffle_i32x4(x0, y0, _MM_SHUFFLE(3, 1, 3, 1));
        t[8 + j] = _mm512_shuffle_i32x4(x1, y1, _MM_SHUFFLE(2, 0, 2, 0));
        t[12 + j] = _mm512_shuffle_i32x4(x1, y1, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* The quants of 16 unpacked rows turned around: q[g] holds, for the 64
 * groups g of 4 elements, b[o].u[4g .. 4g+3] in dword o (16 rows). */
static void kp_transpose(const kp_block b[KP_ROWS], __m512i q[64]) {
    for (int k = 0; k < 4; k++) kx_transpose_rows(b[0].u, sizeof(kp_block), KP_ROWS, 64 * (size_t)k, q + 16 * k);
}

static void kgp_pack(const kgp_type *t, size_t blk_bytes, const uint8_t *w, size_t ws, int64_t n, int64_t n_out,
                     uint8_t *dst) {
    const int64_t nsb = n / 256;
    const size_t mb = kgp_meta_bytes(t);
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        uint8_t *panel = dst + (size_t)(p0 / KP_ROWS * nsb) * kgp_sb_bytes(t);
        memset(panel, 0, (size_t)nsb * kgp_sb_bytes(t)); /* rows past n_out: weights, scales and d 0 */
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *M = panel + (size_t)nsb * 4096 + (size_t)sb * mb;
            int32_t(*sc)[8][KP_ROWS] = (int32_t(*)[8][KP_ROWS])M;
            int16_t(*pairs)[KP_ROWS][2] = (int16_t(*)[KP_ROWS][2])(M + t->n_sc * 512);
            float *d = (float *)(M + t->n_sc * 512 + 512), *dmin = d + KP_ROWS;
            kp_block b[KP_ROWS];
            for (int o = 0; o < KP_ROWS; o++) {
                if (p0 + o >= n_out) {
                    memset(b[o].u, 0, sizeof b[o].u);
                    continue;
                }
                t->unpack(w + (size_t)(p0 + o) * ws + (size_t)sb * blk_bytes, &b[o]);
                for (int c = 0; c < 8; c++) { /* the scale in the low 16 bits, the high ones 0 (vpdpwssd) */
                    if (t->n_sc == 1) sc[0][c][o] = b[o].sc[c] & 0xFFFF;
                    else sc[0][c][o] = b[o].sc[2 * c] & 0xFFFF, sc[1][c][o] = b[o].sc[2 * c + 1] & 0xFFFF;
                }
                for (int j = 0; j < 8; j++)
                    if (t->n_sc == 1) pairs[j][o][0] = pairs[j][o][1] = b[o].mins[j][0];
                    else pairs[j][o][0] = (int16_t)-b[o].mins[j][0], pairs[j][o][1] = (int16_t)-b[o].mins[j][1];
                d[o] = b[o].d, dmin[o] = b[o].dmin;
            }
            __m512i q[64]; /* group g = 8c + l: ggml's lane l of chunk c */
            kp_transpose(b, q);
            for (int g = 0; g < 64; g++)
                _mm512_store_si512((__m512i *)(panel + (size_t)((g % 8) * nsb + sb) * 512) + g / 8, q[g]);
        }
    }
}

KPANEL_FNS(kgp, gp, q4_K)
KPANEL_FNS(kgp, gp, q5_K)
KPANEL_FNS(kgp, gp, q6_K)

/* Lane l (< 8) of 16 outputs against R activation rows over all
 * super-blocks; MINS as kg_lanes. */
INLINE void kgp_lane(const kgp_type *t, int64_t nsb, const uint8_t *P, int l, const uint8_t *xp, size_t xps,
                     __m512 *acc, const int R, const int MINS) {
    const size_t mb = kgp_meta_bytes(t);
    const __m512i *q = (const __m512i *)(P + (size_t)l * nsb * 512);
    const uint8_t *M = P + (size_t)nsb * 4096;
    const int half = t->n_sc == 2 && l >= 4;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    const size_t next = (size_t)nsb * kgp_sb_bytes(t);
    for (int64_t sb = 0; sb < nsb; sb++, q += 8, M += mb) {
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) _mm_prefetch((const char *)(q + c) + next, _MM_HINT_T0);
        __m512i W[8];
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) W[c] = _mm512_load_si512(q + c);
        const __m512i *sc = (const __m512i *)M + 8 * half;
        __m512i S[8];
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) S[c] = _mm512_load_si512(sc + c);
        const __m512i off = _mm512_load_si512((const __m512i *)(M + t->n_sc * 512) + l);
        const __m512 dw = _mm512_load_ps(M + t->n_sc * 512 + 512);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {
            const x_super *xs = (const x_super *)(xp + (size_t)r * xps) + sb;
            __m512i isum = MINS == KGP_OFFSET_Q6K
                               ? _mm512_madd_epi16(off, _mm512_set1_epi32(*(const i32u *)(xs->bsums + 2 * l)))
                               : _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                __m512i p = _mm512_setzero_si512();
                DPBUSD_BCST(p, W[c], (const i32u *)(xs->qs + 32 * c + 4 * l));
                isum = _mm512_dpwssd_epi32(isum, p, S[c]);
            }
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xs->d)), _mm512_cvtepi32_ps(isum), acc[r]);
        }
    }
}

/* The min lanes (Q4_K: four, Q5_K: one) of 16 outputs against R rows. */
INLINE void kgp_min_lanes(const kgp_type *t, int64_t nsb, const uint8_t *P, const uint8_t *xp, size_t xps,
                          __m512 acc[4][KP_MAX_NX], const int R, const int MINS) {
    const size_t mb = kgp_meta_bytes(t);
    const uint8_t *M = P + (size_t)nsb * 4096;
    const int nk = MINS == KGP_MINS_Q4K ? 4 : 1;
    for (int k = 0; k < nk; k++) _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) acc[k][r] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++, M += mb) {
        const __m512i *pairs = (const __m512i *)(M + t->n_sc * 512);
        const __m512 dm = _mm512_load_ps(M + t->n_sc * 512 + 576);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {
            const x_super *xs = (const x_super *)(xp + (size_t)r * xps) + sb;
            const __m512 f = _mm512_mul_ps(dm, _mm512_set1_ps(-xs->d));
            __m512i m = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++) {
                m = _mm512_dpwssd_epi32(m, _mm512_load_si512(pairs + j),
                                        _mm512_set1_epi32(*(const i32u *)(xs->bsums + 2 * j)));
                if (MINS == KGP_MINS_Q4K && j % 2 == 1) {
                    acc[j / 2][r] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(m), acc[j / 2][r]);
                    m = _mm512_setzero_si512();
                }
            }
            if (MINS == KGP_MINS_Q5K) acc[0][r] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(m), acc[0][r]);
        }
    }
}

INLINE void kgp_panel_dot(const kgp_type *t, int64_t n, const uint8_t *P, const uint8_t *xp, size_t xps, int nl,
                          float *out, int64_t os, const int R, const int MINS) {
    const int64_t nsb = n / 256;
    __m512 lane[8][KP_MAX_NX], mn[4][KP_MAX_NX];
    /* at most 8 rows a pass: their accumulators, a lane's 8 weight and 8
     * scale registers fill the register file */
    for (int l = 0; l < 8; l++) {
        kgp_lane(t, nsb, P, l, xp, xps, lane[l], R < 8 ? R : 8, MINS);
        if (R > 8) kgp_lane(t, nsb, P, l, xp + 8 * xps, xps, lane[l] + 8, R - 8, MINS);
    }
    if (MINS != KGP_OFFSET_Q6K) kgp_min_lanes(t, nsb, P, xp, xps, mn, R, MINS);
    const __mmask16 keep = (__mmask16)((1u << nl) - 1);
    _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) { /* ggml's hsum, then the min term */
        const __m512 t0 = _mm512_add_ps(lane[4][r], lane[0][r]), t1 = _mm512_add_ps(lane[5][r], lane[1][r]);
        const __m512 t2 = _mm512_add_ps(lane[6][r], lane[2][r]), t3 = _mm512_add_ps(lane[7][r], lane[3][r]);
        __m512 y = _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3));
        if (MINS == KGP_MINS_Q4K)
            y = _mm512_add_ps(y, _mm512_add_ps(_mm512_add_ps(mn[0][r], mn[2][r]), _mm512_add_ps(mn[1][r], mn[3][r])));
        else if (MINS == KGP_MINS_Q5K) y = _mm512_add_ps(y, mn[0][r]);
        _mm512_mask_storeu_ps(out + r * os, keep, y);
    }
}

#define KGP_CASE(R)                                                 \
    case R:                                                         \
        kgp_panel_dot(tp, n, P, xp, xps, nl, out + i, os, R, mins); \
        break;
#define KGP_TILE(name, T, MINS)                                                                                       \
    static void tile_gp_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, \
                               float *out, int64_t os) {                                                              \
        const kgp_type *tp = &T;                                                                                      \
        const int mins = MINS;                                                                                        \
        for (int i = 0; i < nw; i += KP_ROWS) {                                                                       \
            const uint8_t *P = w + (size_t)i * ws;                                                                    \
            const int nl = nw - i < KP_ROWS ? nw - i : KP_ROWS;                                                       \
            switch (nx) {                                                                                             \
                KGP_CASE(1)                                                                                           \
                KGP_CASE(2)                                                                                           \
                KGP_CASE(3)                                                                                           \
                KGP_CASE(4)                                                                                           \
                KGP_CASE(5)                                                                                           \
                KGP_CASE(6)                                                                                           \
                KGP_CASE(7)                                                                                           \
                KGP_CASE(8)                                                                                           \
                KGP_CASE(9)                                                                                           \
                KGP_CASE(10) KGP_CASE(11) KGP_CASE(12) KGP_CASE(13) KGP_CASE(14) KGP_CASE(15) KGP_CASE(16) default    \
                    : break;                                                                                          \
            }                                                                                                         \
        }                                                                                                             \
    }
KGP_TILE(q4_K, kgp_q4_K, KGP_MINS_Q4K)
KGP_TILE(q5_K, kgp_q5_K, KGP_MINS_Q5K)
KGP_TILE(q6_K, kgp_q6_K, KGP_OFFSET_Q6K)

/* ---- Q4_K, Q5_K and Q6_K in the reference's order, the panel form ------
 *
 * Per output and super-block the exact integers of matmul_ref.c, then its
 * float step, as the tiles (matmul_kquant_avx512.c) do: bitwise the same
 * for any number of rows.
 *   Q4_K / Q5_K: isum = sum_j sc_j * dot_j (8 sub-blocks of 32), msum =
 *     sum_j m_j * bsum_j, sum = sum + ((d*dx)*(float)isum - (dmin*dx)*(float)msum).
 *     A 16-element half of a sub-block is 4 vpdpbusd (Q4_K: |dot| <= 16*15*127 <
 *     2^15, so its low 16 bits are the dot; Q5_K: 8-element quarters, 2
 *     vpdpbusd each, |dot| <= 8*31*127). Q4_K: the two halves' dots are
 *     blended into one lane's 16-bit halves and take their scale with one
 *     vpdpwssd (the scale in both halves): 9 instructions per 32x16 products
 *     on the multiply unit. Q5_K: one vpdpwssd per quarter with the scale in
 *     the low 16 bits (0 above).
 *   Q6_K: isum = sum_g sc_g * dot_g - 32 * sum_g sc_g * bsum_g (16 groups of
 *     16, signed scales), sum = sum + (d*dx)*(float)isum. A group's dot (up
 *     to 16*63*127) does not fit in 16 bits: its scale goes on with vpmulld.
 * One register holds 16 weight rows. A panel holds per super-block
 * (kx_sb_bytes):
 *   quants [64 groups][16 rows][4 bytes]: group g = elements 4g..4g+3, unsigned;
 *   scales [n_sc][16 rows] int32: the 8 sub-blocks', Q4_K's in both 16-bit
 *          halves, Q5_K's in the low 16 bits; Q6_K the 16 groups';
 *   pairs  Q4_K / Q5_K [4][16 rows] int16 pairs (m_2t, m_2t+1), against the
 *          activation's 32-element sums pairs (in x_super's padding:
 *          rw_avx512_convert_q8_K_sums), 4 vpdpwssd a row; Q6_K [8][16 rows]
 *          (32 sc_2k, 32 sc_2k+1) against its 16-element bsums pairs;
 *   d, dmin [16 rows] f32 each (Q6_K: d only). */
/* Stored panels: 9 to KS_PASS rows in one pass (the integer sums of 12 rows
 * still fit the registers, the float sums spill); a pass over stored
 * panels unpacks the quants and scales again, which costs about two rows
 * (measured on Zen 5, bench experts --stored: 10-12 rows 5-15% faster in
 * one pass, 16 rows slower than in two of 8). */
enum { KX_PASS = 8, KS_PASS = 12 };

static size_t kx_sb_bytes(const int Q6) { return Q6 ? 4096 + 1024 + 512 + 64 : 4096 + 512 + 256 + 128; }

/* While a panel is packed, the next panel's rows, a share each
 * super-block, so that its packing finds them in the cache (past the
 * matrix's last rows: a prefetch does not fault). */
INLINE void kx_prefetch_next(const uint8_t *rows, size_t ws, int64_t nsb, int64_t sb) {
    const size_t share = (KP_ROWS * ws / (size_t)nsb + 63) & ~(size_t)63;
    for (size_t b = 0; b < share; b += 64)
        _mm_prefetch((const char *)rows + KP_ROWS * ws + (size_t)sb * share + b, _MM_HINT_T0);
}

/* One super-block of a Q4_K / Q5_K panel (Q5 1: the fifth bits from qh),
 * the 16 rows side by side in registers straight from the file's bytes
 * (the quants of kp_unpack_q4_K / kp_unpack_q5_K): rows from p, ws apart,
 * those past nr read as zero, into the panel's super-block B. */
INLINE void kx_sb_q45(const int Q5, const uint8_t *p, size_t ws, int nr, __m512i *B) {
    const size_t qs_off = Q5 ? offsetof(rw_block_q5_K, qs) : offsetof(rw_block_q4_K, qs);
    const __m512i m4 = _mm512_set1_epi8(0x0F), ff = _mm512_set1_epi32(0xFF);
    /* d, dmin and the scales: rows past nr read as zero */
    __m512i h[4];
    for (int g = 0; g < 4; g++) h[g] = kr_load4(p, ws, 4 * g, nr);
    const __m512i dd = kr_lanes(h, 0);
    for (int g = 0; g < 4; g++) h[g] = kr_scales_mins4(h[g]);
    const __m512i sc[2] = {kr_lanes(h, 0), kr_lanes(h, 1)}, mn[2] = {kr_lanes(h, 2), kr_lanes(h, 3)};
    for (int j = 0; j < 8; j++) {
        const __m512i s = _mm512_and_si512(_mm512_srli_epi32(sc[j / 4], 8 * (j % 4)), ff);
        B[64 + j] = Q5 ? s : _mm512_or_si512(s, _mm512_slli_epi32(s, 16)); /* Q4_K: in both 16-bit halves */
    }
    for (int t = 0; t < 4; t++) { /* (m_2t, m_2t+1): bytes 2t, 2t + 1 of the mins' dwords */
        const __m512i m = _mm512_srli_epi32(mn[t / 2], 16 * (t % 2));
        B[72 + t] = _mm512_or_si512(_mm512_and_si512(m, ff),
                                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(m, 8), ff), 16));
    }
    _mm512_store_ps(B + 76, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
    _mm512_store_ps((float *)(B + 76) + 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
    /* the quants: elements 64c + l and 64c + 32 + l are the low and
     * high nibbles of qs[32c + l]; group g = elements 4g .. 4g + 3 */
    __m512i qh[16];
    if (Q5) kx_transpose_rows(p, ws, nr, offsetof(rw_block_q5_K, qh), qh); /* dwords 0-7: qh */
    for (int half = 0; half < 2; half++) {
        __m512i t[16];
        kx_transpose_rows(p, ws, nr, qs_off + 64 * (size_t)half, t);
        for (int k = 0; k < 16; k++) { /* qs dword 16 half + k: chunk c = 2 half + k / 8 */
            const int g = 32 * half + 16 * (k / 8) + k % 8;
            __m512i lo = _mm512_and_si512(t[k], m4), hi = _mm512_and_si512(_mm512_srli_epi32(t[k], 4), m4);
            if (Q5) { /* bit j of qh[l]: element 32j + l's fifth bit */
                const __m512i one = _mm512_set1_epi8(1);
                lo = _mm512_or_si512(lo,
                                     _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[g % 8], g / 8), one), 4));
                hi = _mm512_or_si512(
                    hi, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[g % 8], g / 8 + 1), one), 4));
            }
            _mm512_store_si512(B + g, lo);
            _mm512_store_si512(B + g + 8, hi);
        }
    }
}

/* One super-block of a Q6_K panel, as kx_sb_q45, with the quants of
 * kp_unpack_q6_K: element 128h + 32k + l is nibble k / 2 of ql[64h +
 * 32(k % 2) + l] with bits 2k, 2k+1 of qh[32h + l] above it. */
INLINE void kx_sb_q6(const uint8_t *p, size_t ws, int nr, __m512i *B) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3), ffff = _mm512_set1_epi32(0xFFFF);
    /* the 16 signed scales (int32), the offset pairs (32 sc_2k, 32 sc_2k+1), d */
    __m512i h[4];
    for (int g = 0; g < 4; g++) h[g] = kr_load4(p + offsetof(rw_block_q6_K, scales), ws, 4 * g, nr);
    __m512i sc[16];
    for (int L = 0; L < 4; L++) {
        const __m512i v = kr_lanes(h, L);
        for (int i = 0; i < 4; i++) sc[4 * L + i] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24);
    }
    for (int g = 0; g < 16; g++) B[64 + g] = sc[g];
    for (int k = 0; k < 8; k++)
        B[80 + k] = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi32(sc[2 * k], 5), ffff),
                                    _mm512_slli_epi32(sc[2 * k + 1], 21));
    for (int g = 0; g < 4; g++) h[g] = kr_load4(p + offsetof(rw_block_q6_K, d) - 14, ws, 4 * g, nr);
    _mm512_store_ps(B + 88, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(kr_lanes(h, 3), 16))));
    /* the quants: group g = elements 4g .. 4g + 3 = 128h + 32k + 4t */
    __m512i qh[16];
    kx_transpose_rows(p, ws, nr, offsetof(rw_block_q6_K, qh), qh);
    for (int hh = 0; hh < 2; hh++) {
        __m512i ql[16];
        kx_transpose_rows(p, ws, nr, offsetof(rw_block_q6_K, ql) + 64 * (size_t)hh, ql);
        for (int k = 0; k < 4; k++)
            for (int t = 0; t < 8; t++) {
                const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(ql[8 * (k % 2) + t], 4 * (k / 2)), m4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(qh[8 * hh + t], 2 * k), m2);
                _mm512_store_si512(B + 32 * hh + 8 * k + t, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)));
            }
    }
}

/* The panels of Q4_K, Q5_K or Q6_K (T 4, 5, 6) in the layout above, a
 * super-block of 16 rows at a time (kx_sb_q45, kx_sb_q6): several times
 * faster than unpacking row by row and transposing, so that a few
 * activation rows pay for packing on the fly. While a panel is packed the
 * next one's rows are prefetched. */
INLINE void kx_pack(const int T, const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nsb = n / 256;
    const size_t sbb = kx_sb_bytes(T == 6);
    const size_t blk = T == 4 ? sizeof(rw_block_q4_K) : T == 5 ? sizeof(rw_block_q5_K) : sizeof(rw_block_q6_K);
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        uint8_t *panel = dst + (size_t)(p0 / KP_ROWS * nsb) * sbb;
        const int nr = n_out - p0 < KP_ROWS ? (int)(n_out - p0) : KP_ROWS;
        const uint8_t *rows = w + (size_t)p0 * ws;
        for (int64_t sb = 0; sb < nsb; sb++) {
            kx_prefetch_next(rows, ws, nsb, sb);
            __m512i *B = (__m512i *)(panel + (size_t)sb * sbb);
            if (T == 6) kx_sb_q6(rows + (size_t)sb * blk, ws, nr, B);
            else kx_sb_q45(T == 5, rows + (size_t)sb * blk, ws, nr, B);
        }
    }
}

static size_t kx_wbytes_q45(int64_t n) { return (size_t)(n / 256) * kx_sb_bytes(0) / KP_ROWS; }
static size_t kx_wbytes_q6(int64_t n) { return (size_t)(n / 256) * kx_sb_bytes(1) / KP_ROWS; }
static void pack_q4_K_x(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    kx_pack(4, w, ws, n, n_out, dst);
}
static void pack_q5_K_x(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    kx_pack(5, w, ws, n, n_out, dst);
}
static void pack_q6_K_x(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    kx_pack(6, w, ws, n, n_out, dst);
}

/* ---- stored panels: the same bytes as the rows ----------------------------
 *
 * Packed once (rw_matmul_pack) for a matrix a model keeps in this form in
 * place of its rows (a mixture of experts' tensors: models/experts.c), so
 * every row count takes the panel form with nothing packed per call. A
 * stored super-block of 16 rows holds exactly the rows' bytes, turned
 * around but not unpacked, so the panels cost no memory beyond the rows
 * they replace:
 *   Q4_K (2304 bytes): qs [32 dwords][16 rows] (dword D of each row's qs:
 *     low nibbles group 16(D/8) + D%8, high nibbles that + 8), then each
 *     row's first 16 bytes (d, dmin, the 12 scale bytes) in row order;
 *   Q5_K (2816): qs as Q4_K, qh [8 dwords][16 rows], the 16-byte heads;
 *   Q6_K (3360): ql [32 dwords][16 rows], qh [16 dwords][16 rows], the 16
 *     scale bytes of each row, then the rows' d (f16).
 * The pass unpacks the nibbles and decodes the scales in registers (the
 * scales once a super-block a pass, kept on the stack) into the values the
 * expanded panels hold, so the integer sums and the float step are the
 * same operations: bitwise the same outputs. */
#ifndef KS_PF_SB
#define KS_PF_SB 4
#endif
enum { KS_HEAD_Q4 = 2048, KS_HEAD_Q5 = 2560, KS_QH_Q5 = 2048, KS_QH_Q6 = 2048, KS_SC_Q6 = 3072, KS_D_Q6 = 3328 };

static size_t ks_sb_bytes(const int MODE) {
    return MODE == 1 ? 16 * sizeof(rw_block_q6_K) : MODE == 2 ? 16 * sizeof(rw_block_q5_K) : 16 * sizeof(rw_block_q4_K);
}

/* The stored super-block B's scales, pairs and d (dmin) decoded as an
 * expanded panel holds them: Q4_K / Q5_K M[0..7] scales, M[8..11] min
 * pairs, M[12], M[13] d and dmin (f32); Q6_K M[0..15] scales, M[16..23]
 * offset pairs, M[24] d. */
INLINE void ks_meta(const int MODE, const uint8_t *B, __m512i *M) {
    if (MODE == 1) {
        __m512i h[4];
        for (int g = 0; g < 4; g++) h[g] = _mm512_loadu_si512(B + KS_SC_Q6 + 64 * g);
        const __m512i ffff = _mm512_set1_epi32(0xFFFF);
        __m512i sc[16];
        for (int L = 0; L < 4; L++) {
            const __m512i v = kr_lanes(h, L);
            for (int i = 0; i < 4; i++) sc[4 * L + i] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24);
        }
        for (int g = 0; g < 16; g++) M[g] = sc[g];
        for (int k = 0; k < 8; k++)
            M[16 + k] = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi32(sc[2 * k], 5), ffff),
                                        _mm512_slli_epi32(sc[2 * k + 1], 21));
        M[24] = _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(B + KS_D_Q6))));
        return;
    }
    const int Q5 = MODE == 2;
    const __m512i ff = _mm512_set1_epi32(0xFF);
    __m512i h[4];
    for (int g = 0; g < 4; g++) h[g] = _mm512_loadu_si512(B + (Q5 ? KS_HEAD_Q5 : KS_HEAD_Q4) + 64 * g);
    const __m512i dd = kr_lanes(h, 0);
    for (int g = 0; g < 4; g++) h[g] = kr_scales_mins4(h[g]);
    const __m512i sc[2] = {kr_lanes(h, 0), kr_lanes(h, 1)}, mn[2] = {kr_lanes(h, 2), kr_lanes(h, 3)};
    for (int j = 0; j < 8; j++) {
        const __m512i v = _mm512_and_si512(_mm512_srli_epi32(sc[j / 4], 8 * (j % 4)), ff);
        M[j] = Q5 ? v : _mm512_or_si512(v, _mm512_slli_epi32(v, 16));
    }
    for (int t = 0; t < 4; t++) {
        const __m512i m = _mm512_srli_epi32(mn[t / 2], 16 * (t % 2));
        M[8 + t] = _mm512_or_si512(_mm512_and_si512(m, ff),
                                   _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(m, 8), ff), 16));
    }
    M[12] = _mm512_castps_si512(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
    M[13] = _mm512_castps_si512(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
}

/* Group 8j + g's quants of the stored super-block B (g < 8), as the
 * expanded panel holds them (kx_sb_q45, kx_sb_q6). */
INLINE __m512i ks_quants(const int MODE, const uint8_t *B, const int j, const int g) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    if (MODE == 1) { /* elements 128hh + 32k + 4g: group 32hh + 8k + g */
        const int hh = j / 4, k = j % 4;
        const __m512i ql = _mm512_loadu_si512(B + 64 * (16 * hh + 8 * (k % 2) + g));
        const __m512i qh = _mm512_loadu_si512(B + KS_QH_Q6 + 64 * (8 * hh + g));
        const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(ql, 4 * (k / 2)), m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(qh, 2 * k), _mm512_set1_epi8(3));
        return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
    }
    /* sub-block j = 2c + half: qs dword 8c + g, its low (half 0) or high nibbles */
    const __m512i v = _mm512_loadu_si512(B + 64 * (8 * (j / 2) + g));
    __m512i q = _mm512_and_si512(j % 2 ? _mm512_srli_epi32(v, 4) : v, m4);
    if (MODE == 2) /* the fifth bit: bit j of qh byte l */
        q = _mm512_or_si512(
            q, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(_mm512_loadu_si512(B + KS_QH_Q5 + 64 * g), j),
                                                  _mm512_set1_epi8(1)),
                                 4));
    return q;
}

/* One super-block of the nr <= 16 rows at p (row r at p + r * ws) in the
 * stored panels' layout at B (T 4, 5, 6), rows past nr zero. */
INLINE void ks_pack_sb(const int T, const uint8_t *p, size_t ws, int nr, uint8_t *B) {
    __m512i t[16];
    if (T == 6) {
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            kx_transpose_rows(p, ws, nr, offsetof(rw_block_q6_K, ql) + 64 * (size_t)h, t);
            _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) _mm512_storeu_si512(B + 64 * (16 * h + k), t[k]);
        }
        kx_transpose_rows(p, ws, nr, offsetof(rw_block_q6_K, qh), t);
        _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) _mm512_storeu_si512(B + KS_QH_Q6 + 64 * k, t[k]);
        _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++)
            _mm512_storeu_si512(B + KS_SC_Q6 + 64 * g, kr_load4(p + offsetof(rw_block_q6_K, scales), ws, 4 * g, nr));
        rw_f16 d[KP_ROWS] = {0};
        for (int r = 0; r < nr; r++) d[r] = ((const rw_block_q6_K *)(p + (size_t)r * ws))->d;
        memcpy(B + KS_D_Q6, d, sizeof d);
        return;
    }
    const size_t qs_off = T == 5 ? offsetof(rw_block_q5_K, qs) : offsetof(rw_block_q4_K, qs);
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        kx_transpose_rows(p, ws, nr, qs_off + 64 * (size_t)h, t);
        _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) _mm512_storeu_si512(B + 64 * (16 * h + k), t[k]);
    }
    if (T == 5) { /* qh: dwords 0-7 */
        kx_transpose_rows(p, ws, nr, offsetof(rw_block_q5_K, qh), t);
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) _mm512_storeu_si512(B + KS_QH_Q5 + 64 * k, t[k]);
    }
    _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) /* d, dmin and the scales: a block's first 16 bytes */
        _mm512_storeu_si512(B + (T == 5 ? KS_HEAD_Q5 : KS_HEAD_Q4) + 64 * g, kr_load4(p, ws, 4 * g, nr));
}

/* Stored panels of the rows (T 4, 5, 6), a super-block of 16 rows at a
 * time, rows past n_out zero. */
INLINE void ks_pack(const int T, const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nsb = n / 256;
    const int MODE = T == 6 ? 1 : T == 5 ? 2 : 0;
    const size_t sbb = ks_sb_bytes(MODE), blk = sbb / KP_ROWS;
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        uint8_t *panel = dst + (size_t)(p0 / KP_ROWS * nsb) * sbb;
        const int nr = n_out - p0 < KP_ROWS ? (int)(n_out - p0) : KP_ROWS;
        const uint8_t *rows = w + (size_t)p0 * ws;
        for (int64_t sb = 0; sb < nsb; sb++) ks_pack_sb(T, rows + (size_t)sb * blk, ws, nr, panel + (size_t)sb * sbb);
    }
}

/* n stored super-blocks from S expanded into the panel layout at D (the
 * values kx_sb_q45 / kx_sb_q6 store), prefetching KS_PF_SB ahead. */
INLINE void ks_expand(const int MODE, const uint8_t *S, int n, uint8_t *D) {
    const int Q6 = MODE == 1;
    const size_t sbb = ks_sb_bytes(MODE), dbb = kx_sb_bytes(Q6), n_meta = Q6 ? 16 + 8 + 1 : 8 + 4 + 2;
    for (int sb = 0; sb < n; sb++) {
        const uint8_t *B = S + (size_t)sb * sbb;
        __m512i *O = (__m512i *)(D + (size_t)sb * dbb);
        for (size_t c = 0; c < sbb; c += 64) _mm_prefetch((const char *)B + KS_PF_SB * sbb + c, _MM_HINT_T0);
        __m512i M[25];
        ks_meta(MODE, B, M);
        for (int j = 0; j < 8; j++)
            for (int g = 0; g < 8; g++) _mm512_store_si512(O + 8 * j + g, ks_quants(MODE, B, j, g));
        for (size_t k = 0; k < n_meta; k++) _mm512_store_si512(O + 64 + k, M[k]);
    }
}

/* 16 outputs (nl kept) against R <= KX_PASS activation rows. Registers: R
 * float sums, R integer sums, 8 weight registers (a Q4_K sub-block, two Q6_K
 * groups) and their scales. STORED: 0 expanded panels, 1 stored panels
 * (prefetched ahead), 2 stored panels' layout packed per call into L1 (no
 * prefetch). carry: the float sums start from out (a call's earlier
 * super-blocks, stored there exactly), else from 0. */
INLINE void kx_panel_pass(int64_t nsb, const uint8_t *P, const uint8_t *xp, size_t xps, int nl, float *out, int64_t os,
                          const int R, const int MODE, const int STORED, const bool l2, const bool carry) {
    const int Q6 = MODE == 1, Q5 = MODE == 2;
    const size_t sbb = STORED ? ks_sb_bytes(MODE) : kx_sb_bytes(Q6), meta = 4096 + (size_t)(Q6 ? 16 : 8) * 64;
    __m512i M[25]; /* stored panels: a super-block's decoded scales (ks_meta) */
    const __mmask16 keep = (__mmask16)((1u << nl) - 1);
    __m512 acc[KS_PASS];
    _Pragma("GCC unroll 12") for (int r = 0; r < R; r++) acc[r] =
        carry ? _mm512_maskz_loadu_ps(keep, out + r * os) : _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *B = P + (size_t)sb * sbb;
        if (STORED != 2)
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) /* the next super-block's first 512 quant bytes */
                _mm_prefetch((const char *)B + sbb + 64 * c, _MM_HINT_T0);
        if (STORED) ks_meta(MODE, B, M);
        const __m512i *W = (const __m512i *)B, *S = STORED ? M : (const __m512i *)(B + 4096),
                      *PR = STORED ? M + (Q6 ? 16 : 8) : (const __m512i *)(B + meta);
        __m512i is[KS_PASS];
        _Pragma("GCC unroll 12") for (int r = 0; r < R; r++) is[r] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            __m512i wv[8];
            _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) wv[g] =
                STORED ? ks_quants(MODE, B, j, g) : _mm512_load_si512(W + 8 * j + g);
            if (!STORED) _mm_prefetch((const char *)(W + 8 * j) + sbb + 512, _MM_HINT_T0);
            else if (STORED == 1) /* the super-block KS_PF_SB ahead, a share each step (its lines, 8 steps) */
                _Pragma("GCC unroll 8") for (int c = 0; c < (int)(sbb / 64 + 7) / 8; c++)
                    pf_weights(B + KS_PF_SB * sbb + 64 * ((sbb / 64 + 7) / 8 * j + c), l2);
            const __m512i sa = _mm512_load_si512(S + (Q6 ? 2 * j : j)),
                          sb_ = Q6 ? _mm512_load_si512(S + 2 * j + 1) : sa;
            _Pragma("GCC unroll 12") for (int r = 0; r < R; r++) {
                const i32u *x4 = (const i32u *)(((const x_super *)(xp + (size_t)r * xps) + sb)->qs + 32 * j);
                if (Q5) { /* a half's dot reaches 16*31*127 > 2^15: quarters (8 elements) */
                    __m512i q0 = _mm512_setzero_si512(), q1 = _mm512_setzero_si512();
                    __m512i q2 = _mm512_setzero_si512(), q3 = _mm512_setzero_si512();
                    DPBUSD_BCST(q0, wv[0], x4);
                    DPBUSD_BCST(q1, wv[2], x4 + 2);
                    DPBUSD_BCST(q2, wv[4], x4 + 4);
                    DPBUSD_BCST(q3, wv[6], x4 + 6);
                    DPBUSD_BCST(q0, wv[1], x4 + 1);
                    DPBUSD_BCST(q1, wv[3], x4 + 3);
                    DPBUSD_BCST(q2, wv[5], x4 + 5);
                    DPBUSD_BCST(q3, wv[7], x4 + 7);
                    is[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(is[r], q0, sa), q1, sa);
                    is[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(is[r], q2, sa), q3, sa);
                    continue;
                }
                __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
                DPBUSD_BCST(lo, wv[0], x4);
                DPBUSD_BCST(hi, wv[4], x4 + 4);
                DPBUSD_BCST(lo, wv[1], x4 + 1);
                DPBUSD_BCST(hi, wv[5], x4 + 5);
                DPBUSD_BCST(lo, wv[2], x4 + 2);
                DPBUSD_BCST(hi, wv[6], x4 + 6);
                DPBUSD_BCST(lo, wv[3], x4 + 3);
                DPBUSD_BCST(hi, wv[7], x4 + 7);
                if (Q6)
                    is[r] = _mm512_add_epi32(is[r],
                                             _mm512_add_epi32(_mm512_mullo_epi32(lo, sa), _mm512_mullo_epi32(hi, sb_)));
                else /* both halves' dots (< 2^15) in one lane's 16-bit halves, against the scale in both */
                    is[r] = _mm512_dpwssd_epi32(
                        is[r], _mm512_mask_blend_epi16(0xAAAAAAAAu, lo, _mm512_slli_epi32(hi, 16)), sa);
            }
        }
        const size_t pr_bytes = Q6 ? 512 : 256;
        const __m512 dw = STORED ? _mm512_castsi512_ps(M[Q6 ? 24 : 12]) : _mm512_load_ps(B + meta + pr_bytes),
                     dm = Q6       ? dw /* Q6_K has no dmin */
                          : STORED ? _mm512_castsi512_ps(M[13])
                                   : _mm512_load_ps(B + meta + pr_bytes + 64);
        _Pragma("GCC unroll 12") for (int r = 0; r < R; r++) {
            const x_super *xs = (const x_super *)(xp + (size_t)r * xps) + sb;
            __m512i ms = _mm512_setzero_si512();
            if (Q6)
                _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) ms = _mm512_dpwssd_epi32(
                    ms, _mm512_load_si512(PR + k), _mm512_set1_epi32(*(const i32u *)(xs->bsums + 2 * k)));
            else /* the 32-element sums' pairs (rw_avx512_convert_q8_K_sums) */
                _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) ms =
                    _mm512_dpwssd_epi32(ms, _mm512_load_si512(PR + t), _mm512_set1_epi32(((const i32u *)xs->pad)[t]));
            const __m512 dx = _mm512_set1_ps(xs->d);
            if (Q6) {
                acc[r] = _mm512_add_ps(
                    acc[r], _mm512_mul_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(_mm512_sub_epi32(is[r], ms))));
            } else {
                const __m512 t = _mm512_mul_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(is[r]));
                const __m512 u = _mm512_mul_ps(_mm512_mul_ps(dm, dx), _mm512_cvtepi32_ps(ms));
                acc[r] = _mm512_add_ps(acc[r], _mm512_sub_ps(t, u));
            }
        }
    }
    _Pragma("GCC unroll 12") for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(out + r * os, keep, acc[r]);
}

#define KX_CASE(R)                                                                                                \
    case R:                                                                                                       \
        kx_panel_pass(nsb, P, xp + (size_t)r0 * xps, xps, nl, out + i + r0 * os, os, R, MODE, STORED, l2, false); \
        break;
INLINE void kx_tile(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, float *out,
                    int64_t os, const int MODE, const int STORED) {
    const int64_t nsb = n / 256;
    const int pass = STORED && nx > KX_PASS && nx <= KS_PASS ? KS_PASS : KX_PASS;
    const bool l2 = STORED && rw_matmul_prefetch_l2();
    for (int i = 0; i < nw; i += KP_ROWS) {
        const uint8_t *P = w + (size_t)i * ws;
        const int nl = nw - i < KP_ROWS ? nw - i : KP_ROWS;
        for (int r0 = 0; r0 < nx; r0 += pass) {
            switch (nx - r0 < pass ? nx - r0 : pass) {
                KX_CASE(1) KX_CASE(2) KX_CASE(3) KX_CASE(4) KX_CASE(5) KX_CASE(6) KX_CASE(7) KX_CASE(8) default : break;
            }
            if (STORED && nx - r0 > KX_PASS) switch (nx - r0 < pass ? nx - r0 : pass) {
                    KX_CASE(9) KX_CASE(10) KX_CASE(11) KX_CASE(12) default : break;
                }
        }
    }
}
static void tile_x_q45(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os) {
    kx_tile(n, w, ws, nw, xp, xps, nx, out, os, 0, 0);
}
static void tile_x_q5_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os) {
    kx_tile(n, w, ws, nw, xp, xps, nx, out, os, 2, 0);
}
static void tile_x_q6_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os) {
    kx_tile(n, w, ws, nw, xp, xps, nx, out, os, 1, 0);
}

/* Few activation rows (KT_MIN_ROWS to KT_MAX_ROWS) over the dense rows:
 * each 16 rows' super-blocks are packed per call, KT_SB at a time, into the
 * stored panels' layout in L1 (ks_pack_sb: a transposition, nothing
 * unpacked) and the stored panels' pass runs over them, its float sums
 * carried from one run of super-blocks to the next through out (stored and
 * loaded: exact), so the outputs are the stored panels' bits, which are the
 * one-row tile's and the reference's. The packing costs about a third of
 * one row's time beyond the weights' reads; measured on Zen 5 (one thread,
 * 2048 x 4096 from memory) it pays from 5 rows (Q4_K 6-8 rows 13-20% faster
 * than the tile's two runs; Q5_K, Q6_K 20-30%) to 8; from 9 rows the
 * group form is as fast or faster (Q5_K 12 rows: 0.71 against 0.73-0.84 ms).
 * Each row's stream is prefetched KT_PF_DIST bytes ahead (16 rows read
 * side by side are 16 streams, which the hardware's prefetchers do not
 * follow; without it the packing waited on memory: 2 rows cost 4x one
 * row), going on into the row 16 rows on: a tile call gets one panel of
 * rows, and the next panel is most often the same task's (else the
 * prefetch is wasted, not wrong). */
enum { KT_MIN_ROWS = 5, KT_MAX_ROWS = KX_PASS, KT_SB = 4, KT_PF_DIST = 1024 };
#define KT_CASE(R)                                                                                                     \
    case R:                                                                                                            \
        kx_panel_pass(c, buf, xp + (size_t)r0 * xps + (size_t)s0 * sizeof(x_super), xps, nl, out + i + r0 * os, os, R, \
                      MODE, 2, false, s0 > 0);                                                                         \
        break;
INLINE void kt_tile(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, float *out,
                    int64_t os, const int T) {
    const int MODE = T == 6 ? 1 : T == 5 ? 2 : 0;
    const int64_t nsb = n / 256;
    const size_t sbb = ks_sb_bytes(MODE), blk = sbb / KP_ROWS, row_len = (size_t)nsb * blk;
    const bool l2 = rw_matmul_prefetch_l2();
    _Alignas(64) uint8_t buf[KT_SB * KP_ROWS * sizeof(rw_block_q6_K)]; /* KT_SB packed super-blocks */
    for (int i = 0; i < nw; i += KP_ROWS) {
        const uint8_t *rows = w + (size_t)i * ws;
        const int nl = nw - i < KP_ROWS ? nw - i : KP_ROWS;
        for (int64_t s0 = 0; s0 < nsb; s0 += KT_SB) {
            const int c = nsb - s0 < KT_SB ? (int)(nsb - s0) : KT_SB;
            for (int s = 0; s < c; s++) {
                const uint8_t *p = rows + (size_t)(s0 + s) * blk;
                const size_t pfo = (size_t)(s0 + s + 1) * blk + KT_PF_DIST;
                const uint8_t *pf = pfo < row_len ? rows + pfo : rows + (size_t)KP_ROWS * ws + (pfo - row_len);
                _Pragma("GCC unroll 16") for (int r = 0; r < KP_ROWS; r++)
                    _Pragma("GCC unroll 4") for (size_t l = 0; l < blk; l += 64)
                        pf_weights(pf + (size_t)r * ws + l, l2);
                ks_pack_sb(T, p, ws, nl, buf + (size_t)s * sbb);
            }
            for (int r0 = 0; r0 < nx; r0 += KX_PASS) switch (nx - r0 < KX_PASS ? nx - r0 : KX_PASS) {
                    KT_CASE(1)
                    KT_CASE(2) KT_CASE(3) KT_CASE(4) KT_CASE(5) KT_CASE(6) KT_CASE(7) KT_CASE(8) default : break;
                }
        }
    }
}
#undef KT_CASE

/* n_out rows of stored panels (a panel 16 rows of ws bytes) expanded into
 * the panels kx_pack packs from the rows (the same values), for the passes
 * of many rows. */
INLINE void ks_expand_rows(const int MODE, const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nsb = n / 256;
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS)
        ks_expand(MODE, w + (size_t)p0 * ws, (int)nsb, dst + (size_t)(p0 / KP_ROWS * nsb) * kx_sb_bytes(MODE == 1));
}

/* Stored panels (ws: the dense row size, a panel 16 rows of it). */
#define KS_FUNCS(name, T, MODE)                                                                                      \
    static void tile_s_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, \
                              float *out, int64_t os) {                                                              \
        kx_tile(n, w, ws, nw, xp, xps, nx, out, os, MODE, 1);                                                        \
    }                                                                                                                \
    static void tile_t_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, \
                              float *out, int64_t os) {                                                              \
        kt_tile(n, w, ws, nw, xp, xps, nx, out, os, T);                                                              \
    }                                                                                                                \
    static void pack_s_##name(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {                 \
        ks_pack(T, w, ws, n, n_out, dst);                                                                            \
    }                                                                                                                \
    static void expand_s_##name(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {               \
        ks_expand_rows(MODE, w, ws, n, n_out, dst);                                                                  \
    }
KS_FUNCS(q4_K, 4, 0)
KS_FUNCS(q5_K, 5, 2)
KS_FUNCS(q6_K, 6, 1)

/* ---- the AMX tier's K-quant panels ---------------------------------------
 *
 * Packed here (AVX-512 code) for matmul_amx.c, which has the layout: per
 * super-block of 16 weight rows, the products w = sc * q (the sub-block's
 * scale times the quant, as the integer sums above use them: int16) split
 * into an unsigned low byte and a signed high byte, each as 64 dwords of
 * 16 rows (kp_transpose's layout, which is the tiles' B layout); then the
 * min pairs, d and dmin as the panels above. */
size_t rw_avx512_amx_k_wbytes(int64_t n) { return (size_t)(n / 256) * RW_AMX_K_SB_BYTES / KP_ROWS; }

/* Row o's products sc * q split: u becomes the low bytes, hi the high. */
static void amx_k_split(kp_block *b, uint8_t hi[256], const int Q6) {
    for (int j = 0; j < 8; j++) { /* 32 elements: one Q4_K / Q5_K scale, two Q6_K ones */
        const __m512i sc = Q6 ? _mm512_inserti64x4(_mm512_set1_epi16((int16_t)b->sc[2 * j]),
                                                   _mm256_set1_epi16((int16_t)b->sc[2 * j + 1]), 1)
                              : _mm512_set1_epi16((int16_t)b->sc[j]);
        const __m512i v =
            _mm512_mullo_epi16(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(b->u + 32 * j))), sc);
        _mm256_storeu_si256((__m256i *)(b->u + 32 * j), _mm512_cvtepi16_epi8(v));
        _mm256_storeu_si256((__m256i *)(hi + 32 * j), _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 8)));
    }
}

static void amx_k_pack(void (*unpack)(const uint8_t *, kp_block *), size_t blk_bytes, const int Q6, const uint8_t *w,
                       size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nsb = n / 256;
    const size_t sbb = RW_AMX_K_SB_BYTES;
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        uint8_t *panel = dst + (size_t)(p0 / KP_ROWS * nsb) * sbb;
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *B = panel + (size_t)sb * sbb;
            int16_t(*pairs)[KP_ROWS][2] = (int16_t(*)[KP_ROWS][2])(B + 8192);
            float *d = (float *)(B + 8192 + 512), *dmin = d + KP_ROWS;
            kp_block b[KP_ROWS], hi[KP_ROWS];
            for (int o = 0; o < KP_ROWS; o++) {
                if (p0 + o >= n_out) { /* rows past n_out: weights, mins and d 0 */
                    memset(&b[o], 0, sizeof b[o]);
                    memset(hi[o].u, 0, sizeof hi[o].u);
                } else {
                    unpack(w + (size_t)(p0 + o) * ws + (size_t)sb * blk_bytes, &b[o]);
                    amx_k_split(&b[o], hi[o].u, Q6);
                }
                if (Q6) /* (32 sc_2k, 32 sc_2k+1) against the bsums pairs */
                    for (int k = 0; k < 8; k++) pairs[k][o][0] = b[o].mins[k][0], pairs[k][o][1] = b[o].mins[k][1];
                else /* (m_2t, m_2t+1) against the sub-block sums pairs (rw_avx512_convert_q8_K_amx) */
                    for (int t = 0; t < 4; t++)
                        pairs[t][o][0] = b[o].mins[2 * t][0], pairs[t][o][1] = b[o].mins[2 * t + 1][0];
                d[o] = b[o].d;
                dmin[o] = Q6 ? 0.0f : b[o].dmin;
            }
            __m512i q[64];
            kp_transpose(b, q);
            for (int g = 0; g < 64; g++) _mm512_store_si512((__m512i *)B + g, q[g]);
            kp_transpose(hi, q);
            for (int g = 0; g < 64; g++) _mm512_store_si512((__m512i *)(B + 4096) + g, q[g]);
        }
    }
}

void rw_avx512_amx_pack_q4_K(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    amx_k_pack(kp_unpack_q4_K, sizeof(rw_block_q4_K), 0, w, ws, n, n_out, dst);
}
void rw_avx512_amx_pack_q5_K(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    amx_k_pack(kp_unpack_q5_K, sizeof(rw_block_q5_K), 0, w, ws, n, n_out, dst);
}
void rw_avx512_amx_pack_q6_K(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    amx_k_pack(kp_unpack_q6_K, sizeof(rw_block_q6_K), 1, w, ws, n, n_out, dst);
}
void rw_avx512_convert_q8_K_p(const float *const *rows, int n_rows, void *xp, int64_t n) {
    convert_q8_K_p(rows, n_rows, xp, n);
}
void rw_avx512_convert_q8_K_sums(const float *const *rows, int n_rows, void *xp, int64_t n) {
    convert_q8_K_p(rows, n_rows, xp, n);
    x_super *s = xp;
    for (int64_t b = 0; b < n / 256; b++) { /* the 8 sub-blocks' sums (|sum| <= 32 * 127) in the padding */
        int16_t bs32[8];
        for (int j = 0; j < 8; j++) bs32[j] = (int16_t)(s[b].bsums[2 * j] + s[b].bsums[2 * j + 1]);
        memcpy(s[b].pad, bs32, sizeof bs32);
    }
}

#define KXK(name, conv, CONV_P, TILE_P, WBYTES, GMIN, FLY)                            \
    const rw_mm_kernel rw_avx512_kernel_##name = {.x_bytes = x_bytes_super,           \
                                                  .convert_x = conv,                  \
                                                  .tile = rw_avx512_tile_##name,      \
                                                  .max_nw = NW,                       \
                                                  .max_nx = NX,                       \
                                                  .p_bytes = x_bytes_super,           \
                                                  .convert_p = CONV_P,                \
                                                  .tile_p = TILE_P,                   \
                                                  .pack_p = pack_##name##_x,          \
                                                  .p_rows = KP_ROWS,                  \
                                                  .max_np = KP_MAX_NX,                \
                                                  .p_wbytes = WBYTES,                 \
                                                  .p_min_rows = KP_MIN_ROWS,          \
                                                  .g_bytes = rw_avx512_g_bytes_k,     \
                                                  .convert_g = rw_avx512_convert_g_k, \
                                                  .tile_g = rw_avx512_tile_g_##name,  \
                                                  .max_ng = 2,                        \
                                                  .g_max_nw = KG_CALL_NW,             \
                                                  .g_min_rows = GMIN,                 \
                                                  .fly_min_rows = FLY,                \
                                                  .pack_s = pack_s_##name,            \
                                                  .tile_s = tile_s_##name,            \
                                                  .expand_s = expand_s_##name,        \
                                                  .expand_min_rows = ks_expand_min,   \
                                                  .tile_t = tile_t_##name,            \
                                                  .t_min_rows = KT_MIN_ROWS,          \
                                                  .t_max_rows = KT_MAX_ROWS,          \
                                                  .max_nx_1x = KR_NX};
KXK(q4_K, convert_q8_K_perm, rw_avx512_convert_q8_K_sums, tile_x_q45, kx_wbytes_q45, KG_MIN_ROWS_Q45, KX_FLY_MIN)
KXK(q5_K, convert_q8_K_perm, rw_avx512_convert_q8_K_sums, tile_x_q5_K, kx_wbytes_q45, KG_MIN_ROWS_Q45, KX_FLY_MIN)
KXK(q6_K, convert_q8_K, convert_q8_K_p, tile_x_q6_K, kx_wbytes_q6, KG_MIN_ROWS, KX_FLY_MIN)

#define KG(name, conv)                                                                         \
    const rw_mm_kernel rw_avx512_kernel_##name##_ggml = {.x_bytes = x_bytes_super,             \
                                                         .convert_x = conv,                    \
                                                         .tile = rw_avx512_tile_##name##_ggml, \
                                                         .max_nw = KG_NW,                      \
                                                         .max_nx = KG_NX,                      \
                                                         .p_bytes = x_bytes_super,             \
                                                         .convert_p = convert_q8_K_p,          \
                                                         .tile_p = tile_gp_##name,             \
                                                         .pack_p = pack_##name##_gp,           \
                                                         .p_rows = KP_ROWS,                    \
                                                         .max_np = KP_MAX_NX,                  \
                                                         .p_wbytes = kgp_wbytes_##name,        \
                                                         .p_min_rows = KP_MIN_ROWS};
KG(q4_K, convert_q8_K_perm)
KG(q5_K, convert_q8_K_perm)
KG(q6_K, convert_q8_K)
