/* grammar.h - grammar-constrained decoding: a context-free grammar over
 * bytes, matched token by token against a vocabulary.
 *
 * Three objects, three lifetimes:
 *
 *   rw_grammar          a compiled grammar (from GBNF text, or from a JSON
 *                       schema through its GBNF). Immutable rules plus the
 *                       caches the matchers fill (parser states, byte
 *                       transitions, token masks), so one grammar serves one
 *                       thread at a time: the engine gives each request its
 *                       own.
 *   rw_grammar_vocab    the vocabulary as a byte trie (built once per
 *                       tokenizer, read-only afterwards, shareable between
 *                       threads).
 *   rw_grammar_matcher  one generation's position in the grammar: accepts
 *                       tokens, rewinds to any earlier token count (a
 *                       speculative rejection, a rewind of the sequence),
 *                       fills the mask of the tokens allowed next.
 *
 * Input syntax: llama.cpp's GBNF (grammars/README.md there), over UTF-8:
 *
 *   rule-name ::= alternative ("|" alternative)*      # comment
 *   elements: "literal" with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes,
 *   [a-z0-9_] / [^"\\] character classes (code points; ranges; negation),
 *   . (any code point), rule references, ( groups ), and the repetitions
 *   x* x+ x? x{m} x{m,} x{m,n}.  Rule names are [a-zA-Z0-9-]+; the start rule
 *   is "root". A rule may be defined in several lines (their alternatives
 *   add up). Left recursion (a rule that can reach itself without reading a
 *   byte) is refused, as every undefined rule is.
 *
 * Matching is over bytes: literals and classes become UTF-8 byte sequences,
 * so a token that ends inside a multi-byte character is fine.
 *
 * JSON Schema: rw_grammar_schema_to_gbnf writes GBNF for the subset listed
 * in docs/structured-outputs.md (types, properties/required/
 * additionalProperties, min/maxProperties, enum/const, anyOf/oneOf, allOf
 * (merged), not and if/then/else where the negation is a schema, $ref/$defs
 * with recursion, items/prefixItems, minItems/maxItems, minLength/maxLength,
 * pattern (a regex subset) and formats date/time/date-time/uuid/email/uri,
 * with length limits too, integer and number bounds as exact decimal
 * ranges) with bounded whitespace and digit runs.
 *
 * Composition (e.g. a forced tool call): generate the schema's rules under a
 * prefix, then write the surrounding GBNF yourself:
 *
 *   rw_grammar_schema_to_gbnf(schema, len, &(rw_schema_opts){.name = "args"}, &gbnf, &err);
 *   -> gbnf defines "args ::= ..." plus helper rules all named "args-..."
 *   text = "root ::= \"<tool_call>\\n{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": \" args \"}\\n</tool_call>\"\n" + gbnf
 *   rw_grammar_compile(text, strlen(text), NULL, &g, &err);
 *
 * Errors are RW_ERR_INVALID_ARG (or RW_ERR_UNSUPPORTED for a schema keyword
 * we do not handle) with a one-line message naming the place: "gbnf line 3
 * col 14: ..." or "schema at /properties/age: ..." (a JSON pointer).
 */
#ifndef RW_GRAMMAR_GRAMMAR_H
#define RW_GRAMMAR_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

typedef struct rw_grammar rw_grammar;
typedef struct rw_grammar_vocab rw_grammar_vocab;
typedef struct rw_grammar_matcher rw_grammar_matcher;

/* ---- compiling ---- */

/* The deepest nesting any compiler here follows: groups in GBNF and in a
 * schema's regex pattern, subschemas (and $ref chains) in a JSON schema. Real
 * grammars and schemas stay far below it; past it the input is refused with
 * RW_ERR_INVALID_ARG naming the limit, since each level is a C stack frame
 * and untrusted requests must not be able to exhaust a worker's stack. */
#define RW_GRAMMAR_MAX_NESTING 256

/* Compiles GBNF text (len bytes, need not be NUL-terminated). root names the
 * start rule (NULL: "root"). The caller frees *out with rw_grammar_free. */
rw_status rw_grammar_compile(const char *gbnf, size_t len, const char *root, rw_grammar **out, rw_error *err);
void rw_grammar_free(rw_grammar *g); /* NULL is fine */

