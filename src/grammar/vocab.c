/* vocab.c - the vocabulary as a byte trie (grammar_int.h's rw_gtrie).
 *
 * Built from the tokens sorted by their bytes: consecutive tokens share
 * their common prefix's nodes, so the nodes come out in preorder and each
 * subtree's tokens are one run of ttok. Nodes with at least SUB_MIN tokens
 * below them also record which bytes occur below them (the mask walk uses it
 * to allow a whole subtree at once when all those bytes loop the grammar
 * state). Qwen3's 151,936 tokens give about 0.4M nodes (24 bytes each). */
#include <stdlib.h>
#include <string.h>

#include "base/portable.h"
#include "grammar/grammar_int.h"

#define SUB_MIN 24 /* = match.c's LOOP_MIN_TOKENS: smaller subtrees are walked */

static int cmp_tok(const void *a, const void *b, void *ctx) {
    const rw_grammar_vocab *sort_v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const int64_t xa = sort_v->off[x], xl = sort_v->off[x + 1] - xa;
    const int64_t ya = sort_v->off[y], yl = sort_v->off[y + 1] - ya;
    int c = memcmp(sort_v->pool + xa, sort_v->pool + ya, (size_t)(xl < yl ? xl : yl));
    if (c) return c;
    if (xl != yl) return xl < yl ? -1 : 1;
    return x < y ? -1 : x > y;
}

void rw_grammar_vocab_free(rw_grammar_vocab *v) {
    if (!v) return;
    free(v->pool);
    free(v->off);
    free(v->allowed);
    free(v->nodes);
    free(v->ttok);
    free(v->sub_bytes);
    free(v->plain_mask);
    free(v);
}

int32_t rw_grammar_vocab_size(const rw_grammar_vocab *v) { return v->n; }

static rw_status build_trie(rw_grammar_vocab *v, rw_error *err) {
    int32_t *order = malloc((size_t)v->n * sizeof *order);
    int32_t n_ok = 0;
    if (!order) return rw_errorf(err, RW_ERR_NOMEM, "out of memory building the vocabulary trie");
    for (int32_t i = 0; i < v->n; i++)
        if (v->allowed[i] && v->off[i + 1] > v->off[i]) order[n_ok++] = i;
    rw_qsort_r(order, (size_t)n_ok, sizeof *order, cmp_tok, v);
    int64_t cap = (int64_t)n_ok + 1024;
    v->nodes = malloc((size_t)cap * sizeof *v->nodes);
    v->ttok = malloc((size_t)(n_ok + 1) * sizeof *v->ttok);
    if (!v->nodes || !v->ttok) {
        free(order);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory building the vocabulary trie");
    }
    int32_t path[4096]; /* path[d] = the node at depth d (path[0] = root) */
    int32_t depth = 0, n_tt = 0;
    v->nodes[0] = (rw_gtrie){.tok_lo = 0, .bm = -1};
    v->n_nodes = 1;
    path[0] = 0;
    const char *prev = NULL;
    int64_t prev_len = 0;
    rw_status st = RW_OK;
    for (int32_t k = 0; k < n_ok && !st; k++) {
        const int32_t id = order[k];
        const char *p = v->pool + v->off[id];
        int64_t len = v->off[id + 1] - v->off[id];
        if (len >= (int64_t)(sizeof path / sizeof *path) - 1) continue; /* absurdly long: never allowed */
        int64_t l = 0;
        while (l < len && l < prev_len && p[l] == prev[l]) l++;
        while (depth > l) { /* close the nodes below the common prefix */
            rw_gtrie *nd = &v->nodes[path[depth--]];
            nd->end = v->n_nodes;
            nd->sub_end = n_tt;
        }
        for (int64_t i = l; i < len; i++) {
            if (v->n_nodes == cap) {
                cap *= 2;
                rw_gtrie *nn = realloc(v->nodes, (size_t)cap * sizeof *nn);
                if (!nn) {
                    st = rw_errorf(err, RW_ERR_NOMEM, "out of memory building the vocabulary trie");
                    break;
                }
                v->nodes = nn;
            }
            v->nodes[v->n_nodes] = (rw_gtrie){.byte = (uint8_t)p[i], .tok_lo = n_tt, .bm = -1};
            path[++depth] = v->n_nodes++;
        }
        if (st) break;
        v->ttok[n_tt++] = id;
        v->nodes[path[depth]].n_own++;
        prev = p;
        prev_len = len;
    }
    while (depth >= 0) {
        rw_gtrie *nd = &v->nodes[path[depth--]];
        nd->end = v->n_nodes;
        nd->sub_end = n_tt;
    }
    free(order);
    if (st) return st;
    /* UTF-8 states down the trie, then (children first) whether everything below is plain string text */
    v->nodes[0].u8 = RW_U8_BOUNDARY;
    depth = 0;
    path[0] = 0;
    for (int32_t i = 1; i < v->n_nodes; i++) {
        while (v->nodes[path[depth]].end <= i) depth--; /* path: the open ancestors of i */
        const int32_t p = path[depth];
        v->nodes[i].u8 = v->nodes[p].u8 == RW_U8_BAD ? RW_U8_BAD : (uint8_t)rw_u8_next(v->nodes[p].u8, v->nodes[i].byte);
        path[++depth] = i;
    }
    for (int32_t i = v->n_nodes - 1; i >= 0; i--) {
        bool plain = true;
        for (int32_t c = i + 1; c < v->nodes[i].end && plain; c = v->nodes[c].end)
            plain = v->nodes[c].u8 != RW_U8_BAD && !rw_u8_special(v->nodes[c].byte) && v->nodes[c].plain;
        v->nodes[i].plain = plain;
    }
    /* paths from the root that are plain text, and their tokens */
    v->plain_mask = calloc(rw_grammar_mask_words(v->n), sizeof *v->plain_mask);
    uint8_t *rootok = malloc((size_t)v->n_nodes);
    if (!v->plain_mask || !rootok) {
        free(rootok);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory building the vocabulary trie");
    }
    rootok[0] = 1;
    depth = 0;
    path[0] = 0;
    for (int32_t i = 1; i < v->n_nodes; i++) {
        while (v->nodes[path[depth]].end <= i) depth--;
        const int32_t p = path[depth];
        rootok[i] = rootok[p] && v->nodes[i].u8 != RW_U8_BAD && !rw_u8_special(v->nodes[i].byte);
        v->nodes[i].rootplain = rootok[i] && v->nodes[i].plain;
        if (rootok[i])
            for (int32_t k = v->nodes[i].tok_lo; k < v->nodes[i].tok_lo + v->nodes[i].n_own; k++)
                v->plain_mask[v->ttok[k] >> 5] |= 1u << (v->ttok[k] & 31);
        path[++depth] = i;
    }
    free(rootok);
    /* the bytes below each big subtree */
    int32_t n_bm = 0;
    for (int32_t i = 1; i < v->n_nodes; i++)
        if (v->nodes[i].sub_end - v->nodes[i].tok_lo >= SUB_MIN && v->nodes[i].end > i + 1) v->nodes[i].bm = n_bm++;
    v->sub_bytes = calloc((size_t)n_bm + 1, sizeof *v->sub_bytes);
    if (!v->sub_bytes) return rw_errorf(err, RW_ERR_NOMEM, "out of memory building the vocabulary trie");
    v->n_sub_bytes = n_bm;
    for (int32_t i = v->n_nodes - 1; i >= 1; i--) { /* nested big nodes first */
        if (v->nodes[i].bm < 0) continue;
        rw_gbytes *b = &v->sub_bytes[v->nodes[i].bm];
        /* every node strictly below i: its bytes (walking the range is
         * O(subtree) per big node; the big nodes' subtrees nest, so the total
         * is bounded by nodes x depth of big nodes, small in practice) */
        for (int32_t j = i + 1; j < v->nodes[i].end; j++) {
            if (v->nodes[j].bm >= 0 && j != i) { /* reuse a nested big node's set */
                const rw_gbytes *c = &v->sub_bytes[v->nodes[j].bm];
                for (int w = 0; w < 4; w++) b->w[w] |= c->w[w];
                rw_gbytes_add(b, v->nodes[j].byte);
                j = v->nodes[j].end - 1;
                continue;
            }
            rw_gbytes_add(b, v->nodes[j].byte);
        }
    }
    return RW_OK;
}

