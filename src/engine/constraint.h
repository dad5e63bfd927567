/* constraint.h - a grammar constraint on one generation (grammar/grammar.h),
 * in the terms of the engine and `rewind generate`: logit rows and token
 * ids.
 *
 * The mask goes first, before the whole sampler chain (logit bias,
 * penalties, top-k/top-p/min-p, temperature), as llama.cpp applies its
 * grammar: disallowed tokens get -inf, so the sampler's distribution is the
 * model's renormalised over what the grammar allows (and logprobs, computed
 * from the masked row, report that constrained distribution).
 *
 * End of generation: end-of-generation tokens are allowed exactly when the
 * grammar can end (whatever ignore_eos says: under a grammar the grammar
 * decides where the output ends), and only they are when nothing may follow.
 *
 * State: the tokens accepted so far (end-of-generation tokens are not
 * accepted: they end the output). Rewinding forgets the last ones exactly,
 * so a speculative step's drafts are checked on the side and forgotten. */
#ifndef RW_ENGINE_CONSTRAINT_H
#define RW_ENGINE_CONSTRAINT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

typedef struct rw_constraint rw_constraint;

/* Compiles the GBNF text (RW_ERR_INVALID_ARG with the compiler's message on
 * a bad grammar) for vocabulary v of tokenizer tok (both borrowed: they must
 * outlive it). The caller frees *out with rw_constraint_free. */
rw_status rw_constraint_new(const char *gbnf, const rw_grammar_vocab *v, const rw_tokenizer *tok,
                            rw_constraint **out, rw_error *err);
/* The same from the rule named root (NULL: "root"). */
rw_status rw_constraint_new_at(const char *gbnf, const char *root, const rw_grammar_vocab *v, const rw_tokenizer *tok,
                               rw_constraint **out, rw_error *err);
void rw_constraint_free(rw_constraint *c); /* NULL is fine */

/* Bounds the grammar's work (grammar.h's rw_grammar_set_budget: 0 = no
 * bound) and checks the masks near its start on the vocabulary within
 * per_mask: RW_ERR_INVALID_ARG naming the budget for a grammar that does
 * not fit. Call before any token. */
rw_status rw_constraint_set_budget(rw_constraint *c, int64_t per_mask, int64_t per_request, rw_error *err);

/* Whether the next rw_constraint_mask (no prefix) needs a mask computed;
 * rw_constraint_prefetch computes it ahead (grammar.h's
 * rw_grammar_matcher_prefetch: on any thread, while nothing else touches c). */
bool rw_constraint_mask_pending(const rw_constraint *c);
void rw_constraint_prefetch(rw_constraint *c);

/* The grammar holds only once the output has written text (a reasoning
 * block's close, "</think>"): until then every token but end-of-generation
 * is allowed (an answer must follow) and the tokens are only looked at.
 * Exact under rewind and on the side like the rest (a draft may cross the
 * point). text is copied; NULL or "" = from the start. render_special: the
 * output's text holds control tokens as their text (harmony's
 * "<|channel|>final<|message|>" is then text to wait for). */
rw_status rw_constraint_set_after(rw_constraint *c, const char *text, bool render_special, rw_error *err);

/* Masks row (n_vocab logits, in place) for the position after the accepted
 * tokens and then prefix[0..n) (not accepted: looked at on the side).
 * Returns false, leaving row unchanged, when prefix is not allowed or no
 * token may come after it; sets *err only on out of memory. */
bool rw_constraint_mask(rw_constraint *c, const int32_t *prefix, int n, float *row, rw_error *err);

/* Accepts a generated token. RW_ERR_INVALID_ARG if the grammar does not allow
 * it (the masks make that impossible for a sampled token). End-of-generation
 * tokens are accepted when the grammar can end, as nothing. */
rw_status rw_constraint_accept(rw_constraint *c, int32_t tok, rw_error *err);

/* Tokens accepted (end-of-generation ones not counted). */
int64_t rw_constraint_n_accepted(const rw_constraint *c);
void rw_constraint_rewind(rw_constraint *c, int64_t n_keep);

/* The grammar is complete here (it may end). */
bool rw_constraint_can_end(const rw_constraint *c);
/* The grammar is complete and nothing may follow. */
bool rw_constraint_must_end(const rw_constraint *c);

/* spec.h's constraint hook (rw_spec_mask_fn) for ctx = an rw_constraint. */
bool rw_constraint_mask_fn(void *ctx, const int32_t *prefix, int n, float *row);

#endif
