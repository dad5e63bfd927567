/* test_models_reference.c - the forward pass against an independent
 * double-precision implementation written here, on tiny random models built
 * in memory: qwen2 (q/k/v biases, NEOX RoPE, untied output) and llama (RoPE
 * on adjacent pairs with rope_freqs factors, tied output). Covers what the
 * llama.cpp fixtures do not: qwen2 has no fixture. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/model.h"

enum { E = 64, H = 4, HKV = 2, HD = 16, FF = 96, L = 2, V = 50, T = 20 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

typedef struct {
    char name[48];
    int n_dims;
    uint64_t ne[2];
    float *data;
} tensor;

typedef struct {
    bool qwen2;
    tensor t[64];
    int n;
} model_def;

static float *add(model_def *m, const char *name, uint64_t ne0, uint64_t ne1, float amp, float base) {
    tensor *t = &m->t[m->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    t->data = malloc(ne0 * t->ne[1] * sizeof(float));
    for (uint64_t i = 0; i < ne0 * t->ne[1]; i++) t->data[i] = base + amp * frand();
    return t->data;
}

static const float *get(const model_def *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return m->t[i].data;
    return NULL;
}

static void build(model_def *m) {
    char n[64];
    add(m, "token_embd.weight", E, V, 1.0f, 0.0f);
    add(m, "output_norm.weight", E, 0, 0.2f, 1.0f);
    if (m->qwen2) add(m, "output.weight", E, V, 0.3f, 0.0f);
    else {
        float *f = add(m, "rope_freqs.weight", HD / 2, 0, 0.0f, 1.0f);
        for (int i = 0; i < HD / 2; i++) f[i] = 1.0f + (float)i; /* divides frequency i */
    }
    for (int il = 0; il < L; il++) {
#define A(s, a, b, amp, base) (snprintf(n, sizeof n, "blk.%d." s, il), add(m, n, a, b, amp, base))
        A("attn_norm.weight", E, 0, 0.2f, 1.0f);
        A("attn_q.weight", E, H * HD, 0.25f, 0.0f);
        A("attn_k.weight", E, HKV * HD, 0.25f, 0.0f);
        A("attn_v.weight", E, HKV * HD, 0.25f, 0.0f);
        if (m->qwen2) {
            A("attn_q.bias", H * HD, 0, 0.5f, 0.0f);
            A("attn_k.bias", HKV * HD, 0, 0.5f, 0.0f);
            A("attn_v.bias", HKV * HD, 0, 0.5f, 0.0f);
        }
        A("attn_output.weight", H * HD, E, 0.2f, 0.0f);
        A("ffn_norm.weight", E, 0, 0.2f, 1.0f);
        A("ffn_gate.weight", E, FF, 0.25f, 0.0f);
        A("ffn_up.weight", E, FF, 0.25f, 0.0f);
        A("ffn_down.weight", FF, E, 0.2f, 0.0f);
#undef A
    }
}

static void *write_gguf(const model_def *m, size_t *size) {
    rw_error err = {0};
    const char *a = m->qwen2 ? "qwen2" : "llama";
    char k[96];
    rw_gguf_writer *w = rw_gguf_writer_new();
    rw_gguf_writer_add_str(w, "general.architecture", a, &err);
#define U(key, v) (snprintf(k, sizeof k, "%s." key, a), rw_gguf_writer_add_u32(w, k, v, &err))
    U("context_length", 256);
    U("embedding_length", E);
    U("block_count", L);
    U("feed_forward_length", FF);
    U("attention.head_count", H);
    U("attention.head_count_kv", HKV);
#undef U
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", a);
    rw_gguf_writer_add_f32(w, k, 1e-5f, &err);
    snprintf(k, sizeof k, "%s.rope.freq_base", a);
    rw_gguf_writer_add_f32(w, k, 10000.0f, &err);
    for (int i = 0; i < m->n; i++)
        rw_gguf_writer_add_tensor(w, m->t[i].name, RW_TYPE_F32, (uint32_t)m->t[i].n_dims, m->t[i].ne, m->t[i].data,
                                  NULL, NULL, &err);
    char *buf = NULL;
    FILE *f = open_memstream(&buf, size);
    rw_status st = rw_gguf_writer_write_stream(w, f, &err);
    fclose(f);
    rw_gguf_writer_free(w);
    CHECK_MSG(st == RW_OK, "%s", err.msg);
    return buf;
}

/* ---- the reference, in double ---- */

static void rmsnorm(const double *x, const float *w, double *y) {
    double s = 0;
    for (int i = 0; i < E; i++) s += x[i] * x[i];
    double r = 1.0 / sqrt(s / E + 1e-5);
    for (int i = 0; i < E; i++) y[i] = x[i] * r * w[i];
}

/* y[o] = sum_i W[o][i] x[i] (+ b[o]); W is ggml {n_in, n_out}: row o at o*n_in */
static void linear(const float *W, const float *b, const double *x, int n_in, int n_out, double *y) {
    for (int o = 0; o < n_out; o++) {
        double s = b ? b[o] : 0.0;
        for (int i = 0; i < n_in; i++) s += (double)W[o * n_in + i] * x[i];
        y[o] = s;
    }
}

static void rope(double *x, int pos, bool neox, const float *freqs) {
    for (int i = 0; i < HD / 2; i++) {
        double theta = pos * pow(10000.0, -2.0 * i / HD);
        if (freqs) theta /= freqs[i];
        int a = neox ? i : 2 * i, b = neox ? i + HD / 2 : 2 * i + 1;
        double x0 = x[a], x1 = x[b];
        x[a] = x0 * cos(theta) - x1 * sin(theta);
        x[b] = x0 * sin(theta) + x1 * cos(theta);
    }
}

