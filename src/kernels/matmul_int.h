/* matmul_int.h - what a matmul tier provides, per weight type (private).
 *
 * A tier implements, for each weight type it specialises, an rw_mm_kernel:
 *   - convert_x turns one f32 activation row into the tier's own format of
 *     the vec-dot type (block_q8_0 rows for the reference; the fast tiers may
 *     use any layout, e.g. separate quants / scales / sums);
 *   - tile computes a small block of outputs, out[j*nw + i] = dot(W row i,
 *     activation row j), for i < nw <= max_nw and j < nx <= max_nx.
 * With nx == 1 (or nx <= max_nx_1x), nw may also be anything up to
 * RW_MM_ROWS_1X (decode and few-row calls: the weights stream once for all
 * activation rows).
 * The tile must compute every output with the same operations whatever nw,
 * nx and the element's place in the tile: this is what makes results batch
 * invariant (matmul.c is free to cut the work into any tiles).
 *
 * A kernel may also have a group form for many rows (g_bytes non-NULL):
 *   - convert_g converts up to RW_MM_GROUP activation rows at once into one
 *     packed group (missing rows are padding whose outputs are discarded);
 *   - tile_g computes out[r*out_stride + i] = dot(W row i, activation row r)
 *     for i < nw <= g_max_nw (or max_nw) and r < nx <= RW_MM_GROUP * max_ng, row r being
 *     row r % RW_MM_GROUP of group r / RW_MM_GROUP (outputs of padding rows
 *     are not written).
 * Each output must be bitwise what tile gives for that row alone: the group
 * form only lays the same arithmetic out differently (e.g. one activation
 * row per SIMD lane), so matmul.c may pick either form for any rows.
 *
 * And a quad form for few rows (q_bytes non-NULL): the same contract with
 * groups of RW_MM_QUAD rows (convert_q, tile_q, up to max_nq quads per
 * call), used for calls of 2 .. 32 rows, where the group form would pad
 * most of its lanes and the one-row tile would redo its per-row work for
 * every row.
 *
 * And a panel form over repacked weights (p_bytes non-NULL): pack_p lays a
 * matrix out in panels of p_rows weight rows (rw_matmul_pack; a panel
 * takes p_rows * w_stride bytes, w_stride being p_wbytes(n_in), or the
 * dense row size when p_wbytes is NULL); convert_p converts one activation row per slot;
 * tile_p computes out[r*out_stride + i] = dot(W row i, activation row r)
 * for i < nw (w: the panel holding row 0, nw any count) and
 * r < nx <= max_np, each output bitwise what tile gives. Used from 2 rows
 * (or p_min_rows) up when the matrix has panels: every lane works whatever
 * the row count.
 */
#ifndef RW_KERNELS_MATMUL_INT_H
#define RW_KERNELS_MATMUL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

/* RW_MM_ROWS_1X: the most weight rows of one tile call with one activation
 * row; long calls let a tile's prefetch run on from pass to pass (at 64
 * rows a call, Q4_K decode restarted its stream every few tens of KB). */
enum { RW_MM_ROWS_1X = 1024, RW_MM_GROUP = 16, RW_MM_QUAD = 4 };

typedef struct {
    size_t (*x_bytes)(int64_t n_in); /* bytes of one converted activation row */
    void (*convert_x)(const float *x, void *xq, int64_t n_in);
    void (*tile)(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xq, size_t xq_stride, int nx,
                 float *out);
    int max_nw, max_nx;
    /* group form (optional) */
    size_t (*g_bytes)(int64_t n_in); /* bytes of one packed group */
    void (*convert_g)(const float *const *rows, int n_rows, void *xg, int64_t n_in);
    void (*tile_g)(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xg, size_t xg_stride, int nx,
                   float *out, int64_t out_stride);
    int max_ng;
    /* quad form (optional) */
    size_t (*q_bytes)(int64_t n_in); /* bytes of one packed quad */
    void (*convert_q)(const float *const *rows, int n_rows, void *xq, int64_t n_in);
    void (*tile_q)(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xq, size_t xq_stride, int nx,
                   float *out, int64_t out_stride);
    int max_nq;
    /* panel form (optional) */
    size_t (*p_bytes)(int64_t n_in); /* bytes of one converted activation row */
    void (*convert_p)(const float *const *rows, int n_rows, void *xp, int64_t n_in);
    void (*tile_p)(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xp, size_t xp_stride, int nx,
                   float *out, int64_t out_stride);
    void (*pack_p)(const uint8_t *w, size_t w_stride, int64_t n_in, int64_t n_out, uint8_t *dst);
    int p_rows, max_np;
    size_t (*p_wbytes)(int64_t n_in); /* bytes per weight row in the panels; NULL: the dense row size */
    int p_min_rows;                   /* fewest activation rows that take the panel form; 0: 2 */
    int g_min_rows;                   /* fewest activation rows that take the group form; 0: matmul.c's default */
    int q_max_rows;                   /* most activation rows that take the quad form; 0: matmul.c's default */
    int g_max_nw;                     /* weight rows of one tile_g call; 0: max_nw */
    int fly_min_rows; /* fewest rows that pack panels on the fly (no stored panels); 0: matmul.c's FLY_MIN */
    int max_nx_1x;    /* most activation rows with which tile takes up to RW_MM_ROWS_1X weight rows; 0: 1 */
    /* many-row tile (optional): as tile, up to many_nw x many_nx outputs,
     * for blocks of at least many_min_rows activation rows, without a
     * packed form (its own blocking) */
    void (*tile_many)(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xq, size_t xq_stride,
                      int nx, float *out);
    int many_nw, many_nx, many_min_rows;
    /* stored panels (optional): rw_matmul_pack lays rows out in p_rows-row
     * panels of exactly the rows' bytes (so a model may keep them in place
     * of the rows), which every row count then takes, over the panel
     * form's converted rows (p_bytes, convert_p, max_np) */
    void (*pack_s)(const uint8_t *w, size_t w_stride, int64_t n_in, int64_t n_out, uint8_t *dst);
    void (*tile_s)(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xp, size_t xp_stride, int nx,
                   float *out, int64_t out_stride);
    /* stored panels' rows (w_stride the dense row size) expanded into
     * pack_p's layout: many activation rows then take tile_p over them,
     * expanded per call as pack_p packs (from fly_min_rows rows) */
    void (*expand_s)(const uint8_t *w, size_t w_stride, int64_t n_in, int64_t n_out, uint8_t *dst);
    /* fewest activation rows that expand stored panels of rows n_in long;
     * NULL: fly_min_rows */
    int (*expand_min_rows)(int64_t n_in);
    /* few rows over the dense rows (optional): as tile_s, but w is the
     * matrix's rows (w_stride apart), put into stored panels' layout per
     * call; for t_min_rows .. t_max_rows activation rows when panels are on */
    void (*tile_t)(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xp, size_t xp_stride, int nx,
                   float *out, int64_t out_stride);
    int t_min_rows, t_max_rows;
} rw_mm_kernel;

