/* match.c - parser states, byte transitions and token masks (grammar_int.h
 * describes the representation), and the matcher over them.
 *
 * A token mask for a state is a walk of the vocabulary trie: a child of a
 * trie node is followed with the state after its byte (a cached transition),
 * a dead state cuts the subtree, and a token is allowed when the walk
 * reaches its node alive. Two things keep it cheap on 150k-token
 * vocabularies:
 *   - masks are cached per state (a state is one integer and never changes
 *     meaning), so a state seen again - the same position in a JSON object,
 *     the inside of any string - costs one copy;
 *   - a subtree whose bytes all loop the state back onto itself (the inside
 *     of a string: every byte but '"', '\\' and controls) is allowed whole
 *     without walking it, from the set of bytes each big subtree holds.
 * Memory: a transition table is 1 KiB per state reached, a mask n_vocab / 8
 * bytes per state masked; masks stop being cached past MASK_CACHE_MAX bytes
 * (they are then computed each time, still correct). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "grammar/grammar_int.h"

#define MASK_CACHE_MAX  ((size_t)64 << 20) /* per grammar, i.e. per request */
#define LOOP_MIN_TOKENS 24                 /* subtrees with fewer tokens are walked, not checked for a loop */

static uint32_t hash2(uint32_t a, uint32_t b) {
    uint64_t h = (((uint64_t)a << 32) | b) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* ---- stacks ---- */

static bool st_grow_hash(rw_grammar *g) {
    int32_t cap = g->cap_st_hash ? g->cap_st_hash * 2 : 1024;
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) return false;
    memset(h, 0xff, (size_t)cap * sizeof *h);
    for (int32_t i = 1; i < g->n_st; i++) {
        uint32_t k = hash2((uint32_t)g->st_pos[i], (uint32_t)g->st_par[i]) & (uint32_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint32_t)(cap - 1);
        h[k] = i;
    }
    free(g->st_hash);
    g->st_hash = h;
    g->cap_st_hash = cap;
    return true;
}

/* The id of stack (pos, par), made if new; -1 on out of memory or past
 * RW_GRAMMAR_MAX_STACKS (then g->too_many_stacks). */
static int32_t node(rw_grammar *g, int32_t pos, int32_t par) {
    if (2 * (int64_t)g->n_st >= g->cap_st_hash && !st_grow_hash(g)) return -1;
    uint32_t k = hash2((uint32_t)pos, (uint32_t)par) & (uint32_t)(g->cap_st_hash - 1);
    for (; g->st_hash[k] >= 0; k = (k + 1) & (uint32_t)(g->cap_st_hash - 1)) {
        int32_t i = g->st_hash[k];
        if (g->st_pos[i] == pos && g->st_par[i] == par) return i;
    }
    if (g->n_st >= RW_GRAMMAR_MAX_STACKS) {
        g->too_many_stacks = true;
        return -1;
    }
    if (g->n_st == g->cap_st) {
        int32_t cap = g->cap_st * 2;
        int32_t *a = realloc(g->st_pos, (size_t)cap * sizeof *a);
        if (!a) return -1;
        g->st_pos = a;
        a = realloc(g->st_par, (size_t)cap * sizeof *a);
        if (!a) return -1;
        g->st_par = a;
        uint32_t *s = realloc(g->stamp, (size_t)cap * sizeof *s);
        if (!s) return -1;
        memset(s + g->cap_st, 0, (size_t)(cap - g->cap_st) * sizeof *s);
        g->stamp = s;
        g->cap_st = cap;
    }
    int32_t i = g->n_st++;
    g->st_pos[i] = pos;
    g->st_par[i] = par;
    g->st_hash[k] = i;
    return i;
}

static bool push_i32(int32_t **a, int32_t *n, int32_t *cap, int32_t v) {
    if (*n == *cap) {
        int32_t c = *cap ? *cap * 2 : 256;
        int32_t *p = realloc(*a, (size_t)c * sizeof *p);
        if (!p) return false;
        *a = p;
        *cap = c;
    }
    (*a)[(*n)++] = v;
    return true;
}

/* Expands the stacks work[0..n_work) until each has a terminal on top (or
 * is node 0, the end), into out[0..*n_out), each once. */
