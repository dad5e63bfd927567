/* vocab.c - the vocabulary from GGUF metadata (its maps are in maps.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/portable.h"
#include "tokenizer/tok_int.h"

/* ---- loading ---- */

static int32_t opt_id(const rw_gguf *g, const char *key, int32_t n_vocab) {
    uint32_t v;
    if (rw_gguf_get_u32(g, key, &v, NULL) != RW_OK || v >= (uint32_t)n_vocab) return -1;
    return (int32_t)v;
}

static bool opt_bool(const rw_gguf *g, const char *key, bool dflt) {
    bool b;
    return rw_gguf_get_bool(g, key, &b, NULL) == RW_OK ? b : dflt;
}

static size_t utf8_put(char *out, unsigned cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

static int cmp_special_len(const void *a, const void *b, void *arg) {
    const rw_tokenizer *t = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->len[x] != t->len[y]) return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : 1;
}

/* Byte-level alphabet of GPT-2: printable bytes keep their code point, the
 * others get 256 + n in byte order. */
static void byte_alphabet(rw_tokenizer *t) {
    int extra = 0;
    for (int i = 0; i < 512; i++) t->char_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)extra++;
        t->byte_char_len[b] = (uint8_t)utf8_put(t->byte_char[b], cp);
        t->char_byte[cp] = (int16_t)b;
    }
}

/* A merge "left right" splits at its first space after the first byte (as
 * llama.cpp reads them); one without such a space can never apply. Merges of
 * two tokens go into the pair map by id, with the merged token; the rare
 * others (a side that is not a token, so only reachable through merged
 * symbols that are not tokens either) stay strings. */
static int split_merge(rw_gguf_str m, size_t *pos) {
    const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', (size_t)m.len - 1) : NULL;
    if (!sp || (size_t)(sp - m.ptr) + 1 >= (size_t)m.len) return -1;
    *pos = (size_t)(sp - m.ptr);
    return 0;
}

static rw_status load_merges(rw_tokenizer *t, const rw_gguf_value *merges, rw_error *err) {
    size_t n = (size_t)merges->arr.n, odd_size = 0, n_odd = 0, cap = 256;
    char *cat = malloc(cap);
    uint8_t *is_odd = calloc(n, 1);
    if (!cat || !is_odd) goto nomem;
    for (int pass = 0; pass < 2; pass++) {
        size_t used = 0;
        for (size_t i = 0; i < n; i++) {
            rw_gguf_str m = merges->arr.items[i].str;
            size_t pos;
            if (split_merge(m, &pos)) continue;
            if (pass == 0) {
                int32_t a = rw_tok__str_map_get(&t->vocab, m.ptr, pos);
                int32_t b = rw_tok__str_map_get(&t->vocab, m.ptr + pos + 1, (size_t)m.len - pos - 1);
                if (a >= 0 && b >= 0) {
                    if ((size_t)m.len > cap) {
                        char *c = realloc(cat, cap = 2 * (size_t)m.len);
                        if (!c) goto nomem;
                        cat = c;
                    }
                    memcpy(cat, m.ptr, pos);
                    memcpy(cat + pos, m.ptr + pos + 1, (size_t)m.len - pos - 1);
                    rw_tok__pair_map_put(&t->merges, a, b, (int32_t)i, rw_tok__str_map_get(&t->vocab, cat, (size_t)m.len - 1));
                } else {
                    is_odd[i] = 1;
                    odd_size += (size_t)m.len + 1;
                    n_odd++;
                }
            } else if (is_odd[i]) {
                memcpy(t->odd_pool + used, m.ptr, (size_t)m.len);
                t->odd_pool[used + (size_t)m.len] = 0;
                rw_tok__str_map_put(&t->odd_merges, t->odd_pool + used, (uint32_t)m.len, (int32_t)i);
                used += (size_t)m.len + 1;
            }
        }
        if (pass == 0) {
            if (!n_odd) break;
            t->odd_pool = malloc(odd_size);
            if (!t->odd_pool || rw_tok__str_map_init(&t->odd_merges, n_odd)) goto nomem;
        }
    }
    free(cat);
    free(is_odd);
    return RW_OK;
nomem:
    free(cat);
    free(is_odd);
    return rw_errorf(err, RW_ERR_NOMEM, "out of memory for the merges");
}

#define EMPTY_NAME 20 /* room for "[EMPTY_<id>]" in place of an empty token */

