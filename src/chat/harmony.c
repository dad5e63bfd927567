/* harmony.c - the output of models that speak OpenAI's harmony format
 * (gpt-oss) to content, reasoning and tool call events (output.h's
 * RW_TOOL_FMT_HARMONY; output.c hands the text here).
 *
 * After the generation prompt "<|start|>assistant" the model writes
 * messages, each a header and a body:
 *
 *   [to=functions.NAME] <|channel|>CHANNEL [to=functions.NAME] [<|constrain|>json] <|message|> BODY END
 *
 * with END one of <|end|> (another message follows, from <|start|>),
 * <|call|> (the body is a tool call's JSON arguments) or <|return|> (the
 * answer is done); the end-of-generation tokens among them are not in the
 * text at all, so the end of the text ends a body too. CHANNEL analysis is
 * reasoning (content when reasoning is not separated), final and commentary
 * are content, and a message to functions.NAME is a call of NAME. The
 * server renders control tokens as text for this format (the markers are
 * control tokens). A call's arguments are held until the body ends and sent
 * only when they are a JSON object: a call cut short (max_tokens) never
 * reaches the content. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output_int.h"

enum { H_HEAD, H_BODY };
enum { K_CONTENT, K_REASON, K_CALL };

/* a header that long without <|message|> is not one: plain text */
#define MAX_HEAD 256

struct rw_chat__harmony {
    bool reasoning;
    char *id_prefix; /* owned */
    uint64_t id_seed;
    char *pend; /* undecided text, pend[n] = 0; owned */
    size_t n, cap;
    int st, kind;
    bool after_end; /* a message ended with a marker: what follows is a header */
    char name[257]; /* K_CALL: the function's name */
    int n_calls;
};

