/* api_store.c - the Responses API's stored responses, for
 * previous_response_id and GET /v1/responses/{id}: in memory only, bounded
 * by a count and by bytes (the JSON text sizes), the least recently used
 * dropped first. A conversation is kept as the chat messages it rendered
 * from, output included, and as its tokens (prompt and generated), so the
 * next turn can continue those very tokens (rw_server__splice_prompt) and
 * the prefix cache, which holds them, serves all of it. Guarded by its own
 * lock: connection threads put and get at once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_int.h"

#define DEFAULT_ENTRIES 1024
#define DEFAULT_BYTES ((size_t)64 << 20)

typedef struct entry {
    struct entry *prev, *next; /* most recently used first */
    char *id;
    json_t *messages, *response; /* owned references */
    int32_t *ids;                /* the turn's prompt and generated tokens (owned) */
    size_t n_ids;
    size_t bytes;
} entry;

struct rw_api_store {
    pthread_mutex_t mu;
    entry *head, *tail;
    size_t n, bytes, max_entries, max_bytes;
};

rw_api_store *rw_server__store_new(size_t max_entries, size_t max_bytes) {
    rw_api_store *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    pthread_mutex_init(&st->mu, NULL);
    st->max_entries = max_entries ? max_entries : DEFAULT_ENTRIES;
    st->max_bytes = max_bytes ? max_bytes : DEFAULT_BYTES;
    return st;
}

static void unlink_entry(rw_api_store *st, entry *e) {
    if (e->prev) e->prev->next = e->next;
    else st->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else st->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(rw_api_store *st, entry *e) {
    e->prev = NULL;
    e->next = st->head;
    if (st->head) st->head->prev = e;
    st->head = e;
    if (!st->tail) st->tail = e;
}

static void free_entry(entry *e) {
    free(e->id);
    json_decref(e->messages);
    json_decref(e->response);
    free(e->ids);
    free(e);
}

void rw_server__store_free(rw_api_store *st) {
    if (!st) return;
    for (entry *e = st->head, *next; e; e = next) {
        next = e->next;
        free_entry(e);
    }
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static size_t json_size(json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT);
    size_t n = s ? strlen(s) : 0;
    free(s);
    return n;
}

void rw_server__store_put(rw_api_store *st, const char *id, json_t *messages, json_t *response, const int32_t *ids,
                          size_t n_ids) {
    entry *e = calloc(1, sizeof *e);
    if (!e) return;
    e->id = strdup(id);
    e->messages = json_deep_copy(messages);
    e->response = json_deep_copy(response);
    e->ids = n_ids ? malloc(n_ids * sizeof *ids) : NULL;
    if (!e->id || !e->messages || !e->response || (n_ids && !e->ids)) { /* out of memory: not stored, as if evicted */
        free_entry(e);
        return;
    }
    if (n_ids) memcpy(e->ids, ids, n_ids * sizeof *ids);
    e->n_ids = n_ids;
    e->bytes = strlen(id) + json_size(e->messages) + json_size(e->response) + n_ids * sizeof *ids;
    pthread_mutex_lock(&st->mu);
    push_front(st, e);
    st->n++;
    st->bytes += e->bytes;
    while (st->tail && st->tail != e && (st->n > st->max_entries || st->bytes > st->max_bytes)) {
        entry *old = st->tail;
        unlink_entry(st, old);
        st->n--;
        st->bytes -= old->bytes;
        free_entry(old);
    }
    pthread_mutex_unlock(&st->mu);
}

bool rw_server__store_get(rw_api_store *st, const char *id, json_t **messages, json_t **response, int32_t **ids,
                          size_t *n_ids) {
    pthread_mutex_lock(&st->mu);
    entry *e = st->head;
    while (e && strcmp(e->id, id)) e = e->next;
    if (e) {
        unlink_entry(st, e);
        push_front(st, e);
        /* deep copies: the caller may change them while another thread reads ours */
        if (messages) *messages = json_deep_copy(e->messages);
        if (response) *response = json_deep_copy(e->response);
        if (ids) {
            *ids = e->n_ids ? malloc(e->n_ids * sizeof **ids) : NULL;
            *n_ids = *ids ? e->n_ids : 0;
            if (*ids) memcpy(*ids, e->ids, e->n_ids * sizeof **ids);
        }
    }
    pthread_mutex_unlock(&st->mu);
    return e != NULL;
}
