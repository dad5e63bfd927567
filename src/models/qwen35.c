/* qwen35.c - Qwen3.5 (dense FFN): gated DeltaNet layers mixed with gated
 * full-attention layers (../shared/specs/qwen35.md §4).
 *
 *   layer il is recurrent iff (il + 1) % full_attention_interval != 0;
 *   block:  x += mixer(rmsnorm(x) * attn_norm)
 *           x += ffn(rmsnorm(x) * post_attention_norm)
 *
 * DeltaNet (per token t, in order; matmuls for all tokens of the call at once):
 *   u = attn_qkv x, z = attn_gate x, b = sigmoid(ssm_beta x),
 *   g = ssm_a * softplus(ssm_alpha x + ssm_dt.bias)
 *   y = silu(causal depthwise conv of u over the last Kc inputs)
 *   q_k = l2norm(y[q of key head k]), k_k = l2norm(y[k of key head k]), v_h
 *   value head h uses key head h mod nk (tiled order, as the converter writes)
 *   S_h = exp(g_h) S_h; d = b_h (v_h - S_h^T k); S_h += k d^T; o_h = S_h^T q / sqrt(dk)
 *   o_h = rmsnorm(o_h) * ssm_norm * silu(z_h); out = ssm_out o
 * Gated attention: attn_q gives per head [q | gate]; q, k RMS-normed per head,
 * NEOX RoPE on the first rope.dimension_count dims (IMROPE with text
 * positions [p, p, p, 0] is exactly that when the sections cover every
 * rotated pair), causal GQA attention, output times sigmoid(gate).
 *
 * The recurrence runs token by token in prefill as in decode, so a token's
 * result does not depend on how its prompt was split into calls.
 *
 * Per-sequence recurrent state (rw_model_seq.rec), per recurrent layer:
 *   conv  [CD][Kc-1]       the last Kc-1 conv inputs per channel, oldest first
 *   delta [nv][dv][dk]     S_h[j][i] at h*dv*dk + j*dk + i (llama.cpp's order)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "models/model_int.h"

typedef struct {
    rw_matrix qkv, gate, beta, alpha, out;
    rw_matrix ba;    /* qwen3next: ssm_ba, beta and alpha interleaved per key head (else data NULL) */
    rw_matrix in;    /* qwen3next legacy layout: ssm_in in place of attn_qkv + attn_gate (else data NULL) */
    const float *conv;    /* [CD][Kc] */
    const float *dt_bias; /* [nv] */
    const float *a;       /* [nv], -exp(A_log) */
    const float *norm;    /* [dv] */
    rw_rec_params params; /* the layer's recurrence, for its per-sequence states */
} q35_rec;

/* Mixture-of-experts FFN of one layer (qwen35moe, qwen3next): model_int.h. */
typedef rw_models__moe q35_moe;

typedef struct {
    int nk, nv, dk, dv, kc, interval;
    int n_expert, n_expert_used, ff_exp, ff_shexp; /* MoE only */
    q35_moe *moe;                                   /* [n_layer], MoE only; owned */
    int64_t KD, VD, CD;
    int n_rec;
    int *rec_of;  /* [n_layer]: index among recurrent layers, or -1 for attention */
    q35_rec *rec; /* [n_layer] (attention layers unused) */
    /* Carved from m->sc.work for the sublayer that runs (carve), [n_cap][dim]
     * each; nothing in them survives into the next sublayer. */
    float *in;  /* DeltaNet: [n][CD + 2*nv], the recurrence inputs [q k v | alpha -> g | b -> beta] */
    float *z;   /* DeltaNet: [n][VD] the output gate */
    float *o;   /* DeltaNet: [n][VD] the recurrence output */
    float *tmp; /* DeltaNet, qwen3next: the ssm_ba or ssm_in output before it is split */
    float *qg;  /* gated attention: [n][2*n_head*hd_k] per head [q | gate], after the dense q/k/v/att */
    bool grouped;    /* qwen3next: value head h uses key head h / (nv/nk), not h % nk */
    /* the MTP block (layer n_layer of m->layers, x->moe, rec_of; model.h) */
    rw_matrix eh_proj;              /* 2E -> E: [rmsnorm(e) * enorm | rmsnorm(h) * hnorm] */
    const float *enorm, *hnorm;     /* [E] */
    const float *head_norm;         /* [E]: nextn.shared_head_norm, else output_norm */
    rw_matrix mtp_head;             /* nextn.shared_head_head (data NULL: the model's output) */
    const rw_gguf_tensor *mtp_embd; /* nextn.embed_tokens, else token_embd */
    float *cat;                     /* [n][2E], carved at work's start before the block's layer runs */
} q35;

