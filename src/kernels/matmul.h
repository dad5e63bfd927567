/* matmul.h - Y = W·X for quantized or float weights and f32 activations.
 *
 *   y[r][o] = sum_{i < n_in} W[o][i] * x[r][i]      r < n_rows, o < n_out
 *
 * W is n_out rows of n_in elements of one type (ggml layout: a GGUF tensor
 * with ne = {n_in, n_out}); x and y are f32 rows with their own strides.
 *
 * Numerics follow llama.cpp's CPU path: each activation row is first
 * converted to the weight type's "vec-dot type" (F32 -> f32, F16 -> f16,
 * BF16 -> bf16, Q4_0/Q5_0/Q8_0/IQ4_NL -> Q8_0, Q4_1/Q5_1 -> Q8_1, the
 * K-quants and IQ4_XS -> Q8_K); then each output is a dot product computed
 * block by block, with exact integer sums inside a block and float
 * accumulation across blocks in a fixed order.
 *
 * Batch invariance: y[r][o] depends only on W[o] and x[r], bitwise: not on
 * n_rows, the row's position, the gather lists, the thread count or the
 * tier. The one-row and many-row paths run the same operations in the same
 * order for every output element.
 *
 * Tiers: RW_TIER_REF is the plain C specification (matmul_ref.c), which
 * writes out the AVX-512 tier's float arithmetic; every tier computes its
 * bits (tests/kernels/test_matmul.c compares them bitwise), so results, saved
 * states and cache entries mean the same on every CPU. The tier is chosen
 * once from the CPU's features; the environment variable
 * RW_KERNELS=ref|avx2|avx512|amx|neon overrides it (for tests and benchmarks).
 */
#ifndef RW_KERNELS_MATMUL_H
#define RW_KERNELS_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "base/threadpool.h"

struct rw_lowrank;

/* A weight matrix: n_out rows of n_in elements of `type` at `data`, row o at
 * data + o * row_stride bytes (row_stride 0 = packed rows). Not owned: the
 * caller keeps data (usually the mmap'd GGUF) alive during the call. For one
 * expert of a 3-D MoE tensor, point data at that expert's first row. */
typedef struct {
    rw_dtype type;
    const void *data;
    int64_t n_in;
    int64_t n_out;
    size_t row_stride;
    const void *panels;               /* the rows repacked by rw_matmul_pack, or NULL; borrowed */
    const struct rw_lowrank *lowrank; /* low-rank updates added to every product (LoRA), or NULL; borrowed */
} rw_matrix;

/* A low-rank update of a matrix W (a LoRA adapter's pair for one weight):
 * rw_matmul and rw_matmul_multi compute y = W x, then for each update in
 * the chain y += (B (A x)) * scale, in the chain's order, as llama.cpp adds
 * an adapter (the product with B, then the scale, then the sum). A has W's
 * n_in inputs and `rank` outputs (any type rw_matmul takes, no updates of
 * its own); B is given transposed in f32, bt[k * n_out + o] = B[o][k], and
 * its products are plain C (each output's rank terms added in order k = 0,
 * 1, ...), the same operations on every tier: rank is small, where a
 * matmul kernel's dot products would be mostly overhead. Each row's result
 * still depends on that row alone. Not owned: the adapter's loader keeps
 * A's data, bt and the nodes alive while W is used. */
typedef struct rw_lowrank {
    rw_matrix a;
    const float *bt; /* [rank][W's n_out] */
    float scale;
    /* RW_TYPE_F16 or RW_TYPE_BF16: A x is rounded to that type before B's
     * products, as ggml converts a product's input to its weights' type
     * (the adapter's loader sets it under --numerics ggml, where B is F16 or
     * BF16); RW_TYPE_F32 (0): kept in f32. */
    rw_dtype t_type;
    const struct rw_lowrank *next;
} rw_lowrank;

