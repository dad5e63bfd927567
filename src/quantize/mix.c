/* mix.c - which type each tensor gets: llama-quantize's rules for the file
 * types rewind writes (quantize.h). The _M mixes spend more bits where
 * quantization hurts most (the attention-V kind and the FFN down
 * projections of the first and last eighth of the layers and of every third
 * layer between, the output head); the rules that only apply to types
 * rewind cannot quantize (IQ1/IQ2/IQ3, imatrix-only types) are left out. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/quant.h"
#include "quantize/quantize_int.h"

static const rw_quantize_ftype FTYPES[] = {
    {"F32", 0, RW_TYPE_F32},          {"F16", 1, RW_TYPE_F16},      {"BF16", 32, RW_TYPE_BF16},
    {"Q4_0", 2, RW_TYPE_Q4_0},        {"Q4_1", 3, RW_TYPE_Q4_1},    {"Q5_0", 8, RW_TYPE_Q5_0},
    {"Q5_1", 9, RW_TYPE_Q5_1},        {"Q8_0", 7, RW_TYPE_Q8_0},    {"Q2_K", 10, RW_TYPE_Q2_K},
    {"Q3_K_S", 11, RW_TYPE_Q3_K},     {"Q3_K_M", 12, RW_TYPE_Q3_K}, {"Q3_K_L", 13, RW_TYPE_Q3_K},
    {"Q4_K_S", 14, RW_TYPE_Q4_K},     {"Q4_K_M", 15, RW_TYPE_Q4_K}, {"Q5_K_S", 16, RW_TYPE_Q5_K},
    {"Q5_K_M", 17, RW_TYPE_Q5_K},     {"Q6_K", 18, RW_TYPE_Q6_K},   {"IQ4_NL", 25, RW_TYPE_IQ4_NL},
    {"IQ4_XS", 30, RW_TYPE_IQ4_XS},   {"TQ1_0", 36, RW_TYPE_TQ1_0}, {"TQ2_0", 37, RW_TYPE_TQ2_0},
    {"MXFP4_MOE", 38, RW_TYPE_MXFP4},
};
enum {
    FT_Q4_0 = 2,
    FT_Q5_0 = 8,
    FT_Q2_K = 10,
    FT_Q3_K_S = 11,
    FT_Q3_K_M = 12,
    FT_Q3_K_L = 13,
    FT_Q4_K_S = 14,
    FT_Q4_K_M = 15,
    FT_Q5_K_M = 17,
    FT_IQ4_NL = 25,
    FT_IQ4_XS = 30,
    FT_TQ1_0 = 36,
    FT_TQ2_0 = 37,
    FT_MXFP4_MOE = 38,
};

const rw_quantize_ftype *rw_quantize_ftype_at(int i) {
    return i >= 0 && i < (int)(sizeof FTYPES / sizeof FTYPES[0]) ? &FTYPES[i] : NULL;
}

const rw_quantize_ftype *rw_quantize_ftype_find(const char *name) {
    for (const rw_quantize_ftype *f = FTYPES; name && f < FTYPES + sizeof FTYPES / sizeof FTYPES[0]; f++)
        if (!strcasecmp(f->name, name)) return f;
    /* llama-quantize's short names of the _M mixes */
    if (name && !strcasecmp(name, "Q3_K")) return rw_quantize_ftype_find("Q3_K_M");
    if (name && !strcasecmp(name, "Q4_K")) return rw_quantize_ftype_find("Q4_K_M");
    if (name && !strcasecmp(name, "Q5_K")) return rw_quantize_ftype_find("Q5_K_M");
    return NULL;
}

/* The kinds of tensor the rules tell apart, by name, first match wins. */
typedef enum { K_OTHER, K_OUTPUT, K_TOKEN_EMBD, K_ATTN_V, K_ATTN_K, K_ATTN_Q, K_ATTN_OUT, K_FFN_DOWN } kind;

static bool has(const char *s, const char *part) { return strstr(s, part) != NULL; }

