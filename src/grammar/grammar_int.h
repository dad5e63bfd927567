/* grammar_int.h - the compiled grammar and the matcher's state (private to
 * src/grammar).
 *
 * A compiled grammar is a byte-level context-free grammar: rules, each a
 * list of alternatives, each a sequence of elements ending with END. An
 * element is a terminal (a set of bytes: GBNF literals and character
 * classes become UTF-8 byte sequences) or a reference to a rule. All the
 * elements live in one array (elems), so a position in the grammar is an
 * index into it.
 *
 * Parser state (the pushdown automaton of llama.cpp's grammar sampler, over
 * bytes): a stack is a position to match next plus the stack to return to
 * when its rule ends; a state is the set of stacks alive after the bytes
 * read so far. Both are hash-consed: a stack is the node (pos, parent) with
 * a unique id (node 0 = "the root rule has ended"), a state is a sorted set
 * of stack ids with a unique id (set 0 = dead: no stack survived). So a
 * state is one integer, rewinding is forgetting integers, and everything
 * computed for a state - its byte transitions, its token mask - is cached
 * under that integer and stays right forever (the grammar never changes).
 *
 * Every stack in a state has a terminal on top (expansion through rule
 * references and rule ends happens eagerly, with tail calls not pushing a
 * return frame, so x* as "r ::= x r |" keeps a bounded stack).
 */
#ifndef RW_GRAMMAR_GRAMMAR_INT_H
#define RW_GRAMMAR_GRAMMAR_INT_H

#include "grammar/grammar.h"

/* The most parser stacks one grammar makes (12 bytes each plus their hash
 * slots): far more than a JSON schema's output needs, reached within a few
 * seconds by a grammar built to blow up (fuzz_gbnf found one). */
#define RW_GRAMMAR_MAX_STACKS       (1 << 17)
/* The most parser stacks one state may hold at admission (match.c's probe):
 * a state's token mask walks the vocabulary through all of them, so past a
 * few thousand one mask could cost a neighbour's decode step. anyOf 30 x 30
 * objects behind a key holds 2,700 and its masks cost under 1 ms on a
 * 151,936-token vocabulary (rewind bench grammar --schema). */
#define RW_GRAMMAR_MAX_STATE_STACKS 4096

typedef struct {
    uint64_t w[4];
} rw_gbytes; /* a set of bytes */

static inline bool rw_gbytes_has(const rw_gbytes *s, unsigned b) { return (s->w[b >> 6] >> (b & 63)) & 1; }
static inline void rw_gbytes_add(rw_gbytes *s, unsigned b) { s->w[b >> 6] |= 1ull << (b & 63); }

enum { RW_GEL_END = 0, RW_GEL_TERM = 1, RW_GEL_REF = 2 };
typedef struct {
    int32_t type; /* RW_GEL_* */
    int32_t v;    /* TERM: index into bytes[]; REF: rule index */
} rw_gelem;

/* One parser state (see the file head). */
typedef struct {
    int32_t off, len; /* its stack ids: set_pool[off .. off + len), ascending */
    int32_t *trans;   /* [256] next state per byte, -1 = not computed yet; owned, NULL until needed */
    uint32_t *mask;   /* allowed tokens (vocab words); owned, NULL until computed */
    rw_gbytes loop;   /* bytes b with trans[b] == this state (valid when full) */
    bool full;        /* every transition computed, loop valid */
    int8_t plain;     /* -1 unknown, 1: "inside a JSON-like string" (see match.c's plain_closed), 0 not */
} rw_gstate;

struct rw_grammar {
    /* the rules (immutable after compilation) */
    rw_gelem *elems; /* owned */
    int32_t n_elems;
    rw_gbytes *bytes; /* terminals; owned */
    int32_t n_bytes;
    int32_t n_rules;
    int32_t *alt_off;  /* [n_rules + 1]: rule r's alternatives start at alts[alt_off[r] .. alt_off[r+1]) */
    int32_t *alts;     /* positions in elems where an alternative starts; owned */
    char **rule_names; /* owned (messages, debugging) */
    int32_t root;

