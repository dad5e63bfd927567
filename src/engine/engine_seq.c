/* engine_seq.c - where a request gets its sequence and gives it back.
 *
 * This is the one place the prefix cache plugs into: eng_seq_for_prompt may
 * return a sequence that already holds a prefix of the prompt (n_cached
 * tokens), and eng_seq_release may keep a finished sequence for later
 * prompts. There is no prefix cache yet: every request gets a fresh empty
 * sequence (n_cached = 0) and sequences are freed when their request ends. */
#include "engine/engine_int.h"

rw_status eng_seq_for_prompt(rw_engine *e, const int32_t *prompt, int64_t n, rw_model_seq **seq, int64_t *n_cached,
                             rw_error *err) {
    (void)prompt;
    (void)n;
    *n_cached = 0;
    return rw_model_seq_new(e->m, e->cfg.kv_type, e->cfg.n_ctx, seq, err);
}

void eng_seq_release(rw_engine *e, rw_model_seq *seq, const int32_t *tokens, int64_t n_tokens) {
    (void)e;
    (void)tokens;
    (void)n_tokens;
    rw_model_seq_free(seq);
}