typedef struct {
    /* The rule the schema becomes; every helper rule is named "<name>-...".
     * NULL: "root". Must be [a-zA-Z0-9-]+. */
    const char *name;
    /* Whitespace allowed between JSON tokens: 0 = the default ("", " ", or
     * a newline and up to 20 spaces/tabs of indent); < 0 = none (compact
     * JSON); n > 0 = up to n bytes of [ \t\n]. */
    int max_ws;
} rw_schema_opts;

/* JSON schema text -> GBNF text (malloc'd, NUL-terminated; the caller frees
 * *gbnf). opts may be NULL. A schema of `true`, `{}` or {"type":"object"}
 * with nothing else gives any JSON value / any object, which is
 * response_format json_object (rw_grammar_json_object_gbnf). */
rw_status rw_grammar_schema_to_gbnf(const char *schema, size_t len, const rw_schema_opts *opts, char **gbnf,
                                    rw_error *err);
/* GBNF for any JSON object (OpenAI's json_object mode), rules under opts'
 * name as above. */
rw_status rw_grammar_json_object_gbnf(const rw_schema_opts *opts, char **gbnf, rw_error *err);

/* A GBNF string literal (with its quotes) matching exactly the n bytes of s
 * (quotes, backslashes and control bytes escaped), for composing grammars:
 * e.g. a tool's name. malloc'd, NUL-terminated; the caller frees *out. */
rw_status rw_grammar_gbnf_literal(const char *s, size_t n, char **out, rw_error *err);

/* Shortcut: rw_grammar_schema_to_gbnf then rw_grammar_compile. */
rw_status rw_grammar_compile_schema(const char *schema, size_t len, rw_grammar **out, rw_error *err);

/* ---- the vocabulary ---- */

/* A vocabulary of n tokens: token i stands for the bytes pieces[i][0..
 * lens[i]); pieces[i] = NULL marks a token the grammar never allows (control
 * and other special tokens; end-of-generation is the caller's: see
 * rw_grammar_matcher_can_end). Copies what it needs. Free with
 * rw_grammar_vocab_free. */
rw_status rw_grammar_vocab_new(int32_t n, const char *const *pieces, const size_t *lens, rw_grammar_vocab **out,
                               rw_error *err);
/* The same from a tokenizer: each token's rw_token_to_piece bytes; control
 * tokens excluded (user-defined added tokens such as <tool_call> stay: their
 * text is their bytes). */
rw_status rw_grammar_vocab_from_tokenizer(const rw_tokenizer *tok, rw_grammar_vocab **out, rw_error *err);
/* The same with the control tokens controls[0..n_controls) as their text
 * (harmony's <|channel|>, <|message|>): a grammar's literal of that text
 * can then be written by the control token itself, for an output whose text
 * renders control tokens. Other control tokens stay out. */
rw_status rw_grammar_vocab_with_controls(const rw_tokenizer *tok, const int32_t *controls, int n_controls,
                                         rw_grammar_vocab **out, rw_error *err);
void rw_grammar_vocab_free(rw_grammar_vocab *v); /* NULL is fine */
int32_t rw_grammar_vocab_size(const rw_grammar_vocab *v);

/* ---- matching ---- */

/* A matcher at the start of g over v (both borrowed: they must outlive it;
 * v may be NULL to match bytes only - no tokens, no masks;
 * g is touched - its caches - by every call, so one thread at a time per
 * grammar). Free with rw_grammar_matcher_free. */
rw_status rw_grammar_matcher_new(rw_grammar *g, const rw_grammar_vocab *v, rw_grammar_matcher **out, rw_error *err);
void rw_grammar_matcher_free(rw_grammar_matcher *m); /* NULL is fine */

/* Accepts token id if the grammar allows its bytes next (true; the matcher
 * moves on one token) or leaves the matcher as it was (false: the token is
 * not allowed, or is a NULL piece, or out of range). ERR_NOMEM is the only
 * status it can fail with, and is reported as false with *err set when err
 * is given. */
