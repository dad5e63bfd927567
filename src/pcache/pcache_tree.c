/* pcache_tree.c - the radix tree over token ids (pcache_int.h).
 *
 * Invariants: the root has depth 0 and no edge; a child's edge is
 * non-empty and its first token differs from its siblings'; depth = parent
 * depth + edge length. An entry sits on the node where its tokens end. A
 * node with no entry below it (in its subtree) is removed, with its logits.
 */
#include <stdlib.h>
#include <string.h>

#include "pcache/pcache_int.h"


static rw_pcache__node *child_starting(const rw_pcache__node *n, int32_t tok) {
    for (int i = 0; i < n->n_child; i++)
        if (n->child[i]->edge[0] == tok) return n->child[i];
    return NULL;
}

static bool add_child(rw_pcache__node *p, rw_pcache__node *c) {
    if (p->n_child == p->cap_child) {
        int cap = p->cap_child ? 2 * p->cap_child : 4;
        rw_pcache__node **ch = realloc(p->child, (size_t)cap * sizeof *ch);
        if (!ch) return false;
        p->child = ch, p->cap_child = cap;
    }
    p->child[p->n_child++] = c;
    c->parent = p;
    return true;
}

static void remove_child(rw_pcache__node *p, rw_pcache__node *c) {
    for (int i = 0; i < p->n_child; i++)
        if (p->child[i] == c) {
            p->child[i] = p->child[--p->n_child];
            return;
        }
}

static rw_pcache__node *new_node(const int32_t *edge, int64_t len, int64_t depth) {
    rw_pcache__node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->edge = malloc((size_t)(len ? len : 1) * sizeof *n->edge);
    if (!n->edge) {
        free(n);
        return NULL;
    }
    memcpy(n->edge, edge, (size_t)len * sizeof *edge);
    n->edge_len = len;
    n->depth = depth;
    return n;
}

/* Splits c's edge after k tokens (0 < k < edge_len): a new node takes the
 * first k and becomes c's parent. */
static rw_pcache__node *split(rw_pcache__node *c, int64_t k) {
    rw_pcache__node *mid = new_node(c->edge, k, c->depth - c->edge_len + k);
    if (!mid) return NULL;
    int32_t *rest = malloc((size_t)(c->edge_len - k) * sizeof *rest);
    if (!rest) {
        free(mid->edge), free(mid);
        return NULL;
    }
    memcpy(rest, c->edge + k, (size_t)(c->edge_len - k) * sizeof *rest);
    rw_pcache__node *p = c->parent;
    if (!add_child(mid, c)) {
        free(rest), free(mid->edge), free(mid);
        return NULL;
    }
    for (int i = 0; i < p->n_child; i++)
        if (p->child[i] == c) p->child[i] = mid;
    mid->parent = p;
    c->parent = mid;
    free(c->edge);
    c->edge = rest;
    c->edge_len -= k;
    return mid;
}

/* The node ending exactly at depth n along t (created as needed), or NULL
 * on out of memory. */
rw_pcache__node *rw_pcache__insert_path(rw_pcache *c, const int32_t *t, int64_t n) {
    rw_pcache__node *node = &c->root;
    int64_t d = 0;
    while (d < n) {
        rw_pcache__node *ch = child_starting(node, t[d]);
        if (!ch) {
            rw_pcache__node *leaf = new_node(t + d, n - d, n);
            if (!leaf || !add_child(node, leaf)) {
                if (leaf) free(leaf->edge), free(leaf);
                return NULL;
            }
            return leaf;
        }
        int64_t k = 0;
        while (k < ch->edge_len && d + k < n && ch->edge[k] == t[d + k]) k++;
        if (k < ch->edge_len) {
            if (!(ch = split(ch, k))) return NULL;
        }
        node = ch;
        d += k;
    }
    return node;
}

/* How far t[0..n) follows the tree: the node whose edge the walk ended in
 * (or at) and the matched length. */
rw_pcache__node *rw_pcache__walk(rw_pcache *c, const int32_t *t, int64_t n, int64_t *matched) {
    rw_pcache__node *node = &c->root;
    int64_t d = 0;
    for (;;) {
        if (d == n) break;
        rw_pcache__node *ch = child_starting(node, t[d]);
        if (!ch) break;
        int64_t k = 0;
        while (k < ch->edge_len && d + k < n && ch->edge[k] == t[d + k]) k++;
        d += k;
        node = ch;
        if (k < ch->edge_len) break;
    }
    *matched = d;
    return node;
}

static bool subtree_has_entry(const rw_pcache__node *n) {
    if (n->entry) return true;
    for (int i = 0; i < n->n_child; i++)
        if (subtree_has_entry(n->child[i])) return true;
    return false;
}

void rw_pcache__free_node(rw_pcache *c, rw_pcache__node *n) {
    for (int i = 0; i < n->n_child; i++) rw_pcache__free_node(c, n->child[i]);
    if (n->logits) c->logits_bytes -= (size_t)c->n_vocab * sizeof(float);
    free(n->child), free(n->edge), free(n->logits);
    if (n != &c->root) free(n);
}

/* Removes nodes on the way up from n that have no entry below them. */
void rw_pcache__prune(rw_pcache *c, rw_pcache__node *n) {
    while (n != &c->root && !subtree_has_entry(n)) {
        rw_pcache__node *p = n->parent;
        remove_child(p, n);
        rw_pcache__free_node(c, n);
        n = p;
    }
}

void rw_pcache__collect(rw_pcache__node *n, rw_pcache__entry **out, int *k, int cap) {
    if (*k >= cap) return;
    if (n->entry) out[(*k)++] = n->entry;
    for (int i = 0; i < n->n_child; i++) rw_pcache__collect(n->child[i], out, k, cap);
}

void rw_pcache__path_tokens(const rw_pcache__node *n, int32_t *t) {
    for (const rw_pcache__node *a = n; a->parent; a = a->parent)
        memcpy(t + a->depth - a->edge_len, a->edge, (size_t)a->edge_len * sizeof *t);
}