static kind kind_of(const char *n) {
    if (!strcmp(n, "output.weight")) return K_OUTPUT;
    if (!strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight")) return K_TOKEN_EMBD;
    /* a fused QKV and MLA's KV-B count as V: they hold the values */
    if (has(n, "attn_qkv.weight") || has(n, "attn_kv_b.weight") || has(n, "attn_v.weight")) return K_ATTN_V;
    if (has(n, "attn_k.weight")) return K_ATTN_K;
    if (has(n, "attn_q.weight")) return K_ATTN_Q;
    if (has(n, "attn_output.weight")) return K_ATTN_OUT;
    if (has(n, "ffn_up") || has(n, "ffn_gate")) return K_OTHER; /* no rule for the types written here */
    if (has(n, "ffn_down")) return K_FFN_DOWN;
    return K_OTHER;
}

bool rw_quantize__converts(const rw_gguf_tensor *t) {
    if (t->n_dims < 2) return false;
    const char *n = t->name;
    const size_t len = strlen(n);
    if (len < 6 || strcmp(n + len - 6, "weight")) return false;
    /* small or sensitive tensors llama-quantize keeps as they are */
    static const char *const keep[] = {"_norm.weight",
                                       "ffn_gate_inp.weight",
                                       "ffn_gate_tid2eid.weight",
                                       "altup",
                                       "laurel",
                                       "per_layer_model_proj",
                                       "ssm_conv1d",
                                       "shortconv.conv.weight",
                                       "indexer.k_proj.weight",
                                       "indexer.q_proj.weight",
                                       "time_mix_first.weight",
                                       "time_mix_w0.weight",
                                       "time_mix_w1.weight",
                                       "time_mix_w2.weight",
                                       "time_mix_v0.weight",
                                       "time_mix_v1.weight",
                                       "time_mix_v2.weight",
                                       "time_mix_a0.weight",
                                       "time_mix_a1.weight",
                                       "time_mix_a2.weight",
                                       "time_mix_g1.weight",
                                       "time_mix_g2.weight",
                                       "time_mix_decay_w1.weight",
                                       "time_mix_decay_w2.weight",
                                       "time_mix_lerp_fused.weight",
                                       "attn_rel_b.weight",
                                       ".position_embd",
                                       ".rel_pos",
                                       ".patch_embd",
                                       ".patch_merger"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (has(n, keep[i])) return false;
    return strcmp(n, "position_embd.weight") && strcmp(n, "token_types.weight");
}

/* An integer key of the architecture, or the first element of an array
 * value (per-layer head counts); def if absent. */
static int64_t arch_int(const rw_gguf *g, const char *arch, const char *key, int64_t def) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    const rw_gguf_value *v = rw_gguf_get(g, k);
    int64_t x;
    if (!v) return def;
    if (v->type == RW_GGUF_ARRAY) return v->arr.n && rw_gguf_arr_int(v, 0, &x) ? x : def;
    if (v->type == RW_GGUF_INT8 || v->type == RW_GGUF_INT16 || v->type == RW_GGUF_INT32 || v->type == RW_GGUF_INT64)
        return v->i;
    if (v->type == RW_GGUF_UINT8 || v->type == RW_GGUF_UINT16 || v->type == RW_GGUF_UINT32 || v->type == RW_GGUF_UINT64)
        return (int64_t)v->u;
    return def;
}

/* A pattern as llama-quantize reads it (lowercased; std::regex's
 * ECMAScript), for POSIX extended expressions: \d and \w spelled out. */
static char *posix_pattern(const char *p, size_t n) {
    char *out = malloc(n * 12 + 1), *o = out; /* freed by the caller */
    for (size_t i = 0; out && i < n; i++) {
        const char c = (char)tolower((unsigned char)p[i]);
        if (c == '\\' && i + 1 < n && (p[i + 1] == 'd' || p[i + 1] == 'w')) {
            const char *cls = p[++i] == 'd' ? "[0-9]" : "[a-z0-9_]";
            memcpy(o, cls, strlen(cls));
            o += strlen(cls);
        } else *o++ = c;
    }
    if (out) *o = 0;
    return out;
}

/* Compiles the PATTERN=TYPE items of list into m->overrides. */
static rw_status compile_overrides(rw_quantize_mix *m, const char *list, rw_error *err) {
    for (const char *p = list; p && *p;) {
        while (isspace((unsigned char)*p)) p++;
        const char *end = p;
        while (*end && !isspace((unsigned char)*end)) end++;
        if (end == p) break;
        const char *eq = memchr(p, '=', (size_t)(end - p));
        char type[32];
        rw_dtype t;
        const int tlen = eq ? (int)(end - eq - 1) : 0, ilen = (int)(end - p);
        if (!eq || eq == p || tlen < 1 || tlen >= (int)sizeof type)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "tensor type override \"%.*s\": give PATTERN=TYPE", ilen, p);
        snprintf(type, sizeof type, "%.*s", tlen, eq + 1);
        if (!rw_dtype_from_name(type, &t) || !(t == RW_TYPE_F32 || rw_can_quantize(t)))
            return rw_errorf(err, RW_ERR_INVALID_ARG, "tensor type override \"%.*s\": no type %s to write", ilen, p,
                             type);
        rw_quantize_override *o = realloc(m->overrides, (size_t)(m->n_overrides + 1) * sizeof *o);
        char *re = posix_pattern(p, (size_t)(eq - p));
        if (o) m->overrides = o;
        if (!o || !re) {
            free(re);
            return rw_errorf(err, RW_ERR_NOMEM, "no memory");
        }
        const int rc = regcomp(&m->overrides[m->n_overrides].re, re, REG_EXTENDED | REG_NOSUB);
        free(re);
        if (rc)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "tensor type override \"%.*s\": not a regular expression", ilen,
                             p);
        m->overrides[m->n_overrides++].type = t;
        p = end;
    }
    return RW_OK;
}