    /* stacks: node i is (st_pos[i], st_par[i]); node 0 is the end of the root;
     * at most RW_GRAMMAR_MAX_STACKS (too_many_stacks below) */
    int32_t *st_pos, *st_par;
    int32_t n_st, cap_st;
    int32_t *st_hash; /* open addressing, -1 empty; cap_st_hash a power of two */
    int32_t cap_st_hash;
    uint32_t *stamp; /* per node: closure visit marks */
    uint32_t cur_stamp;
    /* A grammar that keeps making stacks (an ambiguous or recursive one,
     * e.g. rules whose every alternative may start with the other's) could
     * take any time and memory: past RW_GRAMMAR_MAX_STACKS no stack is
     * made, and the step, mask or compile that needed one fails with
     * rw_grammar__fail's message. */
    bool too_many_stacks;
    /* Work units (grammar.h's budget): spent counts them (from compilation
     * on, or from rw_grammar_set_budget); an operation (a mask, an accept)
     * that takes spent past spend_limit fails with over_budget set, which
     * rw_grammar__fail reports. budget_mask / budget_total: the budgets
     * rw_grammar_set_budget gave (0: none); total_from: spent when it did. */
    int64_t spent, spend_limit;
    int64_t budget_mask, budget_total, total_from;
    bool over_budget, over_total;
    /* rw_grammar_matcher_prefetch's result for state pre_state (-1: none),
     * for the next fill_mask there: failed (with its over_* flags), or a
     * mask the full cache did not keep (then in sets[0].mask) */
    int32_t pre_state;
    bool pre_failed, pre_over_budget, pre_over_total;

    /* states */
    rw_gstate *sets;
    int32_t n_sets, cap_sets;
    int32_t *set_pool;
    int64_t n_pool, cap_pool;
    int32_t *set_hash;
    int32_t cap_set_hash;
    int32_t start; /* the state before any byte */
    /* the states rw_grammar__probe expanded, in its order (most stacks first) */
    int32_t probed[256];
    int n_probed;

    /* scratch of the closure */
    int32_t *work, *out;
    int32_t cap_work, cap_out;

    const rw_grammar_vocab *vocab; /* the vocabulary the masks are for (the first matcher's) */
    size_t cache_bytes;            /* masks + transition tables */
    int64_t masks_computed, masks_cached;
};

/* The vocabulary as a trie in preorder: node 0 is the root (no byte); the
 * children of node n are n + 1, then end of that child, ... up to end(n).
 * ttok lists token ids in trie order: node n's own tokens (those whose bytes
 * end there) are ttok[tok_lo .. tok_lo + n_own), its whole subtree's
 * ttok[tok_lo .. sub_end). */
typedef struct {
    int32_t end;
    int32_t tok_lo, n_own, sub_end;
    int32_t bm; /* index into sub_bytes (the bytes below this node), -1 for small subtrees */
    uint8_t byte;
    uint8_t u8;        /* UTF-8 decoder state after this node's bytes read from a character boundary (RW_U8_*) */
    uint8_t plain;     /* 1: every path below is valid UTF-8 from u8 on, with no '"', '\' or control byte */
    uint8_t rootplain; /* 1: plain and so is the path from the root: every token below is in plain_mask */
} rw_gtrie;