/* Repacks w's rows for the current tier's panel form, the fastest from two
 * activation rows up for Q8_0 (speculative verify passes, decode batches,
 * prefill) and from 8 rows for Q4_0, Q5_0, IQ4_NL and MXFP4, when the tier
 * has one for w's type (those with AVX-512). Q4_K, Q5_K and Q6_K with
 * AVX-512 (our numerics) get stored panels: the rows' own bytes turned
 * around 16 rows at a time, which every row count takes (see
 * rw_matmul_panels_replace_rows). *panels gets a buffer of about w's size
 * (Q8_0, the stored panels) or 2-2.3 times it (ggml numerics' K-quant
 * panels: one byte per weight) that the caller frees with free() once no
 * matrix points to it, or NULL when there is no such form; set w->panels
 * to it. Results never depend on whether a matrix has panels.
 * Panels belong to the kernel that packed them: a matmul under another
 * tier or numerics (whose kernels lay panels out otherwise) does without.
 * rw_matmul_set_panels(false) turns the form off (for comparisons; the
 * CLI's RW_PANELS=0).
 * RW_ERR_NOMEM if the buffer cannot be allocated. */
rw_status rw_matmul_pack(const rw_matrix *w, void **panels, rw_error *err);
/* rw_matmul_pack with the packing shared out among pool's threads (NULL:
 * the caller alone). */
rw_status rw_matmul_pack_pool(const rw_matrix *w, void **panels, rw_threadpool *pool, rw_error *err);
/* Whether w's panels (rw_matmul_pack) hold exactly its rows' bytes and take
 * every row count of a product under the current tier and numerics: a
 * caller may then keep the panels in place of the rows (a model gives the
 * rows' pages back to the file). */
bool rw_matmul_panels_replace_rows(const rw_matrix *w);
void rw_matmul_set_panels(bool on); /* process-wide, before loading; default on */
/* Whether the AVX2 tier may sum bytes with AVX-VNNI where the CPU has it
 * (process-wide, default on; the CLI's RW_AVX_VNNI=0 turns it off). The
 * same bits either way: for comparisons and tests. */
void rw_matmul_set_avx_vnni(bool on);
/* How the AVX2 tier's Q4_K / Q5_K one-row and few-row forms broadcast each
 * sub-block's scales: 1 with shuffles, 0 with loads from a stored table,
 * -1 (the default) the faster on this CPU's vendor (shuffles on AMD). The
 * same bits either way: for comparisons and tests. */
void rw_matmul_set_k_scale_shuffle(int mode);
/* Where the AVX-512 one-row K-quant form (16 weight rows streamed at once)
 * prefetches its weights: 1 into L2, 0 into L1, -1 (the default) the faster
 * on this CPU (L2 on AMD family 19h: Zen 4, the one with AVX-512). The
 * same bits either way. */
void rw_matmul_set_prefetch_l2(int mode);
/* Whether they go to L2 now: the setting, or by default on AMD family 19h
 * (Zen 4 among the AVX-512 CPUs), where a one-row Q4_K product prefetching
 * its 16 rows into L1 ran at about half its rate into L2 (`rewind bench
 * kernels`); on Zen 5 L1 was as fast or faster. */
bool rw_matmul_prefetch_l2(void);
/* The bytes rw_matmul_pack would allocate for w (0: no panel form). */
size_t rw_matmul_pack_bytes(const rw_matrix *w);

/* True if rw_matmul accepts weights of type t. */
bool rw_matmul_supports(rw_dtype t);

/* The activation type W's rows are multiplied with (Q8_0 for Q4_0, ...). */
rw_dtype rw_matmul_vec_dot_type(rw_dtype t);

/* y[r*y_stride + o] = dot(W[o], x[r*x_stride ...]) for r < n_rows.
 * Strides are in floats. y must not overlap x. pool may be NULL (one
 * thread). Returns RW_ERR_UNSUPPORTED for a weight type without a kernel,
 * RW_ERR_INVALID_ARG for n_in not a multiple of the type's block (256 for
 * K-quants) or bad sizes, RW_ERR_NOMEM if the activation scratch cannot be
 * allocated. */
