/* mamba2.c - the Mamba2 mixer, shared by the hybrids that have one
 * (granitehybrid, nemotron_h), as llama.cpp's build_mamba2_layer computes it:
 *
 *   [z | xBC | dt] = ssm_in x; xBC = silu(causal conv of xBC, with bias)
 *   x, B, C = xBC split (d_inner, groups*d_state, groups*d_state)
 *   y = ssm scan (head h: dt = softplus(dt + dt_bias), state = state*exp(dt*A)
 *       + dt*x*B^T, y = state C + D x; group of head h = h / (heads/groups))
 *   y = grouped rmsnorm(y * silu(z)) * ssm_norm; out = ssm_out y
 *
 * Matmuls run over the whole pass; the conv and the scan run per sequence
 * in its "mamba2" state (cache/mamba2_state.c), token by token in order, so
 * a token's result does not depend on how its prompt was split. */
#include <stdio.h>

#include "kernels/ops.h"
#include "kernels/ops_model.h"
#include "models/model_int.h"

static rw_status key_u32(const rw_gguf *g, const char *arch, const char *name, uint32_t *out, rw_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    rw_status st = rw_gguf_get_u32(g, key, out, err);
    if (st == RW_ERR_NOT_FOUND) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
    return st;
}

rw_status rw_models__mamba2_dims(const rw_gguf *g, const char *arch, rw_models__mamba2_shape *d, rw_error *err) {
    uint32_t kc, ds, groups, heads, inner;
    rw_status st;
    if ((st = key_u32(g, arch, "ssm.conv_kernel", &kc, err)) || (st = key_u32(g, arch, "ssm.state_size", &ds, err)) ||
        (st = key_u32(g, arch, "ssm.group_count", &groups, err)) ||
        (st = key_u32(g, arch, "ssm.time_step_rank", &heads, err)) ||
        (st = key_u32(g, arch, "ssm.inner_size", &inner, err)))
        return st;
    if (kc < 1 || kc > 64 || ds == 0 || ds > 4096 || groups == 0 || heads == 0 || heads % groups || inner == 0 ||
        inner % heads || inner % groups || inner > (1u << 20))
        return rw_errorf(err, RW_ERR_FORMAT, "invalid %s ssm metadata (conv %u, state %u, groups %u, heads %u, inner %u)",
                         arch, kc, ds, groups, heads, inner);
    d->kc = (int)kc, d->ds = (int)ds, d->groups = (int)groups, d->heads = (int)heads, d->d_inner = (int)inner;
    d->hd = (int)(inner / heads);
    d->conv_ch = (int64_t)inner + 2 * (int64_t)groups * ds;
    d->in_w = (int64_t)inner + d->conv_ch + heads;
    return RW_OK;
}

int64_t rw_models__mamba2_work_floats(const rw_models__mamba2_shape *d) { return d->in_w + d->d_inner; }

/* An F32 tensor of exactly {ne0, ne1} (conv, dt bias, A, D, norm). */
static rw_status bind_f32(const rw_model *m, const char *name, uint64_t ne0, uint64_t ne1, const float **out,
                          rw_error *err) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name);
    if (t->type != RW_TYPE_F32 || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s must be F32 {%llu, %llu}", name, (unsigned long long)ne0,
                         (unsigned long long)ne1);
    *out = t->data;
    return RW_OK;
}

rw_status rw_models__mamba2_bind(rw_model *m, int il, const rw_models__mamba2_shape *d, rw_models__mamba2_layer *M, rw_error *err) {
    const int64_t E = m->hp.n_embd;
    char n[96];
    rw_status st;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if ((st = rw_models__bind_matrix(m, NAME("ssm_in.weight"), E, d->in_w, true, &M->in, err)) ||
        (st = rw_models__bind_matrix(m, NAME("ssm_out.weight"), d->d_inner, E, true, &M->out, err)) ||
        (st = bind_f32(m, NAME("ssm_conv1d.weight"), (uint64_t)d->kc, (uint64_t)d->conv_ch, &M->conv_w, err)) ||
        (st = bind_f32(m, NAME("ssm_conv1d.bias"), (uint64_t)d->conv_ch, 1, &M->conv_b, err)) ||
        (st = bind_f32(m, NAME("ssm_dt.bias"), (uint64_t)d->heads, 1, &M->dt_bias, err)) ||
        (st = bind_f32(m, NAME("ssm_a"), 1, (uint64_t)d->heads, &M->a, err)) ||
        (st = bind_f32(m, NAME("ssm_d"), 1, (uint64_t)d->heads, &M->d, err)) ||
        (st = bind_f32(m, NAME("ssm_norm.weight"), (uint64_t)(d->d_inner / d->groups), (uint64_t)d->groups, &M->norm,
                       err)))
        return st;
#undef NAME
    M->dims = *d;
    M->params = (rw_rec_params){.conv_channels = (int)d->conv_ch, .conv_kernel = d->kc, .conv_w = M->conv_w,
                                .conv_b = M->conv_b, .eps = m->hp.rms_eps, .heads = d->heads, .groups = d->groups,
                                .head_dim = d->hd, .d_state = d->ds, .dt_bias = M->dt_bias, .a = M->a, .d = M->d};
    return RW_OK;
}

/* The gate and the grouped norm of tokens [t0, t1): y <- norm(silu(z) * y). */
typedef struct {
    float *zxbcdt, *y;
    int64_t W, DI;
    int groups;
    const float *norm;
    float eps;
} gate_norm_job;

static void gate_norm_rows(void *ctx, int64_t t0, int64_t t1) {
    const gate_norm_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        float *z = j->zxbcdt + t * j->W, *yt = j->y + t * j->DI;
        rw_swiglu(z, yt, j->DI); /* z <- silu(z) * y */
        rw_rmsnorm_groups(z, j->norm, j->DI / j->groups, j->groups, (int)(j->DI / j->groups), j->eps, yt);
    }
}

/* The buffers, [n][in_w] zxbcdt and [n][d_inner] y, are carved from
 * m->sc.work (model_int.h), which the architecture's bind sized through
 * arch_work_floats (rw_models__mamba2_work_floats); they overlap the
 * attention and FFN buffers, dead once a sublayer has written sc.tmp. */
rw_status rw_models__mamba2(rw_model *m, int il, const rw_models__mamba2_layer *M, const rw_models__batch *b, rw_error *err) {
    const rw_models__mamba2_shape *d = &M->dims;
    const int64_t n = b->n, W = d->in_w, DI = d->d_inner;
    rw_status st = rw_models__work_ready(m, n, "Mamba2 layer", err);
    if (st) return st;
    float *zxbcdt = m->sc.work, *y = zxbcdt + m->sc.n_cap * W;
    if ((st = rw_models__matmul(&M->in, m->sc.xn, n, zxbcdt, b->pool, err))) return st;
    /* conv and scan run in each sequence's state on the rows' [xBC | dt] slices */
    if ((st = rw_models__rec_append(b, il, zxbcdt + DI, W, y, DI, err))) return st;
    gate_norm_job gj = {zxbcdt, y, W, DI, d->groups, M->norm, m->hp.rms_eps};
    rw_threadpool_rows(b->pool, n, 4, gate_norm_rows, &gj);
    return rw_models__matmul(&M->out, y, n, m->sc.tmp, b->pool, err);
}