/* A UTF-8 decoder: the state after some bytes (0 = at a character boundary). */
enum { RW_U8_BOUNDARY = 0, RW_U8_NEED1, RW_U8_NEED2, RW_U8_NEED3, RW_U8_E0, RW_U8_ED, RW_U8_F0, RW_U8_F4, RW_U8_BAD };
static inline unsigned rw_u8_next(unsigned u, unsigned b) {
    switch (u) {
    case RW_U8_BOUNDARY:
        if (b < 0x80) return RW_U8_BOUNDARY;
        if (b >= 0xC2 && b <= 0xDF) return RW_U8_NEED1;
        if (b == 0xE0) return RW_U8_E0;
        if (b == 0xED) return RW_U8_ED;
        if (b >= 0xE1 && b <= 0xEF) return RW_U8_NEED2;
        if (b == 0xF0) return RW_U8_F0;
        if (b >= 0xF1 && b <= 0xF3) return RW_U8_NEED3;
        if (b == 0xF4) return RW_U8_F4;
        return RW_U8_BAD;
    case RW_U8_NEED1: return b >= 0x80 && b <= 0xBF ? RW_U8_BOUNDARY : RW_U8_BAD;
    case RW_U8_NEED2: return b >= 0x80 && b <= 0xBF ? RW_U8_NEED1 : RW_U8_BAD;
    case RW_U8_NEED3: return b >= 0x80 && b <= 0xBF ? RW_U8_NEED2 : RW_U8_BAD;
    case RW_U8_E0: return b >= 0xA0 && b <= 0xBF ? RW_U8_NEED1 : RW_U8_BAD;
    case RW_U8_ED: return b >= 0x80 && b <= 0x9F ? RW_U8_NEED1 : RW_U8_BAD;
    case RW_U8_F0: return b >= 0x90 && b <= 0xBF ? RW_U8_NEED2 : RW_U8_BAD;
    case RW_U8_F4: return b >= 0x80 && b <= 0x8F ? RW_U8_NEED2 : RW_U8_BAD;
    default: return RW_U8_BAD;
    }
}
/* bytes a JSON string cannot hold raw: '"', '\', controls, DEL */
static inline bool rw_u8_special(unsigned b) { return b < 0x20 || b == '"' || b == '\\' || b == 0x7F; }

struct rw_grammar_vocab {
    int32_t n;
    char *pool;       /* every piece, concatenated; owned */
    int64_t *off;     /* [n + 1]: token i is pool[off[i] .. off[i+1]); owned */
    uint8_t *allowed; /* [n]: 0 for NULL pieces; owned */
    rw_gtrie *nodes;  /* owned */
    int32_t n_nodes;
    int32_t *ttok; /* owned */
    rw_gbytes *sub_bytes;
    int32_t n_sub_bytes;
    /* tokens whose bytes are plain string text (valid UTF-8 from a character
     * boundary, possibly cut inside the last character, no '"', '\' or
     * control byte): what any "inside a string" state allows at least; owned */
    uint32_t *plain_mask;
};

/* match.c */
/* Counts n work units; false (over_budget set) once the operation's limit is passed. */
static inline bool rw_grammar__spend(rw_grammar *g, int64_t n) {
    if ((g->spent += n) <= g->spend_limit) return true;
    g->over_budget = true;
    return false;
}
rw_status rw_grammar__init_runtime(rw_grammar *g, rw_error *err);
/* The state after byte b from state s (0 = dead); -1 only on out of memory. */
int32_t rw_grammar__step(rw_grammar *g, int32_t s, unsigned b);
/* The error for a step, mask or compile that failed: the stack limit
 * (RW_ERR_INVALID_ARG) if g reached it, else out of memory. */
/* Explores the states near the start and refuses a grammar whose parser
 * stacks explode there (match.c). */
rw_status rw_grammar__probe(rw_grammar *g, rw_error *err);
rw_status rw_grammar__fail(const rw_grammar *g, rw_error *err);
/* Computes (or reuses) state s's token mask; NULL on out of memory. */
const uint32_t *rw_grammar__mask(rw_grammar *g, const rw_grammar_vocab *v, int32_t s);
static inline bool rw_grammar__state_can_end(const rw_grammar *g, int32_t s) {
    return s > 0 && g->sets[s].len > 0 && g->set_pool[g->sets[s].off] == 0;
}

#endif
