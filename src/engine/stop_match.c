/* stop_match.c - the stop strings of one request as an Aho-Corasick
 * automaton, built once at submission (on the submitting thread, not the
 * scheduler's).
 *
 * A state is a trie node: the longest tail of the text fed so far that is a
 * prefix of some stop string. Feeding a byte follows the failure links until
 * a node has a child for it, so the work is amortized O(1) per byte of
 * generated text however many and however long the stop strings are (the
 * earlier scan cost n_stop x held length per token: quadratic in a long
 * held-back prefix). out[] gives, for each node, the longest stop string that
 * ends there (itself or through its failure chain), so the earliest-starting
 * match among those ending at a byte is found in O(1).
 *
 * Nodes are arrays indexed by node number, children as linked lists; the
 * root has a full table. Memory: about 21 bytes per byte of stop strings
 * (bounded by RW_MAX_STOP_BYTES in submit.c's checks). */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

struct rw_engine__stopm {
    int32_t n_nodes;
    int32_t *child;   /* first child or -1 */
    int32_t *sibling; /* next child of the same parent or -1 */
    int32_t *fail;    /* longest proper suffix that is a node */
    int32_t *out;     /* length of the longest stop string that is a suffix of this node's text; 0 = none */
    int32_t *depth;   /* this node's text length */
    uint8_t *byte;    /* the byte leading here from the parent */
    int32_t root_next[256];
};

static int32_t child_of(const rw_engine__stopm *m, int32_t s, uint8_t b) {
    if (s == 0) return m->root_next[b];
    for (int32_t c = m->child[s]; c >= 0; c = m->sibling[c])
        if (m->byte[c] == b) return c;
    return -1;
}

void rw_engine__stopm_free(rw_engine__stopm *m) {
    if (!m) return;
    free(m->child);
    free(m->sibling);
    free(m->fail);
    free(m->out);
    free(m->depth);
    free(m->byte);
    free(m);
}

rw_engine__stopm *rw_engine__stopm_new(const char *const *stops, int n) {
    size_t total = 1;
    for (int i = 0; i < n; i++) total += strlen(stops[i]);
    if (total > INT32_MAX) return NULL;
    rw_engine__stopm *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->child = malloc(total * sizeof *m->child);
    m->sibling = malloc(total * sizeof *m->sibling);
    m->fail = malloc(total * sizeof *m->fail);
    m->out = calloc(total, sizeof *m->out);
    m->depth = malloc(total * sizeof *m->depth);
    m->byte = malloc(total);
    if (!m->child || !m->sibling || !m->fail || !m->out || !m->depth || !m->byte) {
        rw_engine__stopm_free(m);
        return NULL;
    }
    for (int b = 0; b < 256; b++) m->root_next[b] = -1;
    m->n_nodes = 1;
    m->child[0] = m->sibling[0] = -1;
    m->fail[0] = 0;
    m->depth[0] = 0;
    m->byte[0] = 0;
    /* the trie */
    for (int i = 0; i < n; i++) {
        int32_t s = 0;
        for (const uint8_t *p = (const uint8_t *)stops[i]; *p; p++) {
            int32_t c = child_of(m, s, *p);
            if (c < 0) {
                c = m->n_nodes++;
                m->child[c] = -1;
                m->byte[c] = *p;
                m->depth[c] = m->depth[s] + 1;
                if (s == 0) {
                    m->sibling[c] = -1;
                    m->root_next[*p] = c;
                } else {
                    m->sibling[c] = m->child[s];
                    m->child[s] = c;
                }
            }
            s = c;
        }
        m->out[s] = m->depth[s]; /* a whole stop string ends here */
    }
    /* failure links breadth first (a node's link is shallower, so already set);
     * the queue reuses nothing: one int32 per node */
    int32_t *queue = malloc((size_t)m->n_nodes * sizeof *queue);
    if (!queue) {
        rw_engine__stopm_free(m);
        return NULL;
    }
    size_t qh = 0, qt = 0;
    for (int b = 0; b < 256; b++)
        if (m->root_next[b] >= 0) {
            m->fail[m->root_next[b]] = 0;
            queue[qt++] = m->root_next[b];
        }
    while (qh < qt) {
        int32_t u = queue[qh++];
        for (int32_t v = m->child[u]; v >= 0; v = m->sibling[v]) {
            int32_t f = m->fail[u], t;
            while ((t = child_of(m, f, m->byte[v])) < 0 && f != 0) f = m->fail[f];
            m->fail[v] = t >= 0 ? t : 0;
            if (!m->out[v]) m->out[v] = m->out[m->fail[v]];
            queue[qt++] = v;
        }
    }
    free(queue);
    return m;
}

long rw_engine__stopm_feed(const rw_engine__stopm *m, int32_t *state, const char *text, size_t n, size_t base) {
    long best = -1;
    int32_t s = *state;
    for (size_t i = 0; i < n; i++) {
        const uint8_t b = (uint8_t)text[i];
        int32_t t;
        while ((t = child_of(m, s, b)) < 0 && s != 0) s = m->fail[s];
        s = t >= 0 ? t : 0;
        if (m->out[s]) {
            long start = (long)(base + i + 1) - (long)m->out[s];
            if (best < 0 || start < best) best = start;
        }
    }
    *state = s;
    return best;
}

size_t rw_engine__stopm_depth(const rw_engine__stopm *m, int32_t state) { return m ? (size_t)m->depth[state] : 0; }