void rw_quantize__mix_free(rw_quantize_mix *m) {
    for (int i = 0; i < m->n_overrides; i++) regfree(&m->overrides[i].re);
    free(m->overrides);
    m->overrides = NULL;
    m->n_overrides = 0;
}

rw_status rw_quantize__mix_init(rw_quantize_mix *m, const rw_gguf *g, const rw_quantize_ftype *ft,
                                const rw_quantize_options *o, rw_error *err) {
    char arch[64];
    *m = (rw_quantize_mix){0};
    rw_status s = rw_gguf_get_cstr(g, "general.architecture", arch, sizeof arch, err);
    if (s) return s;
    *m = (rw_quantize_mix){.ft = ft,
                           .pure = o->pure,
                           .output_type = o->output_type,
                           .token_embd_type = o->token_embd_type,
                           .falcon = !strcmp(arch, "falcon"),
                           .tied = true};
    m->n_layer = (int)arch_int(g, arch, "block_count", 0);
    const int64_t ne = arch_int(g, arch, "expert_count", 0);
    m->n_expert = ne > 1 ? (int)ne : 1;
    const int64_t nh = arch_int(g, arch, "attention.head_count", 0),
                  nkv = arch_int(g, arch, "attention.head_count_kv", nh);
    m->n_gqa = nkv > 0 ? (int)(nh / nkv) : 0;
    m->is_70b = !strcmp(arch, "llama") && m->n_layer == 80 && nkv > 0 && nkv != nh;
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const kind k = kind_of(rw_gguf_tensor_at(g, i)->name);
        if (k == K_ATTN_V) m->n_attn_v++;
        if (k == K_OUTPUT) m->tied = false;
    }
    return compile_overrides(m, o->tensor_types, err);
}

/* The first and last eighth of n and every third between. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The layer an FFN-down tensor belongs to: its position among them, or
 * with experts (whose tensors need not come in layer order) the number in
 * its name. */
static int ffn_layer(const rw_quantize_mix *m, const char *name) {
    int il = m->i_ffn_down;
    if (m->n_expert > 1 && sscanf(name, "blk.%d.", &il) != 1) il = m->i_ffn_down;
    return il;
}