static bool is_recurrent(const q35 *x, int il) { return x->rec_of[il] >= 0; }

/* Floats per token of the DeltaNet sublayer's buffers (in, z, o, tmp). */
static int64_t deltanet_floats(const q35 *x, bool legacy_in, bool fused_ba) {
    const int64_t tmp = legacy_in ? 2 * x->KD + 2 * x->VD : fused_ba ? 2 * (int64_t)x->nv : 0;
    return x->CD + 2 * (int64_t)x->nv + 2 * x->VD + tmp;
}

/* ---- hyperparameters and weights ---- */

static rw_status get_u32_key(const rw_gguf *g, const char *arch, const char *name, bool required, uint32_t def,
                             uint32_t *out, rw_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    if (!rw_gguf_get(g, key)) {
        if (required) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
        *out = def;
        return RW_OK;
    }
    return rw_gguf_get_u32(g, key, out, err);
}

static rw_status q35_hparams(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp, rw_error *err) {
    rw_status st = rw_models__read_dense_hparams(g, arch, hp, err);
    if (st) return st;
    uint32_t nextn;
    if ((st = get_u32_key(g, arch->name, "nextn_predict_layers", false, 0, &nextn, err))) return st;
    if (nextn >= (uint32_t)hp->n_layer)
        return rw_errorf(err, RW_ERR_FORMAT, "%s.nextn_predict_layers = %u leaves no trunk layers", arch->name, nextn);
    hp->n_layer -= (int)nextn; /* the trunk; the MTP block is bound after it (q35_bind) and run by mtp.c */
    /* IMROPE: text positions are [p, p, p, 0], so pairs covered by the first
     * three sections rotate by p; pairs past them would use position 0. */
    char key[64];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", arch->name);
    if (!strcmp(arch->name, "qwen3next")) return RW_OK; /* plain NEOX RoPE, no sections */
    const rw_gguf_value *sec = rw_gguf_get(g, key);
    if (!sec) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
    int64_t s[4] = {0, 0, 0, 0};
    for (uint64_t i = 0; i < 4; i++)
        if (!rw_gguf_arr_int(sec, i, &s[i]) || s[i] < 0)
            return rw_errorf(err, RW_ERR_FORMAT, "metadata key %s must hold 4 non-negative integers", key);
    if (s[0] + s[1] + s[2] < hp->n_rot / 2)
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "rope sections [%lld, %lld, %lld, %lld] leave rotary pairs to the 4th "
                         "stream, which is not supported", (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3]);
    return RW_OK;
}

static void q35_free(rw_model *m) {
    q35 *x = m->ext;
    if (!x) return;
    free(x->rec_of);
    free(x->rec);
    free(x->moe);
    free(x);
    m->ext = NULL;
}

static rw_status bind_f32(const rw_model *m, const char *name, uint64_t ne0, uint64_t ne1, const float **out, rw_error *err) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name);
    if (t->type != RW_TYPE_F32 || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s must be F32 {%llu, %llu}, has %s {%llu, %llu}", name,
                         (unsigned long long)ne0, (unsigned long long)ne1, rw_dtype_name(t->type),
                         (unsigned long long)t->ne[0], (unsigned long long)t->ne[1]);
    *out = t->data;
    return RW_OK;
}

/* A 3-D expert tensor {n_in, n_out, n_expert} of a matmul type. */
static rw_status bind_moe(rw_model *m, int il, q35_moe *M, rw_error *err) {
    const q35 *x = m->ext;
    *M = (q35_moe){.n_expert = x->n_expert, .n_used = x->n_expert_used, .ff_exp = x->ff_exp, .ff_shexp = x->ff_shexp};
    return rw_models__bind_moe(m, il, true, M, err);
}

static rw_status moe_ffn(rw_model *m, int il, const rw_models__batch *bt, rw_error *err) {
    return rw_models__moe_ffn(m, &((const q35 *)m->ext)->moe[il], bt, err);
}