rw_status rw_matmul(const rw_matrix *w, const float *x, int64_t x_stride, int64_t n_rows, float *y, int64_t y_stride,
                    rw_threadpool *pool, rw_error *err);

/* Gathered form (MoE): row r reads x + x_rows[r]*x_stride and writes
 * y + y_rows[r]*y_stride. A NULL list means the identity. The same y row
 * must not appear twice. Each row's result is bitwise what rw_matmul gives
 * for it. */
rw_status rw_matmul_gather(const rw_matrix *w, const float *x, int64_t x_stride, const int32_t *x_rows, float *y,
                           int64_t y_stride, const int32_t *y_rows, int64_t n_rows, rw_threadpool *pool, rw_error *err);

/* Grouped form (MoE experts in one call; w without low-rank updates, else
 * RW_ERR_UNSUPPORTED): group g multiplies the weights at
 * groups[g].data (same type, n_in, n_out and row stride as w; w->data is
 * not used) with its rows of x, exactly as rw_matmul_gather would, and all
 * groups share one conversion pass and one parallel dispatch (decode runs
 * many small expert matmuls). A group right after one with the same x_rows
 * pointer and n_rows reads the same rows, and uses that group's converted
 * rows instead of converting them again (an expert's gate and up). No y
 * row may be written by two groups. */
typedef struct {
    const void *data;      /* this group's weight rows (e.g. one expert of a 3-D tensor) */
    const int32_t *x_rows; /* rows of x it reads (NULL: 0..n_rows-1) */
    const int32_t *y_rows; /* rows of y it writes (NULL: y_row0 .. y_row0 + n_rows - 1, written in place) */
    int64_t n_rows;
    int64_t y_row0; /* with y_rows NULL: its first row of y (0 unless set) */
    float *y;       /* the output its rows index (NULL: the call's y; same y_stride) */
    /* stored panels (rw_matmul_pack) holding this group's rows (e.g. a 3-D
     * expert tensor packed whole), or NULL: then w->panels, where they hold
     * them */
    const void *panels;
} rw_matmul_group;

rw_status rw_matmul_grouped(const rw_matrix *w, const rw_matmul_group *groups, int64_t n_groups, const float *x,
                            int64_t x_stride, float *y, int64_t y_stride, rw_threadpool *pool, rw_error *err);

/* Several matrices of one type and row length times the same rows:
 * ys[i][r*y_strides[i] + o] = dot(ws[i] row o, x row r). Each output is
 * bitwise what rw_matmul gives; the rows are converted once and all the
 * products share one parallel dispatch (e.g. the q/k/v projections of one
 * input). Consecutive matrices of one type and row length (up to 8) share
 * a call; a change of type or length starts the next call. */
rw_status rw_matmul_multi(const rw_matrix *const *ws, float *const *ys, const int64_t *y_strides, int n_w,
                          const float *x, int64_t x_stride, int64_t n_rows, rw_threadpool *pool, rw_error *err);

/* What reaches each weight matrix (importance matrices, models/imatrix.c):
 * once set, every product the calling thread runs first calls fn with the
 * weights' address (one expert's for a grouped product; for a low-rank
 * update's A too), their row length, and its input rows: row r at x +
 * (x_rows ? x_rows[r] : r) * x_stride. The products are unchanged. NULL
 * stops; a thread's setting is its own. */
typedef void (*rw_matmul_observer_fn)(void *ctx, const void *w_data, int64_t n_in, const float *x, int64_t x_stride,
                                      const int32_t *x_rows, int64_t n_rows);
void rw_matmul_observe(rw_matmul_observer_fn fn, void *ctx);

/* ---- Kernel tiers ---------------------------------------------------- */