rw_status rw_grammar_vocab_new(int32_t n, const char *const *pieces, const size_t *lens, rw_grammar_vocab **out,
                               rw_error *err) {
    *out = NULL;
    if (n <= 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: empty vocabulary");
    rw_grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    v->n = n;
    v->off = malloc(((size_t)n + 1) * sizeof *v->off);
    v->allowed = calloc((size_t)n, 1);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++)
        if (pieces[i]) total += lens[i];
    v->pool = malloc(total + 1);
    if (!v->off || !v->allowed || !v->pool) {
        rw_grammar_vocab_free(v);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    size_t o = 0;
    for (int32_t i = 0; i < n; i++) {
        v->off[i] = (int64_t)o;
        if (!pieces[i]) continue;
        v->allowed[i] = 1;
        memcpy(v->pool + o, pieces[i], lens[i]);
        o += lens[i];
    }
    v->off[n] = (int64_t)o;
    rw_status st = build_trie(v, err);
    if (st) {
        rw_grammar_vocab_free(v);
        return st;
    }
    *out = v;
    return RW_OK;
}

static bool listed(const int32_t *ids, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

rw_status rw_grammar_vocab_from_tokenizer(const rw_tokenizer *tok, rw_grammar_vocab **out, rw_error *err) {
    return rw_grammar_vocab_with_controls(tok, NULL, 0, out, err);
}

rw_status rw_grammar_vocab_with_controls(const rw_tokenizer *tok, const int32_t *controls, int n_controls,
                                         rw_grammar_vocab **out, rw_error *err) {
    *out = NULL;
    const int32_t n = rw_tokenizer_n_vocab(tok);
    if (n <= 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: empty vocabulary");
    const char **pieces = calloc((size_t)n, sizeof *pieces);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    size_t cap = 1 << 20, used = 0;
    char *buf = malloc(cap);
    rw_status st = RW_OK;
    if (!pieces || !lens || !buf) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    size_t *offs = st ? NULL : malloc((size_t)n * sizeof *offs);
    if (!st && !offs) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n && !st; i++) {
        offs[i] = SIZE_MAX;
        const bool ctl = rw_tokenizer_is_control(tok, i);
        if (ctl && !listed(controls, n_controls, i)) continue;
        size_t k = rw_token_to_piece(tok, i, ctl, buf + used, cap - used);
        if (k > cap - used) {
            while (k > cap - used) cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
                break;
            }
            buf = nb;
            k = rw_token_to_piece(tok, i, ctl, buf + used, cap - used);
        }
        if (k == 0) continue;
        offs[i] = used;
        lens[i] = k;
        used += k;
        if (cap - used < 256) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
            else buf = nb;
        }
    }
    if (!st) {
        for (int32_t i = 0; i < n; i++) pieces[i] = offs[i] == SIZE_MAX ? NULL : buf + offs[i];
        st = rw_grammar_vocab_new(n, pieces, lens, out, err);
    }
    free(offs);
    free(pieces);
    free(lens);
    free(buf);
    return st;
}