static const char *const ENDS[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
#define N_ENDS 4

rw_status rw_chat__harmony_new(bool reasoning, const char *id_prefix, uint64_t id_seed, rw_chat__harmony **out) {
    *out = NULL;
    rw_chat__harmony *h = calloc(1, sizeof *h); /* freed by rw_chat__harmony_free */
    if (!h || !(h->id_prefix = strdup(id_prefix))) {
        free(h);
        return RW_ERR_NOMEM;
    }
    h->reasoning = reasoning;
    h->id_seed = id_seed;
    *out = h;
    return RW_OK;
}

void rw_chat__harmony_free(rw_chat__harmony *h) {
    if (!h) return;
    free(h->id_prefix);
    free(h->pend);
    free(h);
}

int rw_chat__harmony_n_calls(const rw_chat__harmony *h) { return h->n_calls; }
bool rw_chat__harmony_in_reasoning(const rw_chat__harmony *h) { return h->st == H_BODY && h->kind == K_REASON; }

static const char *memfind(const char *h, size_t n, const char *needle) {
    return memmem(h, n, needle, strlen(needle));
}

static void consume(rw_chat__harmony *h, size_t k) {
    memmove(h->pend, h->pend + k, h->n - k);
    h->n -= k;
    h->pend[h->n] = 0;
}

static rw_status text_event(rw_chat__harmony *h, rw_chat_event_fn fn, void *user, const char *s, size_t n) {
    if (!n) return RW_OK;
    rw_chat_event ev = {.kind = h->kind == K_REASON ? RW_CHAT_EV_REASONING : RW_CHAT_EV_CONTENT, .text = s, .len = n};
    return fn(user, &ev);
}

/* The word after key in head[0..n) (letters, digits, '.', '_', '-'), into
 * out (cap bytes); false if key is not there or the word is empty. */
static bool word_after(const char *head, size_t n, const char *key, char *out, size_t cap) {
    const char *k = memfind(head, n, key);
    if (!k) return false;
    const char *p = k + strlen(key), *end = head + n;
    while (p < end && *p == ' ') p++;
    size_t len = 0;
    while (p + len < end && len + 1 < cap &&
           ((p[len] >= 'a' && p[len] <= 'z') || (p[len] >= 'A' && p[len] <= 'Z') || (p[len] >= '0' && p[len] <= '9') ||
            p[len] == '.' || p[len] == '_' || p[len] == '-'))
        len++;
    memcpy(out, p, len);
    out[len] = 0;
    return len > 0;
}

/* A header pend[0..n) (up to <|message|>): the body's kind. */
static void read_head(rw_chat__harmony *h, const char *head, size_t n) {
    char channel[32] = "", to[300] = "";
    word_after(head, n, "<|channel|>", channel, sizeof channel);
    h->kind = !strcmp(channel, "analysis") && h->reasoning ? K_REASON : K_CONTENT;
    if (word_after(head, n, "to=", to, sizeof to) && !strncmp(to, "functions.", 10) && to[10] &&
        rw_chat__valid_name(to + 10, strlen(to + 10))) {
        h->kind = K_CALL;
        snprintf(h->name, sizeof h->name, "%s", to + 10);
    }
}

/* A call's body complete: its events when it is a JSON object. */
static rw_status end_call(rw_chat__harmony *h, rw_chat_event_fn fn, void *user, const char *s, size_t n) {
    json_error_t je;
    json_t *args = json_loadb(s, n, 0, &je);
    rw_status st = RW_OK;
    char *text = json_is_object(args) ? json_dumps(args, JSON_COMPACT) : NULL;
    if (text) {
        const int index = h->n_calls++;
        char id[128];
        rw_chat__call_id(h->id_prefix, h->id_seed, index, id);
        rw_chat_event ev = {.kind = RW_CHAT_EV_CALL_BEGIN, .index = index, .id = id, .name = h->name};
        if (!(st = fn(user, &ev))) {
            ev = (rw_chat_event){.kind = RW_CHAT_EV_CALL_ARGS, .index = index, .text = text, .len = strlen(text)};
            if (!(st = fn(user, &ev))) {
                ev = (rw_chat_event){.kind = RW_CHAT_EV_CALL_END, .index = index};
                st = fn(user, &ev);
            }
        }
    } /* else not a JSON object (or cut short): dropped, never content */
    free(text);
    json_decref(args);
    return st;
}

/* The length of the longest suffix of s[0..n) that could begin a marker. */
static size_t held_suffix(const char *s, size_t n) {
    size_t best = 0;
    for (int m = 0; m < N_ENDS; m++) {
        const size_t k = strlen(ENDS[m]);
        for (size_t l = k - 1; l > best; l--)
            if (l <= n && !memcmp(s + n - l, ENDS[m], l)) {
                best = l;
                break;
            }
    }
    return best;
}

static rw_status step(rw_chat__harmony *h, bool finished, rw_chat_event_fn fn, void *user, bool *progress) {
    *progress = false;
    if (h->st == H_HEAD) {
        const char *msg = memfind(h->pend, h->n, "<|message|>");
        if (!msg) {
            if (!finished && h->n < MAX_HEAD) return RW_OK;
            /* a header cut short (max_tokens): markup, never content */
            if (h->n < MAX_HEAD && (h->after_end || memfind(h->pend, h->n, "<|"))) {
                consume(h, h->n);
                return RW_OK;
            }
            /* plain text where a header should be: content */
            h->kind = K_CONTENT;
            h->st = H_BODY;
            *progress = true;
            return RW_OK;
        }
        read_head(h, h->pend, (size_t)(msg - h->pend));
        consume(h, (size_t)(msg - h->pend) + strlen("<|message|>"));
        h->st = H_BODY;
        *progress = true;
        return RW_OK;
    }
    size_t at = h->n, mlen = 0;
    for (int m = 0; m < N_ENDS; m++) {
        const char *e = memfind(h->pend, h->n, ENDS[m]);
        if (e && (size_t)(e - h->pend) < at) at = (size_t)(e - h->pend), mlen = strlen(ENDS[m]);
    }
    if (at < h->n || finished) { /* the body is complete */
        rw_status st = h->kind == K_CALL ? end_call(h, fn, user, h->pend, at) : text_event(h, fn, user, h->pend, at);
        if (st) return st;
        consume(h, at + mlen); /* after <|start|> come the next message's role and header */
        h->st = H_HEAD;
        h->after_end = mlen > 0;
        *progress = h->n > 0 || at > 0 || mlen > 0;
        return RW_OK;
    }
    if (h->kind == K_CALL) return RW_OK; /* held whole until its end */
    const size_t out = h->n - held_suffix(h->pend, h->n);
    if (out) {
        rw_status st = text_event(h, fn, user, h->pend, out);
        if (st) return st;
        consume(h, out);
        *progress = true;
    }
    return RW_OK;
}

rw_status rw_chat__harmony_feed(rw_chat__harmony *h, const char *text, size_t len, bool finished, rw_chat_event_fn fn,
                                void *user) {
    if (h->n + len + 1 > h->cap) {
        size_t cap = h->cap ? h->cap : 256;
        while (cap < h->n + len + 1) cap *= 2;
        char *q = realloc(h->pend, cap);
        if (!q) return RW_ERR_NOMEM;
        h->pend = q;
        h->cap = cap;
    }
    memcpy(h->pend + h->n, text, len);
    h->n += len;
    h->pend[h->n] = 0;
    for (bool progress = true; progress;) {
        rw_status st = step(h, finished, fn, user, &progress);
        if (st) return st;
        if (finished && h->n == 0 && h->st == H_HEAD) break;
    }
    return RW_OK;
}
