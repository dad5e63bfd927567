/* plan.c - the tensor plan of a synthesized model: each tensor's type (as
 * llama-quantize would pick it) and the seeded values it is filled with
 * when the file is written (synth.c's scales). synth.c and archs.c add
 * tensors to it; it calls neither. */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hash.h"
#include "base/threadpool.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "synth/synth_int.h"
#include "synth/synth_preset.h"

typedef rw_synth_fill fill_kind;
typedef struct rw_synth_plan plan;

/* ---- random numbers: splitmix64, one stream per tensor ---- */

#define SPLITMIX_STEP 0x9e3779b97f4a7c15ull

/* The state advances by a constant per number, so the stream can be
 * entered anywhere: after k numbers it is seed + k * SPLITMIX_STEP. Every
 * fill kind takes one number per element (or none), so row r of a tensor
 * starts at seed + r * n_in * SPLITMIX_STEP, and rows can be made on any
 * thread in any order, bitwise as one thread making them in turn. */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += SPLITMIX_STEP);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float uniform_pm1(uint64_t *s) { return (float)((splitmix(s) >> 40) * (1.0 / (1ull << 23)) - 1.0); }

/* base/hash.h's FNV-1a from a seed of its own (not RW_HASH_INIT: every
 * synthetic file's weights, and the fixtures made from them, stay bitwise
 * the same). */
static uint64_t hash_name(const char *s) { return rw_hash_bytes(1469598103934665603ull, s, strlen(s)); }

static void fill_row(const fill_spec *f, uint64_t *rng, uint64_t n_in, uint64_t row, float *x) {
    switch (f->kind) {
    case FILL_MATRIX: {
        float a = f->scale * sqrtf(3.0f / (float)n_in); /* uniform [-a, a] has std a/sqrt(3) */
        /* the bulk of every file's numbers: 16 at a time where the CPU can */
#if defined(__x86_64__)
        const rw_kernel_tier tier = rw_kernel_tier_current(); /* the amx tier runs the AVX-512 code too */
        if (tier == RW_TIER_AVX512 || tier == RW_TIER_AMX)
            rw_synth__fill_uniform_avx512(*rng, SPLITMIX_STEP, a, n_in, x);
        else
#endif
            for (uint64_t i = 0; i < n_in; i++) x[i] = a * uniform_pm1(rng);
        break;
    }
    case FILL_NORM:
        for (uint64_t i = 0; i < n_in; i++) x[i] = 1.0f + 0.05f * uniform_pm1(rng);
        break;
    case FILL_SSM_A:
        for (uint64_t i = 0; i < n_in; i++) x[i] = -(8.5f + 7.5f * uniform_pm1(rng));
        break;
    case FILL_DT_BIAS:
        for (uint64_t i = 0; i < n_in; i++) {
            float dt = expf(logf(1e-3f) + (logf(1e-1f) - logf(1e-3f)) * 0.5f * (1.0f + uniform_pm1(rng)));
            x[i] = dt + logf(-expm1f(-dt));
        }
        break;
    case FILL_ROPE_FREQS: {
        /* llama3 scaling (factor 32, low 1, high 4, original context 8192):
         * long wavelengths are slowed down by the factor, short ones kept,
         * and the band between is interpolated. */
        const float factor = 32.0f, low = 1.0f, high = 4.0f, orig = 8192.0f;
        for (uint64_t i = 0; i < n_in; i++) {
            float freq = powf(f->rope_base, -2.0f * (float)i / (float)(2 * n_in));
            float wavelen = 2.0f * (float)M_PI / freq;
            float r;
            if (wavelen < orig / high) r = 1.0f;
            else if (wavelen > orig / low) r = factor;
            else {
                float smooth = (orig / wavelen - low) / (high - low);
                r = 1.0f / ((1.0f - smooth) / factor + smooth);
            }
            x[i] = r;
        }
        break;
    }
    }
    (void)row;
}

/* Rows of one tensor, quantized in tasks of FILL_ROWS rows on the pool. */
enum { FILL_ROWS = 16 };

typedef struct {
    const fill_spec *f;
    const rw_gguf_tensor *info;
    uint8_t *dst;
    uint64_t n_in, n_rows, row_bytes;
    float *x;                    /* n_in floats per thread */
    _Atomic rw_status first_err; /* RW_OK until a row fails */
} fill_job;

static void fill_task(void *ctx, int64_t task, int thread) {
    fill_job *j = ctx;
    float *x = j->x + (size_t)thread * j->n_in;
    const uint64_t r0 = (uint64_t)task * FILL_ROWS, r1 = r0 + FILL_ROWS < j->n_rows ? r0 + FILL_ROWS : j->n_rows;
    for (uint64_t r = r0; r < r1; r++) {
        uint64_t rng = j->f->seed + r * j->n_in * SPLITMIX_STEP; /* see splitmix */
        fill_row(j->f, &rng, j->n_in, r, x);
        uint8_t *out = j->dst + r * j->row_bytes;
        if (j->info->type == RW_TYPE_F32) memcpy(out, x, j->n_in * sizeof *x);
        else {
            rw_status s = rw_quantize_row(j->info->type, x, out, (int64_t)j->n_in);
            if (s) {
                rw_status ok = RW_OK;
                atomic_compare_exchange_strong(&j->first_err, &ok, s);
                return;
            }
        }
    }
}