static rw_status q35_bind(rw_model *m, rw_error *err) {
    rw_model_hparams *hp = &m->hp;
    q35 *x = calloc(1, sizeof *x);
    if (!x) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->ext = x;
    uint32_t kc, dk, nk, nv, inner, interval;
    rw_status st;
    if ((st = get_u32_key(m->g, m->arch->name, "ssm.conv_kernel", true, 0, &kc, err)) ||
        (st = get_u32_key(m->g, m->arch->name, "ssm.state_size", true, 0, &dk, err)) ||
        (st = get_u32_key(m->g, m->arch->name, "ssm.group_count", true, 0, &nk, err)) ||
        (st = get_u32_key(m->g, m->arch->name, "ssm.time_step_rank", true, 0, &nv, err)) ||
        (st = get_u32_key(m->g, m->arch->name, "ssm.inner_size", true, 0, &inner, err)) ||
        (st = get_u32_key(m->g, m->arch->name, "full_attention_interval", false, 4, &interval, err)))
        return st;
    if (kc < 1 || kc > 64 || dk == 0 || dk > 1024 || nk == 0 || nv == 0 || nv % nk || nv > 4096 || interval == 0 ||
        inner != nv * dk)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid qwen35 ssm metadata (conv_kernel %u, state_size %u, group_count %u, "
                         "time_step_rank %u, inner_size %u, full_attention_interval %u)", kc, dk, nk, nv, inner, interval);
    x->kc = (int)kc, x->dk = (int)dk, x->dv = (int)dk, x->nk = (int)nk, x->nv = (int)nv, x->interval = (int)interval;
    x->KD = (int64_t)nk * dk, x->VD = (int64_t)nv * dk, x->CD = 2 * x->KD + x->VD;
    x->grouped = !strcmp(m->arch->name, "qwen3next");
    if (m->arch->moe) {
        uint32_t ne, nu, fe, fs;
        if ((st = get_u32_key(m->g, m->arch->name, "expert_count", true, 0, &ne, err)) ||
            (st = get_u32_key(m->g, m->arch->name, "expert_used_count", true, 0, &nu, err)) ||
            (st = get_u32_key(m->g, m->arch->name, "expert_feed_forward_length", true, 0, &fe, err)) ||
            (st = get_u32_key(m->g, m->arch->name, "expert_shared_feed_forward_length", true, 0, &fs, err)))
            return st;
        if (ne == 0 || ne > 4096 || nu == 0 || nu > ne || fe == 0 || fe > (1u << 20) || fs == 0 || fs > (1u << 20))
            return rw_errorf(err, RW_ERR_FORMAT, "invalid MoE metadata (experts %u, used %u, widths %u / %u)", ne, nu, fe, fs);
        x->n_expert = (int)ne, x->n_expert_used = (int)nu, x->ff_exp = (int)fe, x->ff_shexp = (int)fs;
        hp->n_ff = (int)(fe > fs ? fe : fs); /* sizes the FFN scratch */
        x->moe = calloc((size_t)hp->n_layer, sizeof *x->moe);
        if (!x->moe) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    if ((st = rw_models__bind_common(m, err))) return st;
    const int L = hp->n_layer;
    /* the MTP block, bound as layer L when the file has it (qwen3next's
     * converter drops it; llama.cpp runs only the first of several) */
    uint32_t nextn = 0;
    if (x->grouped) nextn = 0;
    else if ((st = get_u32_key(m->g, m->arch->name, "nextn_predict_layers", false, 0, &nextn, err))) return st;
    if (nextn) {
        char eh[64];
        snprintf(eh, sizeof eh, "blk.%d.nextn.eh_proj.weight", L);
        m->mtp_avail = rw_gguf_find_tensor(m->g, eh) != NULL; /* a file may declare it and leave it out */
    }
    const int NB = L + (m->mtp_avail ? 1 : 0);
    if (x->moe && m->mtp_avail) {
        q35_moe *mo = realloc(x->moe, (size_t)NB * sizeof *mo);
        if (!mo) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        x->moe = mo;
        memset(&x->moe[L], 0, sizeof *mo);
    }
    m->layers = calloc((size_t)NB, sizeof *m->layers);
    x->rec_of = malloc((size_t)NB * sizeof *x->rec_of);
    x->rec = calloc((size_t)NB, sizeof *x->rec);
    if (!m->layers || !x->rec_of || !x->rec) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    const int64_t E = hp->n_embd, D = hp->head_dim_k, H = hp->n_head, Hkv = hp->n_head_kv;
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    for (int il = 0; il < NB && !st; il++) {
        rw_models__dense_layer *Ld = &m->layers[il];
        x->rec_of[il] = il < L && (il + 1) % x->interval != 0 ? x->n_rec++ : -1; /* the MTP block: attention */
        if ((st = rw_models__bind_vector(m, NAME("attn_norm.weight"), E, true, &Ld->attn_norm, err)) ||
            (st = rw_models__bind_vector(m, NAME("post_attention_norm.weight"), E, true, &Ld->ffn_norm, err)))
            break;
        if (m->arch->moe) st = bind_moe(m, il, &x->moe[il], err);
        else if ((st = rw_models__bind_matrix(m, NAME("ffn_gate.weight"), E, hp->n_ff, true, &Ld->ffn_gate, err)) ||
                 (st = rw_models__bind_matrix(m, NAME("ffn_up.weight"), E, hp->n_ff, true, &Ld->ffn_up, err)) ||
                 (st = rw_models__bind_matrix(m, NAME("ffn_down.weight"), hp->n_ff, E, true, &Ld->ffn_down, err)))
            break;
        if (st) break;
        if (is_recurrent(x, il)) {
            q35_rec *R = &x->rec[il];
            /* qwen3next files converted before 2026 carry one ssm_in instead
             * of attn_qkv + attn_gate (llama.cpp picks per layer); qwen3next
             * fuses beta and alpha into ssm_ba */
            const bool legacy = x->grouped && !rw_gguf_find_tensor(m->g, NAME("attn_qkv.weight"));
            if (legacy) st = rw_models__bind_matrix(m, NAME("ssm_in.weight"), E, 2 * x->KD + 2 * x->VD, true, &R->in, err);
            else if (!(st = rw_models__bind_matrix(m, NAME("attn_qkv.weight"), E, x->CD, true, &R->qkv, err)))
                st = rw_models__bind_matrix(m, NAME("attn_gate.weight"), E, x->VD, true, &R->gate, err);
            if (st) break;
            if (x->grouped) st = rw_models__bind_matrix(m, NAME("ssm_ba.weight"), E, 2 * x->nv, true, &R->ba, err);
            else if (!(st = rw_models__bind_matrix(m, NAME("ssm_beta.weight"), E, x->nv, true, &R->beta, err)))
                st = rw_models__bind_matrix(m, NAME("ssm_alpha.weight"), E, x->nv, true, &R->alpha, err);
            if (st) break;
            if ((st = rw_models__bind_matrix(m, NAME("ssm_out.weight"), x->VD, E, true, &R->out, err)) ||
                (st = bind_f32(m, NAME("ssm_conv1d.weight"), (uint64_t)x->kc, (uint64_t)x->CD, &R->conv, err)) ||
                (st = bind_f32(m, NAME("ssm_dt.bias"), (uint64_t)x->nv, 1, &R->dt_bias, err)) ||
                (st = bind_f32(m, NAME("ssm_a"), (uint64_t)x->nv, 1, &R->a, err)) ||
                (st = bind_f32(m, NAME("ssm_norm.weight"), (uint64_t)x->dv, 1, &R->norm, err)))
                break;
            R->params = (rw_rec_params){.conv_channels = (int)x->CD, .conv_kernel = x->kc, .conv_w = R->conv,
                                        .eps = hp->rms_eps, .nk = x->nk, .nv = x->nv, .dk = x->dk, .dv = x->dv,
                                        .tiled = !x->grouped};
        } else {
            if ((st = rw_models__bind_matrix(m, NAME("attn_q.weight"), E, 2 * H * D, true, &Ld->wq, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_k.weight"), E, Hkv * D, true, &Ld->wk, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_v.weight"), E, Hkv * hp->head_dim_v, true, &Ld->wv, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_output.weight"), H * hp->head_dim_v, E, true, &Ld->wo, err)) ||
                (st = rw_models__bind_vector(m, NAME("attn_q_norm.weight"), D, true, &Ld->q_norm, err)) ||
                (st = rw_models__bind_vector(m, NAME("attn_k_norm.weight"), D, true, &Ld->k_norm, err)))
                break;
        }
    }
    if (!st && m->mtp_avail) {
        const int il = L;
        const float *shn = NULL;
        if ((st = rw_models__bind_matrix(m, NAME("nextn.eh_proj.weight"), 2 * E, E, true, &x->eh_proj, err)) ||
            (st = rw_models__bind_vector(m, NAME("nextn.enorm.weight"), E, true, &x->enorm, err)) ||
            (st = rw_models__bind_vector(m, NAME("nextn.hnorm.weight"), E, true, &x->hnorm, err)) ||
            (st = rw_models__bind_vector(m, NAME("nextn.shared_head_norm.weight"), E, false, &shn, err)) ||
            (st = rw_models__bind_matrix(m, NAME("nextn.shared_head_head.weight"), E, hp->n_vocab, false, &x->mtp_head, err)))
            return st;
        x->head_norm = shn ? shn : m->output_norm;
        const rw_gguf_tensor *te = rw_gguf_find_tensor(m->g, NAME("nextn.embed_tokens.weight"));
        if (te && (te->ne[0] != (uint64_t)E || te->ne[1] != (uint64_t)hp->n_vocab || te->ne[2] != 1))
            return rw_errorf(err, RW_ERR_FORMAT, "tensor %s must be {%lld, %lld}", n, (long long)E, (long long)hp->n_vocab);
        x->mtp_embd = te ? te : m->tok_embd;
    }
#undef NAME
    if (st) return st;
    /* the most any sublayer carves from sc.work per token (carve) */
    bool legacy = false, fused = false;
    for (int il = 0; il < L; il++)
        if (is_recurrent(x, il)) legacy |= x->rec[il].in.data != NULL, fused |= x->rec[il].ba.data != NULL;
    const int64_t attn = rw_models__attn_work_floats(hp) + 2 * H * D, delta = deltanet_floats(x, legacy, fused);
    m->arch_work_floats = attn > delta ? attn : delta;
    if (m->mtp_avail && 2 * (int64_t)E > m->arch_work_floats) m->arch_work_floats = 2 * (int64_t)E;
    if (x->moe && rw_models__moe_work_floats(&x->moe[0], E) > m->arch_work_floats)
        m->arch_work_floats = rw_models__moe_work_floats(&x->moe[0], E);
    return RW_OK;
}

/* ---- scratch ---- */

/* Points the mixer buffers into m->sc.work, which rw_models__scratch_reserve
 * sized for n rows and at least m->arch_work_floats per token (set at bind
 * from the same layout). The DeltaNet and attention sets overlap each other
 * and the FFN's gate/up: each is dead once its sublayer has written
 * sc.tmp. */
static rw_status carve(rw_model *m, int64_t n, rw_error *err) {
    q35 *x = m->ext;
    const rw_models__scratch *sc = &m->sc;
    rw_status st = rw_models__work_ready(m, n, "hybrid layer", err);
    if (st) return st;
    const int64_t N = sc->n_cap;
    x->in = sc->work;
    x->z = x->in + N * (x->CD + 2 * (int64_t)x->nv);
    x->o = x->z + N * x->VD;
    x->tmp = x->o + N * x->VD;
    x->qg = sc->work + N * rw_models__attn_work_floats(&m->hp);
    x->cat = sc->work;
    return RW_OK;
}

/* ---- the DeltaNet mixer ---- */

/* All tokens of the call go through each step before the next (the conv and
 * the recurrence still advance token by token inside the kernels, so a
 * token's result does not depend on how the prompt was split into calls).
 * The kernels follow ggml's formulas and vector order (kernels/ops.h). */
/* The DeltaNet input projections of n tokens into u = [q | k | v] (conv
 * input), z, b (beta before the sigmoid) and a (alpha), from whichever
 * tensors the layer has. qwen3next's ssm_ba rows are grouped per key head g
 * as [b of value heads g*r..g*r+r-1 | a of the same]; its legacy ssm_in rows
 * per key head as [q_g | k_g | v of those r heads | z of those r heads]. */
static rw_status project(rw_model *m, const q35_rec *R, int64_t n, rw_threadpool *pool, rw_error *err) {
    q35 *x = m->ext;
    const int nk = x->nk, nv = x->nv, dk = x->dk, dv = x->dv, r = nv / nk;
    const int64_t KD = x->KD, VD = x->VD, CD = x->CD, LOG = CD + 2 * (int64_t)nv;
    float *u = x->in, *a = x->in + CD, *b = x->in + CD + nv; /* rows of LOG floats */
    rw_status st;
    if (R->in.data) {
        const int64_t W = 2 * KD + 2 * VD, per = 2 * (int64_t)dk + 2 * (int64_t)r * dv;
        if ((st = rw_models__matmul(&R->in, m->sc.xn, n, x->tmp, pool, err))) return st;
        for (int64_t t = 0; t < n; t++)
            for (int g = 0; g < nk; g++) {
                const float *src = x->tmp + t * W + g * per;
                memcpy(u + t * LOG + (int64_t)g * dk, src, (size_t)dk * sizeof(float));
                memcpy(u + t * LOG + KD + (int64_t)g * dk, src + dk, (size_t)dk * sizeof(float));
                memcpy(u + t * LOG + 2 * KD + (int64_t)g * r * dv, src + 2 * dk, (size_t)r * dv * sizeof(float));
                memcpy(x->z + t * VD + (int64_t)g * r * dv, src + 2 * dk + (int64_t)r * dv, (size_t)r * dv * sizeof(float));
            }
    } else { /* one conversion and dispatch for both (and beta, alpha below) */
        const rw_matrix *ws[4] = {&R->qkv, &R->gate, &R->beta, &R->alpha};
        float *ys[4] = {u, x->z, b, a};
        const int64_t yst[4] = {LOG, R->gate.n_out, LOG, LOG};
        const int nw = R->ba.data ? 2 : 4;
        if ((st = rw_matmul_multi(ws, ys, yst, nw, m->sc.xn, R->qkv.n_in, n, pool, err))) return st;
        if (nw == 4) return RW_OK;
    }
    if (R->ba.data) {
        if ((st = rw_models__matmul(&R->ba, m->sc.xn, n, x->tmp, pool, err))) return st;
        for (int64_t t = 0; t < n; t++)
            for (int g = 0; g < nk; g++)
                for (int j = 0; j < r; j++) {
                    b[t * LOG + g * r + j] = x->tmp[t * 2 * nv + 2 * r * g + j];
                    a[t * LOG + g * r + j] = x->tmp[t * 2 * nv + 2 * r * g + r + j];
                }
        return RW_OK;
    }
    if ((st = rw_matmul(&R->beta, m->sc.xn, R->beta.n_in, n, b, LOG, pool, err))) return st;
    return rw_matmul(&R->alpha, m->sc.xn, R->alpha.n_in, n, a, LOG, pool, err);
}

/* The per-token steps of the mixers, spread over the pool by tokens
 * (rw_threadpool_rows): each token's values are its own. */
typedef struct {
    rw_model *m;
    const q35_rec *R;
    const rw_models__dense_layer *L;
} q35_rows_job;

/* In place in the recurrence inputs (one row per token, as the state logs
 * them): g = ssm_a * softplus(alpha + dt_bias), the log-decay; beta = sigmoid(b) */
static void gates_rows(void *ctx, int64_t t0, int64_t t1) {
    const q35_rows_job *j = ctx;
    const q35 *x = j->m->ext;
    const int nv = x->nv;
    const int64_t LOG = x->CD + 2 * (int64_t)nv;
    for (int64_t t = t0; t < t1; t++) {
        float *a = x->in + t * LOG + x->CD, *b = a + nv;
        for (int h = 0; h < nv; h++) a[h] = rw_softplus1(a[h] + j->R->dt_bias[h]) * j->R->a[h];
        rw_sigmoid(b, b, nv);
    }
}

/* o_h <- rmsnorm(o_h) * ssm_norm * silu(z_h) */
static void out_norm_rows(void *ctx, int64_t t0, int64_t t1) {
    const q35_rows_job *j = ctx;
    const q35 *x = j->m->ext;
    for (int64_t t = t0; t < t1; t++)
        rw_rmsnorm_gated(x->o + t * x->VD, j->R->norm, x->z + t * x->VD, x->nv, x->dv, j->m->hp.rms_eps,
                         x->o + t * x->VD);
}

static rw_status deltanet(rw_model *m, int il, const rw_models__batch *bt, rw_error *err) {
    q35 *x = m->ext;
    const q35_rec *R = &x->rec[il];
    const int64_t n = bt->n, VD = x->VD, LOG = x->CD + 2 * (int64_t)x->nv;
    rw_status st;
    if ((st = project(m, R, n, bt->pool, err))) return st;
    q35_rows_job j = {m, R, NULL};
    rw_threadpool_rows(bt->pool, n, 16, gates_rows, &j);
    /* conv, l2norm and the delta rule run in each sequence's state
     * (cache/deltanet_state.c), token by token */
    if ((st = rw_models__rec_append(bt, il, x->in, LOG, x->o, VD, err))) return st;
    rw_threadpool_rows(bt->pool, n, 8, out_norm_rows, &j);
    return rw_models__matmul(&R->out, x->o, n, m->sc.tmp, bt->pool, err);
}

/* ---- the gated attention mixer ---- */

/* Per token: q out of [q | gate], q and k normed and rotated. */
static void qk_rows(void *ctx, int64_t t0, int64_t t1) {
    const q35_rows_job *j = ctx;
    const q35 *x = j->m->ext;
    const rw_model_hparams *hp = &j->m->hp;
    const rw_models__scratch *sc = &j->m->sc;
    const int64_t H = hp->n_head, D = hp->head_dim_k, dk = hp->n_head_kv * D;
    for (int64_t t = t0; t < t1; t++) {
        const float *cs = sc->rope_cs + t * hp->n_rot;
        float *qt = sc->q + t * H * D, *kt = sc->k + t * dk;
        for (int64_t h = 0; h < H; h++) /* per head [q | gate]: q to sc->q */
            memcpy(qt + h * D, x->qg + (t * H + h) * 2 * D, (size_t)D * sizeof *qt);
        rw_rmsnorm_groups(qt, j->L->q_norm, 0, (int)H, (int)D, hp->rms_eps, qt);
        rw_rmsnorm_groups(kt, j->L->k_norm, 0, hp->n_head_kv, (int)D, hp->rms_eps, kt);
        for (int64_t h = 0; h < H; h++) rw_rope(qt + h * D, hp->n_rot, true, cs);
        for (int h = 0; h < hp->n_head_kv; h++) rw_rope(kt + (int64_t)h * D, hp->n_rot, true, cs);
    }
}

/* Per token: o *= sigmoid(gate), the sigmoid rounded first as ggml. */
static void out_gate_rows(void *ctx, int64_t t0, int64_t t1) {
    const q35_rows_job *j = ctx;
    const q35 *x = j->m->ext;
    const int64_t H = j->m->hp.n_head, D = j->m->hp.head_dim_k, Dv = j->m->hp.head_dim_v;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t h = 0; h < H; h++) {
            float *gate = x->qg + (t * H + h) * 2 * D + D, *o = j->m->sc.att + (t * H + h) * Dv;
            rw_sigmoid(gate, gate, Dv);
            for (int64_t c = 0; c < Dv; c++) o[c] *= gate[c];
        }
}

static rw_status gated_attention(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    q35 *x = m->ext;
    const rw_model_hparams *hp = &m->hp;
    const rw_models__dense_layer *L = &m->layers[il];
    rw_models__scratch *sc = &m->sc;
    const int64_t n = b->n, H = hp->n_head, D = hp->head_dim_k, Dv = hp->head_dim_v;
    const int64_t dk = hp->n_head_kv * D, dv = hp->n_head_kv * Dv;
    rw_status st;
    if ((st = rw_models__matmul(&L->wq, sc->xn, n, x->qg, b->pool, err)) ||
        (st = rw_models__matmul(&L->wk, sc->xn, n, sc->k, b->pool, err)) ||
        (st = rw_models__matmul(&L->wv, sc->xn, n, sc->v, b->pool, err)))
        return st;
    q35_rows_job j = {m, NULL, L};
    rw_threadpool_rows(b->pool, n, 8, qk_rows, &j);
    if ((st = rw_models__attend(m, il, b, sc->q, H * D, sc->k, dk, sc->v, dv, 1.0f / sqrtf((float)D), sc->att, err)))
        return st;
    rw_threadpool_rows(b->pool, n, 8, out_gate_rows, &j);
    return rw_models__matmul(&L->wo, sc->att, n, sc->tmp, b->pool, err);
}

/* ---- the block ---- */

static rw_status q35_layer_state(const rw_model *m, int il, rw_kv_type kv_type, int64_t max_ctx,
                                 rw_layer_state **out, rw_error *err) {
    const q35 *x = m->ext;
    if (is_recurrent(x, il)) return rw_deltanet_state_new(&x->rec[il].params, out, err);
    return rw_kv_state_new(kv_type, m->hp.n_head_kv, m->hp.head_dim_k, m->hp.head_dim_v, max_ctx, out, err);
}

static rw_status q35_layer(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const rw_models__dense_layer *L = &m->layers[il];
    rw_status st = carve(m, b->n, err);
    if (st) return st;
    rw_models__norm_rows(m, L->attn_norm, b);
    st = is_recurrent(m->ext, il) ? deltanet(m, il, b, err) : gated_attention(m, il, b, err);
    if (st) return st;
    rw_models__add_residual(m, b);
    rw_models__norm_rows(m, L->ffn_norm, b); /* post_attention_norm */
    st = ((q35 *)m->ext)->moe ? moe_ffn(m, il, b, err) : rw_models__ffn_swiglu(m, L, b, err);
    if (st) return st;
    rw_models__add_residual(m, b);
    return RW_OK;
}

/* ---- the MTP block (model.h; specs/qwen35.md §4.9) ----
 *
 *   c  = eh_proj [rmsnorm(embd(x_k)) * enorm | rmsnorm(h_{k-1}) * hnorm]
 *   c' = the decoder block of layer n_layer on c (gated attention over the
 *        block's own KV, FFN), as a trunk attention layer
 *   h_out = rmsnorm(c') * head_norm; logits = head h_out (mtp.c)
 */
static rw_status q35_mtp_block(rw_model *m, const int32_t *tokens, const float *h, const rw_models__batch *b, float *h_out,
                               const rw_matrix **head, rw_error *err) {
    q35 *x = m->ext;
    const int E = m->hp.n_embd;
    const float eps = m->hp.rms_eps;
    rw_status st = carve(m, b->n, err);
    if (st) return st;
    uint64_t row_bytes;
    rw_dtype_row_bytes(x->mtp_embd->type, (uint64_t)E, &row_bytes);
    for (int64_t r = 0; r < b->n; r++) {
        float *c = x->cat + r * 2 * E, *e = m->sc.tmp + r * E;
        const void *row = (const char *)x->mtp_embd->data + (size_t)tokens[r] * row_bytes;
        if ((st = rw_dequantize_row(x->mtp_embd->type, row, e, E)))
            return rw_errorf(err, st, "MTP embedding: cannot convert type %s", rw_dtype_name(x->mtp_embd->type));
        rw_rmsnorm(e, x->enorm, E, eps, c);
        rw_rmsnorm(h + r * E, x->hnorm, E, eps, c + E);
    }
    if ((st = rw_models__matmul(&x->eh_proj, x->cat, b->n, m->sc.x, b->pool, err))) return st;
    if ((st = q35_layer(m, m->hp.n_layer, b, err))) return st;
    rw_rmsnorm_groups(m->sc.x, x->head_norm, 0, (int)b->n, E, eps, h_out);
    *head = x->mtp_head.data ? &x->mtp_head : &m->output;
    return RW_OK;
}

/* The three descriptors share the block and its loader; each adds its name
 * and what sets it apart. */
#define Q35_ARCH_COMMON                                                                                           \
    .rope_kind = RW_ROPE_NEOX, .qk_norm = true, .qkv_bias = false, .read_hparams = q35_hparams, .bind = q35_bind, \
    .layer = q35_layer, .new_layer_state = q35_layer_state, .free_ext = q35_free

const rw_models__arch rw_models__arch_qwen35 = {Q35_ARCH_COMMON, .name = "qwen35", .mtp_block = q35_mtp_block};

/* Qwen3.5-MoE: the same hybrid mixer, every FFN a mixture of experts with a
 * sigmoid-gated shared expert. */
const rw_models__arch rw_models__arch_qwen35moe = {Q35_ARCH_COMMON, .name = "qwen35moe", .moe = true,
                                            .mtp_block = q35_mtp_block};

/* Qwen3-Next: the qwen35 mixer with value heads in HF's grouped order (head h
 * uses key head h / (nv/nk)), beta and alpha from one fused ssm_ba, plain
 * NEOX RoPE, and a mixture of experts on every layer. */
const rw_models__arch rw_models__arch_qwen3next = {Q35_ARCH_COMMON, .name = "qwen3next", .moe = true};