static bool closure(rw_grammar *g, int32_t n_work, int32_t *n_out) {
    *n_out = 0;
    if (++g->cur_stamp == 0) { /* wrapped: clear the marks */
        memset(g->stamp, 0, (size_t)g->cap_st * sizeof *g->stamp);
        g->cur_stamp = 1;
    }
    while (n_work > 0) {
        if (!rw_grammar__spend(g, 1)) return false;
        int32_t n = g->work[--n_work];
        if (g->stamp[n] == g->cur_stamp) continue;
        g->stamp[n] = g->cur_stamp;
        if (n == 0) {
            if (!push_i32(&g->out, n_out, &g->cap_out, 0)) return false;
            continue;
        }
        const int32_t pos = g->st_pos[n], par = g->st_par[n];
        const rw_gelem el = g->elems[pos];
        if (el.type == RW_GEL_TERM) {
            if (!push_i32(&g->out, n_out, &g->cap_out, n)) return false;
        } else if (el.type == RW_GEL_END) {
            if (!push_i32(&g->work, &n_work, &g->cap_work, par)) return false;
        } else {
            /* a reference at the end of its alternative is a tail call: no return frame */
            int32_t ret = g->elems[pos + 1].type == RW_GEL_END ? par : node(g, pos + 1, par);
            if (ret < 0) return false;
            for (int32_t a = g->alt_off[el.v]; a < g->alt_off[el.v + 1]; a++) {
                int32_t c = node(g, g->alts[a], ret);
                if (c < 0 || !push_i32(&g->work, &n_work, &g->cap_work, c)) return false;
            }
        }
    }
    return true;
}

rw_status rw_grammar__fail(const rw_grammar *g, rw_error *err) {
    if (g->over_budget && g->over_total)
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "grammar: the output's token masks took more than %lld work units, the budget of a request "
                         "(the grammar is too ambiguous for this vocabulary)",
                         (long long)g->budget_total);
    if (g->over_budget)
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "grammar: one token's mask or steps took more than %lld work units, the budget of one mask "
                         "(the grammar is too ambiguous for this vocabulary: simplify its repetitions and overlapping "
                         "alternatives)",
                         (long long)g->budget_mask);
    if (g->too_many_stacks)
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "grammar: more than %d parser stacks (the grammar is too ambiguous or too deeply recursive "
                         "for this output)",
                         RW_GRAMMAR_MAX_STACKS);
    return rw_errorf(err, RW_ERR_NOMEM, "out of memory in the grammar");
}

/* ---- states ---- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* The set table's index: base/hash.h's hash of the ids' bytes, folded to 32
 * bits so that the low bits the mask keeps depend on all 64. */
static uint32_t hash_ids(const int32_t *v, int32_t n) {
    const uint64_t h = rw_hash_bytes(RW_HASH_INIT, v, (size_t)n * sizeof *v);
    return (uint32_t)(h ^ (h >> 32));
}

static bool set_grow_hash(rw_grammar *g) {
    int32_t cap = g->cap_set_hash ? g->cap_set_hash * 2 : 256;
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) return false;
    memset(h, 0xff, (size_t)cap * sizeof *h);
    for (int32_t i = 1; i < g->n_sets; i++) {
        uint32_t k = hash_ids(g->set_pool + g->sets[i].off, g->sets[i].len) & (uint32_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint32_t)(cap - 1);
        h[k] = i;
    }
    free(g->set_hash);
    g->set_hash = h;
    g->cap_set_hash = cap;
    return true;
}

/* The state of the stacks ids[0..n) (sorted, distinct); 0 when n == 0; -1 on out of memory. */
static int32_t intern(rw_grammar *g, const int32_t *ids, int32_t n) {
    if (n == 0) return 0;
    if (2 * (int64_t)g->n_sets >= g->cap_set_hash && !set_grow_hash(g)) return -1;
    uint32_t k = hash_ids(ids, n) & (uint32_t)(g->cap_set_hash - 1);
    for (; g->set_hash[k] >= 0; k = (k + 1) & (uint32_t)(g->cap_set_hash - 1)) {
        const rw_gstate *s = &g->sets[g->set_hash[k]];
        if (s->len == n && !memcmp(g->set_pool + s->off, ids, (size_t)n * sizeof *ids)) return g->set_hash[k];
    }
    if (g->n_pool + n > g->cap_pool) {
        int64_t cap = g->cap_pool * 2;
        while (cap < g->n_pool + n) cap *= 2;
        int32_t *p = realloc(g->set_pool, (size_t)cap * sizeof *p);
        if (!p) return -1;
        g->set_pool = p;
        g->cap_pool = cap;
    }
    if (g->n_sets == g->cap_sets) {
        int32_t cap = g->cap_sets * 2;
        rw_gstate *s = realloc(g->sets, (size_t)cap * sizeof *s);
        if (!s) return -1;
        g->sets = s;
        g->cap_sets = cap;
    }
    int32_t i = g->n_sets++;
    g->sets[i] = (rw_gstate){.off = (int32_t)g->n_pool, .len = n, .plain = -1};
    memcpy(g->set_pool + g->n_pool, ids, (size_t)n * sizeof *ids);
    g->n_pool += n;
    g->set_hash[k] = i;
    return i;
}