bool rw_grammar_matcher_accept(rw_grammar_matcher *m, int32_t id, rw_error *err);
/* The same for raw bytes (counts as one step for rewinding). */
bool rw_grammar_matcher_accept_bytes(rw_grammar_matcher *m, const char *bytes, size_t n, rw_error *err);
/* Steps accepted since the start. */
int64_t rw_grammar_matcher_n_steps(const rw_grammar_matcher *m);
/* Back to the state after the first n_keep steps (n_keep <= n_steps). */
void rw_grammar_matcher_rewind(rw_grammar_matcher *m, int64_t n_keep);

/* True when what was accepted is a complete sentence of the grammar (the
 * generation may end here: end-of-generation tokens are allowed). */
bool rw_grammar_matcher_can_end(const rw_grammar_matcher *m);
/* True when nothing may follow: the sentence is complete and no byte can
 * extend it. */
bool rw_grammar_matcher_must_end(const rw_grammar_matcher *m);

/* Words of a token bitmask: (n + 31) / 32 uint32 words, bit (id & 31) of
 * word id >> 5 set when token id is allowed. */
static inline size_t rw_grammar_mask_words(int32_t n_vocab) { return ((size_t)n_vocab + 31) / 32; }

/* Fills mask (rw_grammar_mask_words(vocab size) words) with the tokens
 * allowed next (end-of-generation tokens are NOT set: the caller adds them
 * when rw_grammar_matcher_can_end). ERR_NOMEM only. */
rw_status rw_grammar_matcher_fill_mask(rw_grammar_matcher *m, uint32_t *mask, rw_error *err);

/* Whether the mask at the matcher's position is computed already (cached:
 * rw_grammar_matcher_fill_mask is a copy). */
bool rw_grammar_matcher_mask_ready(const rw_grammar_matcher *m);
/* Computes the mask at the matcher's position ahead of
 * rw_grammar_matcher_fill_mask, on another thread if the caller likes (the
 * engine does it while the model's forward pass runs): the next operation
 * on the grammar, if it is that fill_mask, takes the result (the same
 * mask, or the same error, as computing it then), and any other operation
 * forgets it. Touches the grammar: no other call on it (or on another
 * matcher of it) meanwhile. */
void rw_grammar_matcher_prefetch(rw_grammar_matcher *m);

/* Sets logits[i] = -INFINITY for every token the mask does not allow, except
 * the n_keep ids in keep (end-of-generation tokens, when can_end). */
void rw_grammar_apply_mask(const uint32_t *mask, float *logits, int32_t n_vocab, const int32_t *keep, int n_keep);

/* ---- the work budget ----
 *
 * A token mask walks the vocabulary trie through the grammar's parser
 * states, building the states it meets for the first time; for most
 * grammars and every JSON schema that is well under a millisecond, but a
 * hand-written grammar of ambiguous repeats can make one mask build
 * thousands of states. Work is counted in units: a parser stack expanded
 * (closure) or moved over a byte, a stack id of a new state, a trie node
 * visited; on a 151,936-token vocabulary a unit costs about 10 ns.
 *
 * per_mask bounds one operation (a mask, or an accepted token's steps),
 * per_request every operation from here on; 0 = no bound. Past either, the
 * operation fails (RW_ERR_INVALID_ARG naming the budget) and the matcher
 * stays where it was. With v (the vocabulary the matchers will use; g is
 * bound to it), the masks of the start state and of a few states near it
 * (those with the most parser stacks) are computed now, within per_mask
 * each, and a grammar whose mask does not fit is refused with
 * RW_ERR_INVALID_ARG before any token: the admission check. Their masks
 * stay cached; that work is not counted in per_request. */
#define RW_GRAMMAR_MASK_BUDGET    2000000LL   /* default per mask: ~20 ms; the dearest ordinary masks take 0.5M */
#define RW_GRAMMAR_REQUEST_BUDGET 500000000LL /* default per request: ~5 s of mask work */
rw_status rw_grammar_set_budget(rw_grammar *g, const rw_grammar_vocab *v, int64_t per_mask, int64_t per_request,
                                rw_error *err);

/* Counters for `rewind bench grammar` and tests: work units spent (from
 * compilation on), parser states, masks computed (cache misses) and served
 * from the cache. */
typedef struct {
    int64_t work;
    int64_t n_stacks, n_sets, masks_computed, masks_cached;
    size_t cache_bytes;
} rw_grammar_stats;
rw_grammar_stats rw_grammar_get_stats(const rw_grammar *g);

#endif