static rw_status fill_tensor(void *ctx, const rw_gguf_tensor *info, void *dst, rw_error *err) {
    plan *p = ((void **)ctx)[0];
    const fill_spec *f = ((void **)ctx)[1];
    fill_job j = {
        .f = f, .info = info, .dst = dst, .n_in = info->ne[0], .n_rows = info->ne[1] * info->ne[2] * info->ne[3]};
    rw_dtype_row_bytes(info->type, j.n_in, &j.row_bytes);
    const int n_threads = rw_threadpool_size(p->pool);
    j.x = malloc(j.n_in * (size_t)n_threads * sizeof *j.x); /* freed below */
    if (!j.x) return rw_errorf(err, RW_ERR_NOMEM, "no memory for a row of %s", info->name);
    atomic_init(&j.first_err, RW_OK);
    rw_threadpool_run(p->pool, fill_task, &j, (int64_t)((j.n_rows + FILL_ROWS - 1) / FILL_ROWS));
    free(j.x);
    rw_status s = atomic_load(&j.first_err);
    if (s) return rw_errorf(err, s, "cannot quantize %s to %s", info->name, rw_dtype_name(info->type));
    p->written++;
    if (p->verbose && (p->written % 16 == 0)) fprintf(stderr, "synth: %zu tensors written\n", p->written);
    return RW_OK;
}

/* llama-quantize's "more bits" rule for _M mixes: the first and last eighth
 * of the layers and every third layer in between. */
static bool more_bits(uint32_t il, uint32_t n) { return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2; }

/* The type a weight gets. is_1d / keep_f32 tensors stay F32 (norms, biases,
 * conv kernels, routers), as llama.cpp's converter and quantizer keep them. */
static rw_dtype weight_type(const plan *p, const char *name, uint64_t n_in, int layer, bool keep_f32) {
    if (keep_f32) return RW_TYPE_F32;
    rw_dtype t = p->base_type;
    if (p->experts_mxfp4 && strstr(name, "_exps.")) return RW_TYPE_MXFP4; /* llama-quantize's MXFP4_MOE */
    if (p->k_mix) {
        bool head = !strcmp(name, "output.weight");
        if (head) t = RW_TYPE_Q6_K;
        /* "ffn_down" as llama-quantize matches it: the experts' and the
         * shared expert's down projections too */
        if (layer >= 0 && (strstr(name, "attn_v.") || strstr(name, "ffn_down") || strstr(name, "attn_qkv.")) &&
            more_bits((uint32_t)layer, p->n_layer))
            t = RW_TYPE_Q6_K;
    }
    /* A row the type's blocks do not divide falls back as llama-quantize
     * does: a K-quant to the legacy type of about its size, then Q8_0, then
     * F16 (rows of 2880 in gpt-oss, 4480 in Nemotron Nano 2). */
    if (n_in % rw_dtype_block_size(t) != 0) {
        switch (t) {
        case RW_TYPE_Q4_K: t = RW_TYPE_Q5_0; break;
        case RW_TYPE_Q5_K: t = RW_TYPE_Q5_1; break;
        case RW_TYPE_Q2_K:
        case RW_TYPE_Q3_K:
        case RW_TYPE_IQ4_XS: t = RW_TYPE_IQ4_NL; break;
        default: t = RW_TYPE_Q8_0; break;
        }
        if (n_in % rw_dtype_block_size(t) != 0) t = RW_TYPE_F16;
    }
    return t;
}

rw_status rw_synth__add_tensor(plan *p, const char *name, int layer, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                                fill_kind kind, float scale, bool keep_f32, uint64_t seed, float rope_base,
                                rw_error *err) {
    if (p->n == p->cap) return rw_errorf(err, RW_ERR_INTERNAL, "synth: tensor plan full");
    fill_spec *f = &p->specs[p->n];
    f->kind = kind;
    f->scale = scale;
    f->seed = seed ^ hash_name(name);
    f->rope_base = rope_base;
    /* ctx = {plan, spec}: stored as a pair right after the specs */
    void **ctx = (void **)(p->specs + p->cap) + 2 * p->n;
    ctx[0] = p;
    ctx[1] = f;
    p->n++;
    uint64_t ne[3] = {ne0, ne1, ne2};
    rw_dtype t = weight_type(p, name, ne0, layer, keep_f32 || n_dims == 1);
    return rw_gguf_writer_add_tensor(p->w, name, t, n_dims, ne, NULL, fill_tensor, ctx, err);
}

rw_status rw_synth__add(rw_synth_plan *p, const char *name, int layer, uint32_t n_dims, uint64_t ne0, uint64_t ne1,
                        uint64_t ne2, rw_synth_fill kind, float scale, bool keep_f32, uint64_t seed, rw_error *err) {
    return rw_synth__add_tensor(p, name, layer, n_dims, ne0, ne1, ne2, kind, scale, keep_f32, seed, 0, err);
}

rw_gguf_writer *rw_synth__writer(rw_synth_plan *p) { return p->w; }

/* Names like "blk.3.attn_q.weight". */
const char *rw_synth__blk(char *buf, int il, const char *what) {
    snprintf(buf, 96, "blk.%d.%s", il, what);
    return buf;
}