/* The state of closure(work[0..n_work)). */
static int32_t close_and_intern(rw_grammar *g, int32_t n_work) {
    int32_t n;
    if (!closure(g, n_work, &n) || !rw_grammar__spend(g, n)) return -1;
    qsort(g->out, (size_t)n, sizeof *g->out, cmp_i32);
    return intern(g, g->out, n);
}

rw_status rw_grammar__init_runtime(rw_grammar *g, rw_error *err) {
    g->cap_st = 1024;
    g->st_pos = malloc((size_t)g->cap_st * sizeof *g->st_pos);
    g->st_par = malloc((size_t)g->cap_st * sizeof *g->st_par);
    g->stamp = calloc((size_t)g->cap_st, sizeof *g->stamp);
    g->cap_sets = 256;
    g->sets = calloc((size_t)g->cap_sets, sizeof *g->sets);
    g->cap_pool = 4096;
    g->set_pool = malloc((size_t)g->cap_pool * sizeof *g->set_pool);
    if (!g->st_pos || !g->st_par || !g->stamp || !g->sets || !g->set_pool)
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory compiling a grammar");
    g->st_pos[0] = -1;
    g->st_par[0] = -1;
    g->n_st = 1;
    g->n_sets = 1;              /* state 0: dead */
    g->spend_limit = INT64_MAX; /* compilation is bounded by the stack limits (rw_grammar__probe) */
    g->pre_state = -1;
    int32_t n_work = 0;
    for (int32_t a = g->alt_off[g->root]; a < g->alt_off[g->root + 1]; a++) {
        int32_t c = node(g, g->alts[a], 0);
        if (c < 0 || !push_i32(&g->work, &n_work, &g->cap_work, c))
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory compiling a grammar");
    }
    g->start = close_and_intern(g, n_work);
    if (g->start < 0) return rw_grammar__fail(g, err);
    if (g->start == 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "gbnf: the start rule matches nothing");
    return RW_OK;
}

static int32_t step_compute(rw_grammar *g, int32_t s, unsigned b) {
    int32_t n_work = 0;
    /* read the stacks through offsets: the pool may move while interning */
    const int32_t off = g->sets[s].off, len = g->sets[s].len;
    if (!rw_grammar__spend(g, len)) return -1;
    for (int32_t i = 0; i < len; i++) {
        int32_t n = g->set_pool[off + i];
        if (n == 0) continue;
        const int32_t pos = g->st_pos[n];
        if (!rw_gbytes_has(&g->bytes[g->elems[pos].v], b)) continue;
        int32_t c = node(g, pos + 1, g->st_par[n]);
        if (c < 0 || !push_i32(&g->work, &n_work, &g->cap_work, c)) return -1;
    }
    if (n_work == 0) return 0;
    return close_and_intern(g, n_work);
}

int32_t rw_grammar__step(rw_grammar *g, int32_t s, unsigned b) {
    if (s <= 0) return 0;
    int32_t *t = g->sets[s].trans;
    if (t && t[b] >= 0) return t[b];
    if (!t) {
        t = malloc(256 * sizeof *t);
        if (!t) return -1;
        memset(t, 0xff, 256 * sizeof *t);
        g->sets[s].trans = t;
        g->cache_bytes += 256 * sizeof *t;
    }
    int32_t r = step_compute(g, s, b);
    if (r >= 0) g->sets[s].trans[b] = r; /* sets may have moved */
    return r;
}

