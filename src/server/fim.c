/* fim.c - the fill-in-the-middle prompt: the file's own FIM tokens around
 * the code, laid out as llama-server lays it out (api_native.c describes the
 * layout and serves /infill with it; prompt.c wraps a /v1/completions
 * prompt that has a suffix). Token lists it builds are malloc'd (the
 * caller frees .v). */
#include <stdlib.h>
#include <string.h>

#include "server/api_int.h"

void rw_server__tok_push(rw_server__tok_list *t, const int32_t *ids, size_t n) {
    if (t->oom || !n) return;
    if (t->n + n > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->n + n) cap *= 2;
        int32_t *p = realloc(t->v, cap * sizeof *p);
        if (!p) {
            t->oom = true;
            return;
        }
        t->v = p;
        t->cap = cap;
    }
    memcpy(t->v + t->n, ids, n * sizeof *ids);
    t->n += n;
}

void rw_server__tok_push1(rw_server__tok_list *t, int32_t id) { rw_server__tok_push(t, &id, 1); }

/* Plain text: no BOS, control tokens' texts stay text. */
bool rw_server__tok_push_text(rw_server__model *m, rw_server__tok_list *t, const char *text, size_t len,
                              rw_server__error *e) {
    if (!len) return true;
    int32_t *ids = NULL;
    size_t n = 0;
    rw_error err = {0};
    if (rw_tokenize(m->tok, text, len, false, false, &ids, &n, &err)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL, "%s", err.msg);
        return false;
    }
    rw_server__tok_push(t, ids, n);
    free(ids);
    return true;
}

bool rw_server__fim_has(const rw_server__model *m) {
    return rw_tokenizer_fim(m->tok, RW_FIM_PRE) >= 0 && rw_tokenizer_fim(m->tok, RW_FIM_SUF) >= 0 &&
           rw_tokenizer_fim(m->tok, RW_FIM_MID) >= 0;
}

bool rw_server__fim_none(rw_server__error *e, const char *param) {
    rw_server__errorf(e, 400, "invalid_request_error", "fim_not_supported", param,
                      "This model has no fill-in-the-middle tokens (tokenizer.ggml.fim_pre/suf/mid_token_id, or "
                      "tokens such as <|fim_prefix|> <|fim_suffix|> <|fim_middle|> in its vocabulary), so it "
                      "cannot fill in the middle: use a code model trained for it (Qwen2.5-Coder, StarCoder, "
                      "CodeLlama...)");
    return false;
}

/* The layout above into *out. avail: the tokens extra, prefix and suffix
 * may take together (< 0: no limit); *truncated when something was cut. */
void rw_server__fim_assemble(rw_server__model *m, const rw_server__tok_list *extra, const rw_server__tok_list *pre,
                             const rw_server__tok_list *prompt, const rw_server__tok_list *suf, int64_t avail,
                             rw_server__tok_list *out, bool *truncated) {
    size_t n_extra = extra ? extra->n : 0, n_pre = pre->n, n_suf = suf->n;
    if (avail >= 0 && (int64_t)(n_extra + n_pre + n_suf) > avail) {
        const size_t room = (size_t)avail, pre_room = room - room / 4;
        size_t pre_take = n_pre < pre_room ? n_pre : pre_room;
        size_t suf_take = n_suf < room - pre_take ? n_suf : room - pre_take;
        if (pre_take < n_pre) pre_take = n_pre < room - suf_take ? n_pre : room - suf_take; /* the suffix left room */
        n_extra = n_extra < room - pre_take - suf_take ? n_extra : room - pre_take - suf_take;
        n_pre = pre_take;
        n_suf = suf_take;
        *truncated = true;
    }
    if (rw_tokenizer_add_bos(m->tok) && rw_tokenizer_bos(m->tok) >= 0)
        rw_server__tok_push1(out, rw_tokenizer_bos(m->tok));
    if (n_extra)
        rw_server__tok_push(out, extra->v + extra->n - n_extra, n_extra); /* the newest context: nearest the code */
    rw_server__tok_push1(out, rw_tokenizer_fim(m->tok, RW_FIM_PRE));
    if (n_pre)
        rw_server__tok_push(out, pre->v + pre->n - n_pre, n_pre); /* the end of the prefix: where the cursor is */
    if (prompt) rw_server__tok_push(out, prompt->v, prompt->n);
    rw_server__tok_push1(out, rw_tokenizer_fim(m->tok, RW_FIM_SUF));
    rw_server__tok_push(out, suf->v, n_suf);
    rw_server__tok_push1(out, rw_tokenizer_fim(m->tok, RW_FIM_MID));
}

bool rw_server__fim_wrap(rw_server__model *m, rw_server__request *r, const char *suffix, size_t suffix_len,
                         rw_server__error *e) {
    if (!rw_server__fim_has(m)) return rw_server__fim_none(e, "suffix");
    rw_server__tok_list pre = {.v = r->prompt, .n = (size_t)r->n_prompt}, suf = {0}, out = {0};
    bool truncated = false;
    if (!rw_server__tok_push_text(m, &suf, suffix, suffix_len, e)) return false;
    rw_server__fim_assemble(m, NULL, &pre, NULL, &suf, -1, &out, &truncated);
    free(suf.v);
    if (suf.oom || out.oom) {
        free(out.v);
        rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    free(r->prompt);
    r->prompt = out.v;
    r->n_prompt = (int64_t)out.n;
    return true;
}