static void reference(const model_def *m, const int32_t *ids, double *logits) {
    static double x[T][E], xn[E], q[T][H * HD], k[T][HKV * HD], v[T][HKV * HD], att[H * HD], tmp[E], g[FF], u[FF];
    const float *emb = get(m, "token_embd.weight");
    for (int t = 0; t < T; t++)
        for (int i = 0; i < E; i++) x[t][i] = emb[ids[t] * E + i];
    char n[64];
#define W(s) (snprintf(n, sizeof n, "blk.%d." s, il), get(m, n))
    for (int il = 0; il < L; il++) {
        for (int t = 0; t < T; t++) {
            rmsnorm(x[t], W("attn_norm.weight"), xn);
            linear(W("attn_q.weight"), W("attn_q.bias"), xn, E, H * HD, q[t]);
            linear(W("attn_k.weight"), W("attn_k.bias"), xn, E, HKV * HD, k[t]);
            linear(W("attn_v.weight"), W("attn_v.bias"), xn, E, HKV * HD, v[t]);
            for (int h = 0; h < H; h++) rope(q[t] + h * HD, t, m->qwen2, get(m, "rope_freqs.weight"));
            for (int h = 0; h < HKV; h++) rope(k[t] + h * HD, t, m->qwen2, get(m, "rope_freqs.weight"));
        }
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < H; h++) {
                const int kh = h / (H / HKV);
                double s[T], mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    s[j] = 0;
                    for (int i = 0; i < HD; i++) s[j] += q[t][h * HD + i] * k[j][kh * HD + i];
                    s[j] /= sqrt((double)HD);
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= t; j++) sum += (s[j] = exp(s[j] - mx));
                for (int i = 0; i < HD; i++) {
                    double o = 0;
                    for (int j = 0; j <= t; j++) o += s[j] / sum * v[j][kh * HD + i];
                    att[h * HD + i] = o;
                }
            }
            linear(W("attn_output.weight"), NULL, att, H * HD, E, tmp);
            for (int i = 0; i < E; i++) x[t][i] += tmp[i];
            rmsnorm(x[t], W("ffn_norm.weight"), xn);
            linear(W("ffn_gate.weight"), NULL, xn, E, FF, g);
            linear(W("ffn_up.weight"), NULL, xn, E, FF, u);
            for (int i = 0; i < FF; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            linear(W("ffn_down.weight"), NULL, g, FF, E, tmp);
            for (int i = 0; i < E; i++) x[t][i] += tmp[i];
        }
    }
#undef W
    const float *out = m->qwen2 ? get(m, "output.weight") : emb;
    for (int t = 0; t < T; t++) {
        rmsnorm(x[t], get(m, "output_norm.weight"), xn);
        linear(out, NULL, xn, E, V, logits + t * V);
    }
}

static void check_arch(bool qwen2) {
    model_def m = {.qwen2 = qwen2};
    build(&m);
    size_t size = 0;
    void *buf = write_gguf(&m, &size);
    int32_t ids[T];
    for (int t = 0; t < T; t++) ids[t] = (int32_t)((t * 17 + 3) % V);
    static double want[T * V];
    reference(&m, ids, want);
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *model = NULL;
    rw_model_seq *s = NULL;
    rw_status st = rw_gguf_open_memory(buf, size, &g, &err);
    if (!st) st = rw_model_load(g, &model, &err);
    if (!st) st = rw_model_seq_new(model, RW_KV_F32, 0, &s, &err);
    CHECK_MSG(st == RW_OK, "%s: %s", qwen2 ? "qwen2" : "llama", err.msg);
    if (!st) {
        const rw_model_hparams *hp = rw_model_get_hparams(model);
        CHECK_EQ_INT(hp->tied_output, !qwen2);
        CHECK_EQ_INT(hp->has_rope_freqs, !qwen2);
        CHECK_EQ_INT(hp->rope_kind, qwen2 ? RW_ROPE_NEOX : RW_ROPE_NORM);
        static float got[T * V];
        /* 7 tokens in one call, then the rest one by one */
        rw_forward_args a = {.tokens = ids, .n = 7, .logits = got, .all_logits = true};
        st = rw_model_forward(model, s, &a, &err);
        for (int t = 7; t < T && !st; t++) {
            a = (rw_forward_args){.tokens = ids + t, .n = 1, .logits = got + t * V};
            st = rw_model_forward(model, s, &a, &err);
        }
        CHECK_MSG(st == RW_OK, "%s", err.msg);
        double mx = 0, ref_max = 0;
        for (int i = 0; i < T * V; i++) {
            mx = fmax(mx, fabs(got[i] - want[i]));
            ref_max = fmax(ref_max, fabs(want[i]));
        }
        printf("%s: max |logit| %.3g, max error vs double reference %.3g\n", qwen2 ? "qwen2" : "llama", ref_max, mx);
        CHECK_MSG(mx < 1e-3 && ref_max > 0.5, "%s: max error %g", qwen2 ? "qwen2" : "llama", mx);
    }
    rw_model_seq_free(s);
    rw_model_free(model);
    rw_gguf_close(g);
    free(buf);
    for (int i = 0; i < m.n; i++) free(m.t[i].data);
}

int main(void) {
    check_arch(true);
    check_arch(false);
    return rw_test_done();
}