/* Every transition of s, and its loop bytes. */
static bool make_full(rw_grammar *g, int32_t s) {
    if (g->sets[s].full) return true;
    rw_gbytes loop = {{0}};
    for (unsigned b = 0; b < 256; b++) {
        int32_t t = rw_grammar__step(g, s, b);
        if (t < 0) return false;
        if (t == s) rw_gbytes_add(&loop, b);
    }
    g->sets[s].loop = loop;
    g->sets[s].full = true;
    return true;
}

/* The admission probe: a best-first walk over the states the grammar can
 * reach, always expanding the known state with the most parser stacks (the
 * most ambiguous place an output can get to), each with all 256
 * transitions computed, at most PROBE_STATES of them. A grammar is refused
 * at compile time (a 400 before any token) rather than failing or stalling
 * mid-generation once the output wanders into its ambiguity when its
 * stacks pass 3/4 of RW_GRAMMAR_MAX_STACKS there (anyOf 50 x 50 objects:
 * 131,072 stacks after the first '{', also behind a required key), or when
 * one state holds more than RW_GRAMMAR_MAX_STATE_STACKS (its token masks,
 * a walk of the vocabulary through every stack, would cost a neighbour's
 * decode step). Its work is bounded by those budgets; the states it makes
 * stay cached for the generation. */
#define PROBE_STATES 256
#define PROBE_TOTAL  (RW_GRAMMAR_MAX_STACKS / 4 * 3) /* the rest for the states generation goes on to */

rw_status rw_grammar__probe(rw_grammar *g, rw_error *err) {
    int32_t cand[PROBE_STATES];
    bool done[PROBE_STATES];
    int n = 0;
    cand[n] = g->start;
    done[n++] = false;
    for (int explored = 0; explored < PROBE_STATES; explored++) {
        int best = -1;
        for (int k = 0; k < n; k++)
            if (!done[k] && (best < 0 || g->sets[cand[k]].len > g->sets[cand[best]].len)) best = k;
        if (best < 0) break;
        const int32_t s = cand[best];
        done[best] = true;
        g->probed[g->n_probed++] = s;
        if (g->sets[s].len > RW_GRAMMAR_MAX_STATE_STACKS)
            return rw_errorf(
                err, RW_ERR_INVALID_ARG,
                "grammar: too ambiguous: %d parser stacks at one point of the output, over the limit of %d "
                "(alternatives that share their first bytes multiply; factor them)",
                (int)g->sets[s].len, RW_GRAMMAR_MAX_STATE_STACKS);
        if (!make_full(g, s)) return rw_grammar__fail(g, err);
        if (g->n_st > PROBE_TOTAL) break;
        for (unsigned b = 0; b < 256 && n < PROBE_STATES; b++) {
            const int32_t t = g->sets[s].trans[b];
            bool seen = t <= 0;
            for (int k = 0; k < n && !seen; k++) seen = cand[k] == t;
            if (seen) continue;
            cand[n] = t;
            done[n++] = false;
        }
    }
    int32_t most = 0;
    for (int k = 0; k < n; k++)
        if (g->sets[cand[k]].len > most) most = g->sets[cand[k]].len;
    if (g->n_st > PROBE_TOTAL)
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "grammar: too ambiguous: %d parser stacks in the first %d states of its output, over 3/4 of "
                         "the limit of %d (alternatives that share their first bytes multiply; factor them)",
                         (int)g->n_st, PROBE_STATES, RW_GRAMMAR_MAX_STACKS);
    if (most > RW_GRAMMAR_MAX_STATE_STACKS)
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "grammar: too ambiguous: %d parser stacks at one point of the output, over the limit of %d "
                         "(alternatives that share their first bytes multiply; factor them)",
                         (int)most, RW_GRAMMAR_MAX_STATE_STACKS);
    return RW_OK;
}

/* Whether state s is "inside a string": every byte sequence that is valid
 * UTF-8 (from a character boundary on) without '"', '\\' or control bytes
 * keeps it alive and brings it back to s at each character boundary. Checked
 * on the product of a UTF-8 decoder and the grammar's transitions from
 * (boundary, s); a JSON string's content (any of them, whatever the object
 * around it) passes, so the mask walk can allow a plain trie subtree whole. */
