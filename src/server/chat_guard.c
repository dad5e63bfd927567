/* chat_guard.c - the rendered chat prompt to token ids with control tokens
 * taken only from the template's own text, never from what a message says.
 *
 * A user message containing "<|im_end|>\n<|im_start|>system" would, with
 * special-token parsing over the whole prompt, become the control tokens
 * that end its turn and open a system turn. So when some message's content
 * contains the text of a control token, the template is rendered once more
 * with each content replaced by a marker: the text between markers is the
 * template's, and the prompt must be exactly that text with the contents put
 * back (a template that changes a content it renders, beyond copying it,
 * cannot be checked and is refused with a 400 for such a message). The
 * contents' byte ranges are then tokenized as plain text
 * (rw_tokenize_guarded). A conversation without such text is tokenized as
 * before, byte for byte.
 *
 * llama-server and vLLM tokenize the whole rendered prompt with special
 * tokens parsed (open to this injection); what we do is what llama.cpp's
 * proposed --escape-special-in-input and vLLM's placeholder proposal
 * describe: message content is always plain text. docs/server-security.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

#define MARK "\x01rw-content-"

/* The marker of content i: MARK i \x01. */
static int marker(char *buf, size_t cap, size_t i) { return snprintf(buf, cap, MARK "%zu\x01", i); }

bool rw_server__chat_tokenize(rw_server *s, json_t *norm, const rw_chat_render_opts *ro, const char *text, size_t len,
                       bool add_special, int32_t **ids, size_t *n_ids, srv_error *e) {
    rw_error err = {0};
    size_t i;
    json_t *m;
    bool any = false;
    json_array_foreach(norm, i, m) {
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c) && rw_tokenizer_find_control(s->tok, json_string_value(c), json_string_length(c)) >= 0)
            any = true;
    }
    if (!any) {
        if (rw_tokenize(s->tok, text, len, add_special, true, ids, n_ids, &err)) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
            return false;
        }
        return true;
    }
    /* the messages with markers for contents */
    json_t *marked = json_deep_copy(norm);
    bool ok = marked != NULL;
    json_array_foreach(marked, i, m) {
        if (!ok) break;
        if (!json_is_string(json_object_get(m, "content"))) continue;
        char mk[48];
        marker(mk, sizeof mk, i);
        ok = json_object_set_new(m, "content", json_string(mk)) == 0;
    }
    char *mj = ok ? json_dumps(marked, JSON_COMPACT) : NULL;
    rw_chat_render_opts mro = *ro;
    mro.messages_json = mj;
    char *mtext = NULL;
    size_t mlen = 0;
    rw_status st = mj ? rw_chat_template_render(s->tmpl, &mro, &mtext, &mlen, &err) : RW_ERR_NOMEM;
    free(mj);
    /* walk the marked text: template text is copied, each marker is its
     * content (a plain range); the result must be the prompt */
    size_t *plain = NULL, n_plain = 0, cap = 0, at = 0;
    bool same = !st;
    for (size_t p = 0; same && p < mlen;) {
        const char *hit = memmem(mtext + p, mlen - p, MARK, sizeof MARK - 1);
        size_t tpl = hit ? (size_t)(hit - mtext) - p : mlen - p;
        same = at + tpl <= len && !memcmp(text + at, mtext + p, tpl);
        at += tpl;
        p += tpl;
        if (!hit || !same) break;
        char *end;
        size_t idx = strtoull(mtext + p + sizeof MARK - 1, &end, 10);
        json_t *c = json_object_get(json_array_get(norm, idx), "content");
        same = *end == '\x01' && json_is_string(c);
        if (!same) break;
        p = (size_t)(end + 1 - mtext);
        size_t cl = json_string_length(c);
        same = at + cl <= len && !memcmp(text + at, json_string_value(c), cl);
        if (!same || !cl) {
            at += same ? cl : 0;
            continue;
        }
        if (n_plain == cap) {
            cap = cap ? 2 * cap : 16;
            size_t *np = realloc(plain, 2 * cap * sizeof *np);
            if (!np) {
                same = false;
                st = RW_ERR_NOMEM;
                break;
            }
            plain = np;
        }
        plain[2 * n_plain] = at;
        plain[2 * n_plain + 1] = at + cl;
        n_plain++;
        at += cl;
    }
    same = same && at == len;
    free(mtext);
    json_decref(marked);
    if (!same) {
        free(plain);
        if (st == RW_ERR_NOMEM || !ok) rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
        else
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "messages",
                       "a message contains the text of a control token, and this chat template changes message "
                       "content as it renders it, so that text cannot be kept apart from the template's own tokens");
        return false;
    }
    st = rw_tokenize_guarded(s->tok, text, len, add_special, plain, n_plain, ids, n_ids, &err);
    free(plain);
    if (st) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
        return false;
    }
    return true;
}