/* Kernel of each tier for weight type t, or NULL if that tier has none
 * (then the next lower tier serves t). */
const rw_mm_kernel *rw_mm_kernel_ref(rw_dtype t);
const rw_mm_kernel *rw_mm_kernel_avx2(rw_dtype t);
const rw_mm_kernel *rw_mm_kernel_avx512(rw_dtype t);
const rw_mm_kernel *rw_mm_kernel_neon(rw_dtype t);
const rw_mm_kernel *rw_mm_kernel_amx(rw_dtype t); /* the AVX-512 kernels, some many-row forms on AMX */
/* The kernels of RW_NUMERICS_GGML (matmul.h), per tier; NULL for the
 * types that mode leaves alone. */
const rw_mm_kernel *rw_mm_kernel_ref_ggml(rw_dtype t);
const rw_mm_kernel *rw_mm_kernel_avx2_ggml(rw_dtype t);
const rw_mm_kernel *rw_mm_kernel_avx512_ggml(rw_dtype t);
const rw_mm_kernel *rw_mm_kernel_neon_ggml(rw_dtype t);

/* rw_stream_read with the widest loads each CPU has (AVX-512, AVX2, NEON):
 * a read loop of 8-byte loads keeps fewer lines in flight and under-reads
 * the memory. */
uint64_t rw_stream_read_avx512(const void *p, size_t n);
uint64_t rw_stream_read_avx2(const void *p, size_t n);
uint64_t rw_stream_read_neon(const void *p, size_t n); /* 16-byte loads, on AArch64 */

/* False after rw_matmul_set_avx_vnni(false) (kernel_tier.c). */
bool rw_matmul_avx_vnni_allowed(void);
/* Whether the AVX2 tier's Q4_K / Q5_K one-row forms broadcast the scales
 * with shuffles (rw_matmul_set_k_scale_shuffle; by default on AMD CPUs). */
bool rw_matmul_k_scale_shuffle(void);

/* CPU feature probes (cpu_features.c). */
bool rw_cpu_has_avx2(void);         /* AVX2 + FMA + F16C, OS saves YMM */
bool rw_cpu_has_avx512(void);       /* F, BW, VL, DQ, VNNI, BF16; OS saves ZMM */
bool rw_cpu_has_avx_vnni(void);     /* AVX2 and the 256-bit VEX VNNI (vpdpbusd on ymm) */
bool rw_cpu_is_amd(void);           /* cpuid's vendor is AMD: a kernel variant's choice, never its bits */
bool rw_cpu_is_amd_family19h(void); /* AMD family 19h (Zen 3, Zen 4): a prefetch choice, never a bit */
bool rw_cpu_has_amx(void);          /* AMX tile + int8, and the kernel let this process use the tile data */
/* Tests only: from now on rw_cpu_has_amx says yes without asking the CPU, for
 * a test that emulates the tile instructions (tests/kernels/amx_emu.h). */
void rw_cpu__assume_amx(void);
bool rw_cpu_has_neon_dot(void);     /* AArch64 with the dot-product instructions (SDOT/UDOT) */
bool rw_cpu_has_neon_i8mm(void);    /* AArch64 with the 8-bit matrix multiply (SMMLA) */

/* The weight bytes [p + RW_MM_PF_AHEAD, ... + len) toward L1, a line at a
 * time, for the float types' one-row dots of the AVX2 and AVX-512 tiers: a
 * one-row product streams its weights once, and the hardware's prefetchers
 * alone left those dots at 53-80% of the read bandwidth (`rewind bench
 * kernels`, one thread, Xeon SPR class). 4 KiB ahead: at ~13 GB/s 1 KiB
 * is under one memory latency ahead, and left F16/BF16 at 80-85% of a read
 * loop over the same 400 MB (paired runs), 4 KiB at 94-104%. Rows follow
 * one another, so past a row's end this is the next row; past the matrix,
 * a prefetch touches nothing (the address is formed as an integer). */
enum { RW_MM_PF_AHEAD = 4096 };
static inline void rw_mm_prefetch_ahead(const uint8_t *p, int len) {
    for (int b = 0; b < len; b += 64)
        __builtin_prefetch((const void *)((uintptr_t)p + RW_MM_PF_AHEAD + (uintptr_t)b), 0, 3);
}

#endif