static bool plain_closed(rw_grammar *g, int32_t s) {
    if (g->sets[s].plain >= 0) return g->sets[s].plain;
    enum { MAXP = 48 };
    int32_t pg[MAXP];
    uint8_t pu[MAXP];
    int np = 1, head = 0;
    pg[0] = s;
    pu[0] = RW_U8_BOUNDARY;
    bool ok = true;
    while (ok && head < np) {
        const int32_t gs = pg[head];
        const unsigned u = pu[head++];
        for (unsigned b = 0; b < 256 && ok; b++) {
            const unsigned nu = rw_u8_next(u, b);
            if (nu == RW_U8_BAD || (u == RW_U8_BOUNDARY && rw_u8_special(b))) continue;
            const int32_t t = rw_grammar__step(g, gs, b);
            if (t < 0) return false; /* out of memory or over budget: not known, so not cached */
            if (t == 0) ok = false;
            else if (nu == RW_U8_BOUNDARY) ok = t == s;
            else {
                int k = 0;
                while (k < np && !(pg[k] == t && pu[k] == nu)) k++;
                if (k == np) {
                    if (np == MAXP) ok = false;
                    else pg[np] = t, pu[np++] = (uint8_t)nu;
                }
            }
        }
    }
    g->sets[s].plain = ok;
    return ok;
}

/* ---- masks ---- */

static inline void set_bit(uint32_t *m, int32_t id) { m[id >> 5] |= 1u << (id & 31); }

/* Allows the tokens below trie node n (reached alive in state s). p0: the
 * walk started in a string state with m = plain_mask, so subtrees of plain
 * text from the root are in m already. */
static bool walk(rw_grammar *g, const rw_grammar_vocab *v, int32_t n, int32_t s, uint32_t *m, bool p0) {
    const rw_gtrie *nodes = v->nodes;
    for (int32_t c = n + 1; c < nodes[n].end; c = nodes[c].end) {
        if (p0 && nodes[c].rootplain) continue;
        if (!rw_grammar__spend(g, 1)) return false;
        int32_t t = rw_grammar__step(g, s, nodes[c].byte);
        if (t < 0) return false;
        if (t == 0) continue;
        const rw_gtrie *cn = &nodes[c];
        /* plain string text below, read from a character boundary, in a string state: all allowed */
        if (cn->plain && cn->u8 == RW_U8_BOUNDARY && cn->sub_end - cn->tok_lo > 1 && plain_closed(g, t)) {
            for (int32_t i = cn->tok_lo; i < cn->sub_end; i++) set_bit(m, v->ttok[i]);
            continue;
        }
        if (cn->bm >= 0) {
            if (!make_full(g, t)) return false;
            const rw_gbytes *sub = &v->sub_bytes[cn->bm], *loop = &g->sets[t].loop;
            if (!(sub->w[0] & ~loop->w[0]) && !(sub->w[1] & ~loop->w[1]) && !(sub->w[2] & ~loop->w[2]) &&
                !(sub->w[3] & ~loop->w[3])) {
                for (int32_t i = cn->tok_lo; i < cn->sub_end; i++) set_bit(m, v->ttok[i]);
                continue;
            }
        }
        for (int32_t i = cn->tok_lo; i < cn->tok_lo + cn->n_own; i++) set_bit(m, v->ttok[i]);
        if (cn->end > c + 1 && !walk(g, v, c, t, m, p0)) return false;
    }
    return true;
}

const uint32_t *rw_grammar__mask(rw_grammar *g, const rw_grammar_vocab *v, int32_t s) {
    rw_gstate *st = &g->sets[s];
    if (st->mask) {
        g->masks_cached++;
        return st->mask;
    }
    const size_t words = rw_grammar_mask_words(v->n);
    uint32_t *m = calloc(words, sizeof *m);
    if (!m) return NULL;
    bool p0 = false;
    if (s > 0 && plain_closed(g, s)) { /* inside a string: all plain text, then the rest of the trie */
        memcpy(m, v->plain_mask, words * sizeof *m);
        p0 = true;
    }
    if (s > 0 && !walk(g, v, 0, s, m, p0)) {
        free(m);
        return NULL;
    }
    g->masks_computed++;
    if (g->cache_bytes + words * sizeof *m <= MASK_CACHE_MAX) {
        g->sets[s].mask = m;
        g->cache_bytes += words * sizeof *m;
        return m;
    }
    /* over the cache budget: the caller's copy is the only one; keep the
     * last one in state 0's slot (never used as a real mask) */
    free(g->sets[0].mask);
    g->sets[0].mask = m;
    return m;
}

/* ---- the work budget ---- */

/* Starts an operation (a mask, an accept): its limit is budget_mask units
 * from here, or what is left of the request's budget when that is less. */