static rw_dtype mix_type(rw_quantize_mix *m, const rw_gguf_tensor *t, rw_dtype ty) {
    const uint32_t f = m->ft->ftype;
    const kind k = kind_of(t->name);
    if (k == K_OUTPUT || (m->tied && k == K_TOKEN_EMBD)) {
        if (m->output_type != RW_TYPE_COUNT) return m->output_type;
        if (f == FT_MXFP4_MOE || m->falcon || t->ne[0] % rw_dtype_block_size(ty)) return RW_TYPE_Q8_0;
        return ty == RW_TYPE_Q8_0 ? ty : RW_TYPE_Q6_K;
    }
    if (f == FT_MXFP4_MOE) return t->n_dims >= 3 && t->ne[2] > 1 ? RW_TYPE_MXFP4 : RW_TYPE_Q8_0;
    if (k == K_TOKEN_EMBD) return f == FT_TQ1_0 || f == FT_TQ2_0 ? RW_TYPE_Q4_K : ty;
    const int n = m->n_layer;
    switch (k) {
    case K_ATTN_V: {
        const int i = m->i_attn_v++;
        if (f == FT_Q2_K) ty = m->n_gqa >= 4 ? RW_TYPE_Q4_K : RW_TYPE_Q3_K;
        else if (f == FT_Q3_K_M) ty = i < 2 ? RW_TYPE_Q5_K : RW_TYPE_Q4_K;
        else if (f == FT_Q3_K_L) ty = RW_TYPE_Q5_K;
        else if ((f == FT_IQ4_NL || f == FT_IQ4_XS) && m->n_gqa >= 4) ty = RW_TYPE_Q5_K;
        else if ((f == FT_Q4_K_M || f == FT_Q5_K_M) && more_bits(i, m->n_attn_v)) ty = RW_TYPE_Q6_K;
        else if (f == FT_Q4_K_S && i < 4) ty = RW_TYPE_Q5_K;
        if (m->is_70b && (ty == RW_TYPE_Q3_K || ty == RW_TYPE_Q4_K)) ty = RW_TYPE_Q5_K;
        if (m->n_expert == 8) ty = RW_TYPE_Q8_0;
        return ty;
    }
    case K_ATTN_K: return m->n_expert == 8 ? RW_TYPE_Q8_0 : ty;
    case K_FFN_DOWN: {
        const int il = ffn_layer(m, t->name);
        m->i_ffn_down++;
        if (f == FT_Q2_K) return RW_TYPE_Q3_K;
        if (f == FT_Q3_K_M)
            return il < n / 16 ? RW_TYPE_Q5_K : !m->falcon || more_bits(il, n) ? RW_TYPE_Q4_K : RW_TYPE_Q3_K;
        if (f == FT_Q3_K_L) return m->falcon ? RW_TYPE_Q4_K : RW_TYPE_Q5_K;
        if (f == FT_Q4_K_M) {
            if (m->falcon) return il < n / 16 ? RW_TYPE_Q6_K : more_bits(il, n) ? RW_TYPE_Q5_K : RW_TYPE_Q4_K;
            return more_bits(il, n) ? RW_TYPE_Q6_K : ty;
        }
        if (il < n / 8 && (f == FT_IQ4_NL || f == FT_IQ4_XS) && !m->has_imatrix) return RW_TYPE_Q5_K;
        if (f == FT_Q5_K_M && more_bits(il, n)) return RW_TYPE_Q6_K;
        if (f == FT_Q4_K_S && !m->falcon && il < n / 8) return RW_TYPE_Q5_K;
        /* with a matrix, the first eighth of Q4_0 / Q5_0's down projections
         * take the types with a min (llama-quantize's guard) */
        if ((f == FT_Q4_0 || f == FT_Q5_0) && m->has_imatrix && il < n / 8)
            return f == FT_Q4_0 ? RW_TYPE_Q4_1 : RW_TYPE_Q5_1;
        return ty;
    }
    case K_ATTN_OUT:
        if (m->falcon) return f == FT_Q3_K_L ? RW_TYPE_Q4_K : ty;
        if (m->n_expert == 8)
            return f == FT_Q2_K || f == FT_Q3_K_S || f == FT_Q3_K_M || f == FT_IQ4_NL || f == FT_Q4_K_S ||
                           f == FT_Q4_K_M || f == FT_IQ4_XS
                       ? RW_TYPE_Q5_K
                       : ty;
        if (f == FT_Q2_K) return RW_TYPE_Q3_K;
        if (f == FT_Q3_K_M) return RW_TYPE_Q4_K;
        if (f == FT_Q3_K_L) return RW_TYPE_Q5_K;
        return ty;
    default: return ty;
    }
}

/* A row the type's blocks do not divide: the nearest type whose do, else
 * F16. RW_TYPE_COUNT where llama-quantize has no fallback (it refuses). */
static rw_dtype fallback(const rw_gguf_tensor *t, rw_dtype ty) {
    if (t->ne[0] % rw_dtype_block_size(ty) == 0) return ty;
    rw_dtype r;
    switch (ty) {
    case RW_TYPE_IQ4_XS: r = RW_TYPE_IQ4_NL; break;
    case RW_TYPE_Q2_K:
    case RW_TYPE_Q3_K:
    case RW_TYPE_TQ1_0:
    case RW_TYPE_TQ2_0: r = RW_TYPE_Q4_0; break;
    case RW_TYPE_Q4_K: r = RW_TYPE_Q5_0; break;
    case RW_TYPE_Q5_K: r = RW_TYPE_Q5_1; break;
    case RW_TYPE_Q6_K: r = RW_TYPE_Q8_0; break;
    default: return RW_TYPE_COUNT;
    }
    return t->ne[0] % rw_dtype_block_size(r) ? RW_TYPE_F16 : r;
}

rw_dtype rw_quantize__tensor_type(rw_quantize_mix *m, const rw_gguf_tensor *t) {
    /* the overrides first, as given (llama-quantize's order) */
    const kind k = kind_of(t->name);
    if (k == K_TOKEN_EMBD && m->token_embd_type != RW_TYPE_COUNT) return m->token_embd_type;
    if (k == K_OUTPUT && m->output_type != RW_TYPE_COUNT) return m->output_type;
    rw_dtype ty = m->ft->base;
    if (ty == RW_TYPE_F32 || ty == RW_TYPE_F16 || ty == RW_TYPE_BF16) return ty;
    /* then --tensor-type: the first pattern found decides, and the mix is
     * not asked (its counters do not advance for the tensor) */
    for (int i = 0; i < m->n_overrides; i++)
        if (!regexec(&m->overrides[i].re, t->name, 0, NULL, 0)) return fallback(t, m->overrides[i].type);
    if (!m->pure) ty = mix_type(m, t, ty);
    return fallback(t, ty);
}