rw_status rw_tokenizer_load(const rw_gguf *g, rw_tokenizer **out, rw_error *err) {
    *out = NULL;
    char model[32];
    if (rw_gguf_get_cstr(g, "tokenizer.ggml.model", model, sizeof model, err) != RW_OK) return err ? err->code : RW_ERR_FORMAT;
    const rw_gguf_value *toks = rw_gguf_get(g, "tokenizer.ggml.tokens");
    if (!toks || toks->type != RW_GGUF_ARRAY || toks->arr.type != RW_GGUF_STRING || toks->arr.n == 0 ||
        toks->arr.n > (1u << 24))
        return rw_errorf(err, RW_ERR_FORMAT, "tokenizer.ggml.tokens is missing or not a string array");
    int32_t n = (int32_t)toks->arr.n;
    rw_tokenizer *t = calloc(1, sizeof *t + (size_t)n);
    if (!t) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    t->n_vocab = n;
    rw_status s = RW_OK;
    const char *forced_pre = NULL;
    if (!strcmp(model, "gpt2")) t->kind = TOK_BPE;
    else if (!strcmp(model, "gemma4")) { /* BPE over SentencePiece-style text, whatever pre says (as llama.cpp) */
        t->kind = TOK_BPE;
        forced_pre = "gemma4";
    }
    else if (!strcmp(model, "llama")) t->kind = TOK_SPM;
    else if (!strcmp(model, "bert")) t->kind = TOK_WPM;
    else {
        s = rw_errorf(err, RW_ERR_UNSUPPORTED, "tokenizer model '%s' is not supported", model);
        goto fail;
    }
    const rw_gguf_value *merges = rw_gguf_get(g, "tokenizer.ggml.merges");
    if (t->kind == TOK_BPE && (!merges || merges->type != RW_GGUF_ARRAY || merges->arr.type != RW_GGUF_STRING)) {
        s = rw_errorf(err, RW_ERR_FORMAT, "a gpt2 tokenizer needs tokenizer.ggml.merges (string array)");
        goto fail;
    }
    uint64_t n_merges = t->kind == TOK_BPE ? merges->arr.n : 0;
    if (n_merges > (1u << 24)) {
        s = rw_errorf(err, RW_ERR_FORMAT, "tokenizer.ggml.merges has %llu entries (at most %u)",
                      (unsigned long long)n_merges, 1u << 24);
        goto fail;
    }
    size_t pool_size = 0;
    for (int32_t i = 0; i < n; i++) pool_size += (size_t)toks->arr.items[i].str.len + 1 + EMPTY_NAME;
    t->pool = malloc(pool_size ? pool_size : 1);
    t->text = calloc((size_t)n, sizeof *t->text);
    t->len = calloc((size_t)n, sizeof *t->len);
    t->type = calloc((size_t)n, sizeof *t->type);
    if (!t->pool || !t->text || !t->len || !t->type || rw_tok__str_map_init(&t->vocab, (size_t)n) ||
        rw_tok__pair_map_init(&t->merges, (size_t)n_merges)) {
        s = rw_errorf(err, RW_ERR_NOMEM, "out of memory for the vocabulary");
        goto fail;
    }
    const rw_gguf_value *types = rw_gguf_get(g, "tokenizer.ggml.token_type");
    const rw_gguf_value *scores = rw_gguf_get(g, "tokenizer.ggml.scores");
    int64_t i0;
    double d0;
    if (types && (types->type != RW_GGUF_ARRAY || types->arr.n < (uint64_t)n || !rw_gguf_arr_int(types, 0, &i0))) {
        s = rw_errorf(err, RW_ERR_FORMAT, "tokenizer.ggml.token_type must be an integer array with an entry per token (%d)", n);
        goto fail;
    }
    if (scores && (scores->type != RW_GGUF_ARRAY || scores->arr.n < (uint64_t)n || !rw_gguf_arr_float(scores, 0, &d0))) {
        s = rw_errorf(err, RW_ERR_FORMAT, "tokenizer.ggml.scores must be a float array with an entry per token (%d)", n);
        goto fail;
    }
    if (scores) {
        t->score = calloc((size_t)n, sizeof *t->score);
        if (!t->score) {
            s = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
            goto fail;
        }
        for (int32_t i = 0; i < n; i++) {
            double d = 0;
            rw_gguf_arr_float(scores, (uint64_t)i, &d);
            t->score[i] = (float)d;
        }
    }
    size_t used = 0;
    for (int32_t i = 0; i < n; i++) {
        rw_gguf_str str = toks->arr.items[i].str;
        t->text[i] = t->pool + used;
        if (str.len) {
            memcpy(t->text[i], str.ptr, (size_t)str.len);
            t->len[i] = (uint32_t)str.len;
        } else { /* llama.cpp names an empty token so that it stays unique */
            t->len[i] = (uint32_t)snprintf(t->text[i], EMPTY_NAME + 1, "[EMPTY_%d]", i);
        }
        t->text[i][t->len[i]] = 0;
        used += t->len[i] + 1;
        int64_t ty = TT_NORMAL;
        if (types) rw_gguf_arr_int(types, (uint64_t)i, &ty);
        t->type[i] = (int32_t)ty;
        int32_t dup = rw_tok__str_map_put(&t->vocab, t->text[i], t->len[i], i);
        if (dup >= 0) {
            s = rw_errorf(err, RW_ERR_FORMAT, "duplicate token in the vocabulary: '%.40s' has ids %d and %d", t->text[i],
                          dup, i);
            goto fail;
        }
    }
    if (n_merges && (s = load_merges(t, merges, err)) != RW_OK) goto fail;
    t->bos = opt_id(g, "tokenizer.ggml.bos_token_id", n);
    t->eos = opt_id(g, "tokenizer.ggml.eos_token_id", n);
    t->unk = opt_id(g, "tokenizer.ggml.unknown_token_id", n);
    t->eot = opt_id(g, "tokenizer.ggml.eot_token_id", n);
    t->eom = opt_id(g, "tokenizer.ggml.eom_token_id", n);
    for (int k = 0; k < RW_FIM_COUNT; k++) t->fim[k] = -1; /* rw_tok__derive_special finds them */
    t->add_eos = opt_bool(g, "tokenizer.ggml.add_eos_token", false);
    t->add_space_prefix = opt_bool(g, "tokenizer.ggml.add_space_prefix", t->kind == TOK_SPM);
    if (t->kind == TOK_SPM && t->unk < 0) t->unk = rw_tok__str_map_get(&t->vocab, "<unk>", 5);
    if (t->kind == TOK_WPM && t->unk < 0) t->unk = rw_tok__str_map_get(&t->vocab, "[UNK]", 5);

    rw_tok__derive_special(t, g); /* before the special list: it makes some tokens control tokens */

    t->special = malloc((size_t)n * sizeof *t->special);
    if (!t->special) {
        s = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < n; i++)
        if ((t->type[i] == TT_CONTROL || t->type[i] == TT_USER_DEFINED || t->type[i] == TT_UNKNOWN) && t->len[i] > 0)
            t->special[t->n_special++] = i;
    rw_qsort_r(t->special, (size_t)t->n_special, sizeof *t->special, cmp_special_len, t);

    if (!(t->strip = calloc((size_t)n, 1))) {
        s = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto fail;
    }
    rw_tok__strip_attrs(t, g);

    for (int b = 0; b < 256; b++) t->byte_token[b] = -1;
    if (t->kind == TOK_BPE) {
        byte_alphabet(t);
        for (int b = 0; b < 256; b++) t->byte_token[b] = rw_tok__str_map_get(&t->vocab, t->byte_char[b], t->byte_char_len[b]);
        char pre[64] = "default"; /* llama.cpp's choice (with a warning) when the key is absent */
        if (rw_gguf_get(g, "tokenizer.ggml.pre") &&
            (s = rw_gguf_get_cstr(g, "tokenizer.ggml.pre", pre, sizeof pre, err)) != RW_OK)
            goto fail;
        s = rw_tok__set_pre(t, forced_pre ? forced_pre : pre, err);
        if (s) goto fail;
    }
    /* llama.cpp's defaults when the key is absent: SentencePiece and
     * WordPiece add BOS, BPE as its pre-tokenizer says; gemma4 always adds it */
    t->add_bos = opt_bool(g, "tokenizer.ggml.add_bos_token", t->kind == TOK_BPE ? t->pre_add_bos : true);
    if (t->newline_words) t->add_bos = true;
    if (t->kind == TOK_SPM || t->raw_utf8) {
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_token[b] = rw_tok__str_map_get(&t->vocab, name, 6);
        }
    }
    /* every token's decoded bytes, so detokenizing is a copy */
    size_t total = 0;
    for (int32_t i = 0; i < n && total <= UINT32_MAX; i++) total += rw_tok__decode_token(t, i, NULL, 0);
    if (total > UINT32_MAX) {
        s = rw_errorf(err, RW_ERR_FORMAT, "the vocabulary's texts are too large (%zu bytes)", total);
        goto fail;
    }
    t->piece_pool = malloc(total ? total : 1);
    t->piece_off = malloc(((size_t)n + 1) * sizeof *t->piece_off);
    if (!t->piece_pool || !t->piece_off) {
        s = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto fail;
    }
    total = 0;
    for (int32_t i = 0; i < n; i++) {
        t->piece_off[i] = (uint32_t)total;
        total += rw_tok__decode_token(t, i, t->piece_pool + total, SIZE_MAX);
    }
    t->piece_off[n] = (uint32_t)total;
    *out = t;
    return RW_OK;