static void op_begin(rw_grammar *g) {
    g->pre_state = -1; /* a prefetched mask is for the operation right after it only */
    g->over_budget = false;
    g->over_total = false;
    g->spend_limit = INT64_MAX;
    if (g->budget_mask > 0) g->spend_limit = g->spent + g->budget_mask;
    if (g->budget_total > 0 && g->total_from + g->budget_total < g->spend_limit) {
        g->spend_limit = g->total_from + g->budget_total;
        g->over_total = true; /* the request's budget is the one that binds */
    }
}

/* The admission check: the token masks of the start state and of the states
 * the compile-time probe found with the most parser stacks (each reachable
 * at a token boundary when the vocabulary has a token per byte, as
 * byte-level BPE ones do), each within budget_mask. Its masks stay cached;
 * its work is not the request's. */
#define PROBE_MASKS 12

rw_status rw_grammar_set_budget(rw_grammar *g, const rw_grammar_vocab *v, int64_t per_mask, int64_t per_request,
                                rw_error *err) {
    g->budget_mask = per_mask > 0 ? per_mask : 0;
    g->budget_total = per_request > 0 ? per_request : 0;
    if (v) {
        if (g->vocab && g->vocab != v)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: already bound to another vocabulary");
        g->vocab = v;
        const int64_t keep_total = g->budget_total;
        g->budget_total = 0; /* only the per-mask budget at admission */
        int n_masks = 0;
        for (int k = -1; k < g->n_probed && n_masks < PROBE_MASKS; k++) {
            const int32_t s = k < 0 ? g->start : g->probed[k];
            if (k >= 0 && s == g->start) continue;
            op_begin(g);
            n_masks++;
            if (!rw_grammar__mask(g, v, s)) {
                rw_error e = {0};
                const rw_status st = rw_grammar__fail(g, &e);
                g->budget_total = keep_total;
                if (st != RW_ERR_INVALID_ARG || !g->over_budget) return rw_errorf(err, st, "%s", e.msg);
                return rw_errorf(err, st,
                                 "grammar: refused: a token mask %s takes more than %lld work units, the budget of "
                                 "one mask (the grammar is too ambiguous for this vocabulary: simplify its "
                                 "repetitions and overlapping alternatives)",
                                 k < 0 ? "at the start" : "near the start", (long long)g->budget_mask);
            }
        }
        g->budget_total = keep_total;
    }
    g->total_from = g->spent;
    return RW_OK;
}

rw_grammar_stats rw_grammar_get_stats(const rw_grammar *g) {
    return (rw_grammar_stats){.work = g->spent,
                              .n_stacks = g->n_st,
                              .n_sets = g->n_sets,
                              .masks_computed = g->masks_computed,
                              .masks_cached = g->masks_cached,
                              .cache_bytes = g->cache_bytes};
}

/* ---- the matcher ---- */

struct rw_grammar_matcher {
    rw_grammar *g;             /* borrowed */
    const rw_grammar_vocab *v; /* borrowed */
    int32_t *hist;             /* hist[k]: the state after k steps; owned */
    int64_t n, cap;            /* steps taken; hist has n + 1 entries */
};

