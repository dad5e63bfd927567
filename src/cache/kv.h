/* kv.h - a per-sequence attention KV cache in pages shared by reference.
 *
 * For every attention layer the cache holds, per KV head, the keys and values
 * of positions 0..n-1 of one sequence, in pages of RW_KV_PAGE positions. A
 * page holds one layer's rows of those positions for every KV head: keys
 * head-major rows, values transposed (one row per value dimension, the
 * page's positions contiguous), so that attention computes q·K as dot
 * products over head_dim and p·V as dot products over positions, both on
 * contiguous memory within a page (llama.cpp without flash attention does
 * the same over one buffer):
 *
 *   page p of layer il, positions p*P .. p*P+P-1 (P = RW_KV_PAGE):
 *     k : [n_head_kv][P][head_dim_k]   (element type f32 or f16)
 *     vt: [n_head_kv][head_dim_v][P]   (right after k, same allocation)
 *
 * P is a multiple of 64, so that attention's 64-position blocks never
 * straddle a page and it computes bitwise what it would over one contiguous
 * buffer (kernels/ops_model.h, rw_attn_pages).
 *
 * Sharing. Pages are reference counted. rw_kv_share makes a cache hold
 * another's pages (a snapshot in O(pages), no copy); a page with more than
 * one holder is never written: a store into it first copies it
 * (copy-on-write), so what one holder writes is never seen by another.
 * Invariants:
 *   - a cache holds exactly ceil(n / P) pages per layer (holes included,
 *     see below) after every operation but a reserve (which may add pages
 *     for positions not yet valid);
 *   - rows at positions >= n are never read; a page's rows below its
 *     holders' lengths never change while it has more than one holder.
 *
 * Rows are written for positions pos..pos+m-1 (rw_kv_store, one layer at a
 * time, as a forward pass computes them) and become part of the sequence only
 * when the length is advanced (rw_kv_set_length). Truncating to n forgets
 * every position >= n and lets go of the pages wholly past it. Pages are
 * added on demand up to max_ctx positions (a store beyond it is
 * RW_ERR_CONTEXT).
 *
 * F16 storage (the default, as llama.cpp's) rounds each value to nearest
 * even; reads convert back to f32 exactly.
 *
 * Holes. rw_kv_release_page lets go of one page of every layer while the
 * length stays (a sliding-window layer forgets what its window has left,
 * cache/state.h): the page reads as absent (its table entry is NULL, which
 * attention never reads: a window starts in a later page), a store into it
 * is refused, and it comes back only when a truncation falls below it and
 * a reserve adds it anew. Sharing, bytes and each_page skip holes.
 *
 * Thread safety: reference counts are atomic, so caches sharing pages may be
 * used and freed from different threads; one cache is used by one thread at
 * a time.
 */
#ifndef RW_CACHE_KV_H
#define RW_CACHE_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "kernels/ops.h"

#define RW_KV_PAGE 64 /* positions per page: a multiple of 64 (see above) */

typedef enum {
    RW_KV_F32 = 0,
    RW_KV_F16 = 1,
} rw_kv_type;

typedef struct {
    rw_kv_type type;
    int n_layer; /* layers with attention (index space 0..n_layer-1) */
    int n_head_kv;
    int head_dim_k;
    int head_dim_v;
    int64_t max_ctx; /* hard limit on positions */
} rw_kv_config;

typedef struct rw_kv_cache rw_kv_cache;

/* Creates an empty cache. The caller owns *out and frees it with rw_kv_free
 * (which lets go of its pages; a page is freed with its last holder). No
 * page is allocated until the first reserve. */
rw_status rw_kv_new(const rw_kv_config *cfg, rw_kv_cache **out, rw_error *err);
void rw_kv_free(rw_kv_cache *c); /* no-op on NULL */

const rw_kv_config *rw_kv_get_config(const rw_kv_cache *c);
int64_t rw_kv_length(const rw_kv_cache *c);
int64_t rw_kv_capacity(const rw_kv_cache *c); /* positions the pages held can take (at most max_ctx) */
/* Bytes of memory held: every page held (shared ones too) and the tables. */
size_t rw_kv_bytes(const rw_kv_cache *c);
/* Bytes of one page (one layer, RW_KV_PAGE positions, with its header). */
size_t rw_kv_page_bytes(const rw_kv_cache *c);

/* Makes room for positions up to n_total-1 (keeps the stored rows).
 * RW_ERR_CONTEXT if n_total > max_ctx, RW_ERR_NOMEM on allocation failure
 * (then the cache is as it was). */
rw_status rw_kv_reserve(rw_kv_cache *c, int64_t n_total, rw_error *err);

/* Stores m positions pos..pos+m-1 of layer il. k row t is at k + t*k_stride
 * and holds n_head_kv * head_dim_k floats (head-major), likewise v. The
 * positions must be reserved and pos <= length (no gaps). A page written
 * that has other holders is copied first (RW_ERR_NOMEM if that fails; then
 * nothing was written). */
rw_status rw_kv_store(rw_kv_cache *c, int il, int64_t pos, int64_t m, const float *k, int64_t k_stride, const float *v,
                      int64_t v_stride, rw_error *err);

/* Sets the length (positions 0..n-1 valid). n may not exceed the capacity;
 * lowering it is a truncation (pages wholly past n are let go). */
rw_status rw_kv_set_length(rw_kv_cache *c, int64_t n, rw_error *err);

/* Makes dst hold exactly src's positions 0..length-1 by sharing src's pages
 * (reference counts, no copy of rows); dst's former pages are let go. Same
 * configuration required (RW_ERR_INVALID_ARG). RW_ERR_NOMEM leaves dst as
 * it was. */
rw_status rw_kv_share(rw_kv_cache *dst, const rw_kv_cache *src, rw_error *err);

/* Whether page p (positions p*P..p*P+P-1) is held: below the pages
 * reserved and not released. */
bool rw_kv_has_page(const rw_kv_cache *c, int64_t p);
/* Releases page p of every layer (a hole, see above); no-op if not held. */
void rw_kv_release_page(rw_kv_cache *c, int64_t p);

/* Layer il as attention reads it (kernels/ops.h). Valid until the next
 * reserve, store, set_length or share on c. */
void rw_kv_attn_view(const rw_kv_cache *c, int il, rw_attn_kv *out);

/* Calls fn once for every page held (all layers): its identity (equal for
 * every holder of the same page) and its bytes. Identities are valid while
 * some holder keeps the page. */
void rw_kv_each_page(const rw_kv_cache *c, void (*fn)(void *ctx, const void *page, size_t bytes), void *ctx);

/* Raw rows in the cache's element type, for serialization: the key row of
 * position pos of head `head`, and element pos of value row `dim`. *n gets
 * how many positions follow contiguously from there (to the end of the
 * page). pos must be below the capacity. The writable forms are for a cache
 * whose pages have no other holder (a fresh one being loaded). */
const void *rw_kv_k_rows(const rw_kv_cache *c, int il, int head, int64_t pos, int64_t *n);
const void *rw_kv_v_elems(const rw_kv_cache *c, int il, int head, int dim, int64_t pos, int64_t *n);
void *rw_kv_k_rows_mut(rw_kv_cache *c, int il, int head, int64_t pos, int64_t *n);
void *rw_kv_v_elems_mut(rw_kv_cache *c, int il, int head, int dim, int64_t pos, int64_t *n);

/* Reads one stored row (position pos of head `head`) as f32 into dst. */
void rw_kv_read_k(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst);
void rw_kv_read_v(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst);

#endif