fail:
    rw_tokenizer_free(t);
    return s;
}

void rw_tokenizer_free(rw_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    rw_tok__str_map_free(&t->vocab);
    rw_tok__pair_map_free(&t->merges);
    rw_tok__str_map_free(&t->odd_merges);
    free(t->odd_pool);
    free(t->special);
    free(t->strip);
    free(t->piece_pool);
    free(t->piece_off);
    free(t->score);
    free(t->text);
    free(t->len);
    free(t->type);
    free(t->pool);
    free(t);
}

int32_t rw_tokenizer_n_vocab(const rw_tokenizer *t) { return t->n_vocab; }
int32_t rw_tokenizer_bos(const rw_tokenizer *t) { return t->bos; }
int32_t rw_tokenizer_eos(const rw_tokenizer *t) { return t->eos; }
bool rw_tokenizer_add_bos(const rw_tokenizer *t) { return t->add_bos; }
bool rw_tokenizer_is_eog(const rw_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab && t->eog[id]; }
bool rw_tokenizer_is_control(const rw_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && t->type[id] == TT_CONTROL;
}
int32_t rw_tokenizer_fim(const rw_tokenizer *t, rw_fim_role role) {
    return role >= 0 && role < RW_FIM_COUNT ? t->fim[role] : -1;
}
const char *rw_tokenizer_token_text(const rw_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->text[id] : NULL;
}