rw_status rw_grammar_matcher_new(rw_grammar *g, const rw_grammar_vocab *v, rw_grammar_matcher **out, rw_error *err) {
    *out = NULL;
    if (v && g->vocab && g->vocab != v)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: already bound to another vocabulary");
    rw_grammar_matcher *m = calloc(1, sizeof *m);
    if (m) m->hist = malloc(64 * sizeof *m->hist);
    if (!m || !m->hist) {
        free(m);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    if (v) g->vocab = v;
    m->g = g;
    m->v = v;
    m->cap = 64;
    m->hist[0] = g->start;
    *out = m;
    return RW_OK;
}

void rw_grammar_matcher_free(rw_grammar_matcher *m) {
    if (!m) return;
    free(m->hist);
    free(m);
}

static bool push_state(rw_grammar_matcher *m, int32_t s, rw_error *err) {
    if (m->n + 2 > m->cap) {
        int32_t *h = realloc(m->hist, (size_t)m->cap * 2 * sizeof *h);
        if (!h) return rw_errorf(err, RW_ERR_NOMEM, "out of memory"), false;
        m->hist = h;
        m->cap *= 2;
    }
    m->hist[++m->n] = s;
    return true;
}

bool rw_grammar_matcher_accept_bytes(rw_grammar_matcher *m, const char *bytes, size_t n, rw_error *err) {
    int32_t s = m->hist[m->n];
    op_begin(m->g);
    for (size_t i = 0; i < n && s > 0; i++) s = rw_grammar__step(m->g, s, (uint8_t)bytes[i]);
    if (s < 0) return rw_grammar__fail(m->g, err), false;
    if (s == 0) return false;
    return push_state(m, s, err);
}

bool rw_grammar_matcher_accept(rw_grammar_matcher *m, int32_t id, rw_error *err) {
    if (!m->v || id < 0 || id >= m->v->n || !m->v->allowed[id]) return false;
    const int64_t a = m->v->off[id], b = m->v->off[id + 1];
    if (a == b) return false;
    return rw_grammar_matcher_accept_bytes(m, m->v->pool + a, (size_t)(b - a), err);
}

int64_t rw_grammar_matcher_n_steps(const rw_grammar_matcher *m) { return m->n; }

void rw_grammar_matcher_rewind(rw_grammar_matcher *m, int64_t n_keep) {
    if (n_keep >= 0 && n_keep < m->n) m->n = n_keep;
}

bool rw_grammar_matcher_can_end(const rw_grammar_matcher *m) { return rw_grammar__state_can_end(m->g, m->hist[m->n]); }

bool rw_grammar_matcher_must_end(const rw_grammar_matcher *m) {
    const rw_gstate *s = &m->g->sets[m->hist[m->n]];
    return s->len == 1 && m->g->set_pool[s->off] == 0;
}

bool rw_grammar_matcher_mask_ready(const rw_grammar_matcher *m) {
    return !m->v || m->g->sets[m->hist[m->n]].mask != NULL;
}

void rw_grammar_matcher_prefetch(rw_grammar_matcher *m) {
    rw_grammar *g = m->g;
    const int32_t s = m->hist[m->n];
    if (!m->v || g->sets[s].mask) return;
    op_begin(g);
    const uint32_t *r = rw_grammar__mask(g, m->v, s);
    if (r && r == g->sets[s].mask) return; /* cached: fill_mask finds it */
    g->pre_state = s;
    g->pre_failed = r == NULL;
    g->pre_over_budget = g->over_budget;
    g->pre_over_total = g->over_total;
}

rw_status rw_grammar_matcher_fill_mask(rw_grammar_matcher *m, uint32_t *mask, rw_error *err) {
    if (!m->v) return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: a matcher without a vocabulary has no masks");
    rw_grammar *g = m->g;
    const int32_t s = m->hist[m->n];
    const uint32_t *src;
    if (g->pre_state == s && s > 0) { /* rw_grammar_matcher_prefetch did this operation */
        g->pre_state = -1;
        g->over_budget = g->pre_over_budget;
        g->over_total = g->pre_over_total;
        src = g->pre_failed ? NULL : g->sets[0].mask;
    } else {
        op_begin(g);
        src = rw_grammar__mask(g, m->v, s);
    }
    if (!src) return rw_grammar__fail(m->g, err);
    memcpy(mask, src, rw_grammar_mask_words(m->v->n) * sizeof *mask);
    return RW_OK;
}

void rw_grammar_apply_mask(const uint32_t *mask, float *logits, int32_t n_vocab, const int32_t *keep, int n_keep) {
    float saved[16];
    int ns = n_keep < 16 ? n_keep : 16;
    for (int i = 0; i < ns; i++) saved[i] = keep[i] >= 0 && keep[i] < n_vocab ? logits[keep[i]] : 0.0f;
    for (int32_t w = 0; w < (n_vocab + 31) / 32; w++) {
        uint32_t bits = mask[w];
        if (bits == 0xFFFFFFFFu) continue;
        int32_t base = w * 32, lim = n_vocab - base < 32 ? n_vocab - base : 32;
        if (bits == 0) { /* the common case outside strings: a straight store loop the compiler vectorises */
            for (int32_t j = 0; j < lim; j++) logits[base + j] = -INFINITY;
            continue;
        }
        for (int32_t j = 0; j < lim; j++)
            if (!((bits >> j) & 1)) logits[base + j] = -INFINITY;
    }
    for (int i = 0; i < ns; i++)
        if (keep[i] >= 0 && keep[i] < n_vocab) logits[keep[i]] = saved[i];
}