typedef enum {
    RW_TIER_REF = 0, /* plain C: the specification */
    RW_TIER_AVX2,    /* AVX2 + FMA + F16C */
    RW_TIER_AVX512,  /* AVX-512 F/BW/VL/DQ + VNNI + BF16 */
    RW_TIER_NEON,    /* AArch64 NEON + dot product (SDOT) */
    RW_TIER_AMX,     /* the AVX-512 tier, its many-row products on the AMX int8 tiles */
    RW_TIER_COUNT
} rw_kernel_tier;

const char *rw_kernel_tier_name(rw_kernel_tier t); /* "ref", "avx2", "avx512", "neon", "amx" */

/* True for the tiers that run the AVX-512 ops and kernels (avx512, amx). */
bool rw_kernel_tier_is_avx512(rw_kernel_tier t);

/* True if this CPU (and OS) can run tier t. */
bool rw_kernel_tier_available(rw_kernel_tier t);

/* The tier in use: the last rw_kernel_tier_set, else the best available
 * (the CLI applies RW_KERNELS; the library reads no environment). */
rw_kernel_tier rw_kernel_tier_current(void);

/* Selects the tier for later calls (tests, benchmarks). Not thread-safe with
 * running matmuls. Returns false (and changes nothing) if t is unavailable. */
bool rw_kernel_tier_set(rw_kernel_tier t);

/* The tier that actually serves type t under tier t_req: a tier without a
 * specialised kernel for a type falls back to the one below it (AVX-512 to
 * AVX2, AVX2 and NEON to the reference). */
rw_kernel_tier rw_kernel_tier_for(rw_kernel_tier t_req, rw_dtype type);

/* ---- Numerics --------------------------------------------------------
 *
 * Activations are always quantized as ggml's x86 build quantizes them
 * (Q8_0/Q8_1: inverse scale 127/amax, nearest even; Q8_K: its reference).
 * Three modes then choose the order in which each output is summed:
 *  - RW_NUMERICS_GGML: every type with a ggml-order kernel (Q8_0, Q4_0,
 *    Q5_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K) sums in the order of ggml's AVX2
 *    vec-dots (8 lanes of 4 products, one fma per lane and block or
 *    super-block, ggml's horizontal sum), so with the AVX-512 ops, which
 *    follow ggml's vector code, the logits of models made of those types
 *    equal llama.cpp's bit for bit (the fixture tests check this). For the 32-block types that
 *    costs about twice the arithmetic in many-row products (prefill,
 *    batches, verify passes); one-row decode is bound by memory either way.
 *  - RW_NUMERICS_FAST: every type in the order that suits our kernels.
 *  - RW_NUMERICS_AUTO (the default) is FAST. Our order is as faithful to
 *    the unquantized model as ggml's (the KL divergence of a quantized
 *    file's logits from its F32 model's is the same within a few percent,
 *    docs/numerics.md), so the default does not pay ggml's order's extra
 *    arithmetic; agreement with llama.cpp's last bits is what GGML is for.
 * Every mode is batch invariant and gives the same bits in every tier
 * (tested). */
typedef enum { RW_NUMERICS_AUTO = 0, RW_NUMERICS_FAST, RW_NUMERICS_GGML } rw_numerics;

/* The mode in use: the last rw_numerics_set, else auto (the CLI sets it
 * from --numerics or RW_NUMERICS; the library reads no environment). */
rw_numerics rw_numerics_current(void);

/* Selects the mode. Call it before loading a model (weights are repacked
 * for the mode's kernels at load) and not while matmuls run. */
void rw_numerics_set(rw_numerics m);

/* Parses "auto" / "fast" / "ggml"; false if s is none of them. */
bool rw_numerics_parse(const char *s, rw_numerics *out);

/* "auto", "fast" or "ggml" (static storage). */
const char *rw_numerics_name(rw_numerics m);

/* Reads n bytes at p (64-byte aligned, n a multiple of 256) with the widest
 * loads the CPU has and returns a value that depends on all of them: the
 * streaming read that `rewind bench kernels` measures bandwidth with. */
uint64_t rw_stream_read(const void *p, size_t n);

#endif
