/* state.h - one interface for every layer's per-sequence state.
 *
 * A sequence's state is a list of per-layer states (rw_layer_state), each
 * behind one operations table (rw_state_ops). Five kinds implement it:
 *
 *   "kv"        attention keys and values (f32 or f16), cache/kv.h pages
 *   "deltanet"  Gated DeltaNet: conv state + per-head matrix state
 *   "mamba2"    Mamba2: conv state + per-head SSM state
 *   "shortconv" lfm2's gated short convolution: conv state only
 *   "none"      a layer without per-sequence memory: only a length
 *
 * Code outside a state type never switches on its kind: it calls the
 * table. Only the layer that owns a state feeds it new tokens, through the
 * kind's own append (rw_kv_state_store, rw_rec_state_append), because what a
 * token contributes differs by kind.
 *
 * Exact rewind. A full KV state cuts back to any length; a sliding-window
 * one to any length whose window it still holds (below: checkpoints). A recurrent state
 * cannot, so it keeps what is needed to rebuild an earlier one:
 *   - checkpoints: full copies of its state at chosen positions (the caller
 *     names them as cuts when it appends, see rw_rec_state_append), and
 *   - a log of the recurrence inputs of the latest tokens, from which the
 *     recurrence alone (no matmul) replays forward from a checkpoint.
 * Position 0 (the zero state) is always a checkpoint. restore_point tells,
 * before anything is done, the position a state can return to by itself and
 * how many tokens of replay that costs; a rewind past the log lands on a
 * checkpoint and the caller recomputes the rest with the model (the sequence
 * object in models/ does that).
 *
 * Invariants (every kind, checked through every architecture by tests/cache/test_seq_props.c and test_state_files.c):
 *   - rewind(n) then appending the same tokens gives a state bitwise equal
 *     to never having rewound;
 *   - save writes only the valid part (positions < length), load of what
 *     save wrote gives a state that behaves bitwise the same;
 *   - clone is independent of its source: live state and log are copied;
 *     KV pages and recurrent checkpoints are shared with reference counts
 *     (checkpoints are immutable once taken; a KV page shared by several
 *     holders is copied before one of them writes into it), so a clone is
 *     cheap and nothing one side does is seen by the other;
 *   - bytes() counts the shared blocks (KV pages, checkpoints) in every
 *     state that holds them; each_block lists them with an identity that is
 *     the same in every holder, so that an owner of many states (the prefix
 *     cache) can count each physical block once;
 *   - a failed operation leaves the state as it was.
 */
#ifndef RW_CACHE_STATE_H
#define RW_CACHE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "cache/kv.h"

typedef struct rw_layer_state rw_layer_state;

/* Recurrent states and their checkpoints take memory from a process-wide
 * pool of 64 MiB slabs (state_pool.c). A server asks it to keep n_slabs
 * (at most 2) faulted in ahead of need, so that page faults fall outside
 * requests; the default, 0, holds none beyond what states use (a single
 * generation's memory stays at what it needs). Thread-safe. */
void rw_state_pool_set_ready(int n_slabs);

/* Gives the pages of every free state buffer (and of the newest slab's
 * unused rest) back to the system, keeping the address space: they read as
 * zeros and fault in again when reused. Returns the bytes newly given back.
 * For an idle server: costs page faults when the memory is used again. */
size_t rw_state_pool_trim(void);

/* rw_state_pool_stats is public (include/rewind.h, the engine's statistics). */
rw_state_pool_stats rw_state_pool_get_stats(void); /* all 0 in sanitizer builds (malloc'd) */

/* ---- byte buffers for serialization ---- */

/* A growable byte buffer. Owner frees data with free(). */
typedef struct {
    uint8_t *data;
    size_t len, cap;
    bool failed; /* an allocation failed; every later put is ignored */
} rw_sbuf;

void rw_sbuf_put(rw_sbuf *b, const void *p, size_t n);
void rw_sbuf_put_u32(rw_sbuf *b, uint32_t v);
void rw_sbuf_put_u64(rw_sbuf *b, uint64_t v);

/* A bounded reader; every get past the end fails and sets failed. */
typedef struct {
    const uint8_t *p;
    size_t len, off;
    bool failed;
} rw_sreader;

bool rw_sread(rw_sreader *r, void *dst, size_t n);
bool rw_sread_u32(rw_sreader *r, uint32_t *v);
bool rw_sread_u64(rw_sreader *r, uint64_t *v);
/* A pointer to the next n bytes (consumed), or NULL. */
const void *rw_sread_ptr(rw_sreader *r, size_t n);

uint32_t rw_crc32(uint32_t crc, const void *p, size_t n);     /* start with crc = 0 */
uint32_t rw_crc32_ref(uint32_t crc, const void *p, size_t n); /* the bytewise reference (tests) */

/* ---- the operations table ---- */

/* Called once per shared block: its identity (the same in every state that
 * holds the block, valid while one does) and its bytes. */
typedef void (*rw_block_fn)(void *ctx, const void *block, size_t bytes);

typedef struct {
    const char *kind;
    void (*free)(rw_layer_state *st);
    int64_t (*length)(const rw_layer_state *st);
    /* Bytes of memory held (live state, checkpoints, log). */
    size_t (*bytes)(const rw_layer_state *st);
    /* The largest position p <= n (n <= length) the state can return to
     * exactly by itself; *replay gets the tokens of recurrence replay that
     * costs (0 for KV). Always >= 0 (position 0 is always reachable). */
    int64_t (*restore_point)(const rw_layer_state *st, int64_t n, int64_t *replay);
    /* Returns to position n exactly; n must be its own restore point. */
    rw_status (*rewind)(rw_layer_state *st, int64_t n, rw_threadpool *pool, rw_error *err);
    /* Forgets checkpoints at positions not in keep[] (ascending; position 0
     * needs no entry) and log entries before log_from: every position from
     * log_from on stays restorable without a matmul (a sliding-window KV
     * state keeps the windows of all of them: every page from log_from's
     * window on). Never fails. */
    void (*retain)(rw_layer_state *st, const int64_t *keep, int n_keep, int64_t log_from);
    /* Positions of the checkpoints held, ascending, into pos (at most cap);
     * returns how many there are. */
    int (*checkpoints)(const rw_layer_state *st, int64_t *pos, int cap);
    /* An independent copy (sharing blocks by reference, see above). */
    rw_status (*clone)(const rw_layer_state *st, rw_layer_state **out, rw_error *err);
    /* Makes dst equal to src (same kind and shape): restore of a snapshot. */
    rw_status (*copy_from)(rw_layer_state *dst, const rw_layer_state *src, rw_error *err);
    /* Calls fn for every block held that clones share by reference (KV
     * pages, checkpoints), whether or not another state holds it now. Their
     * bytes are part of bytes(); the rest of bytes() is the state's own. */
    void (*each_block)(const rw_layer_state *st, rw_block_fn fn, void *ctx);
    /* Appends the valid part (and checkpoints and log) to b. */
    void (*save)(const rw_layer_state *st, rw_sbuf *b);
    /* Replaces st's content with what save wrote; on error st is unchanged. */
    rw_status (*load)(rw_layer_state *st, rw_sreader *r, rw_error *err);
} rw_state_ops;

/* Every state starts with this header. */
struct rw_layer_state {
    const rw_state_ops *ops;
};

/* RW_ERR_INTERNAL naming the missing operation if ops leaves one out. Every
 * constructor calls it, so a kind with a hole cannot make a state. */
rw_status rw_state_ops_check(const rw_state_ops *ops, rw_error *err);

/* Convenience wrappers; NULL-safe free. */
static inline void rw_state_free(rw_layer_state *st) {
    if (st) st->ops->free(st);
}
static inline int64_t rw_state_length(const rw_layer_state *st) { return st->ops->length(st); }
static inline size_t rw_state_bytes(const rw_layer_state *st) { return st->ops->bytes(st); }

/* ---- the kinds ---- */

/* An attention layer's KV state (one layer of cache/kv.h storage). */
rw_status rw_kv_state_new(rw_kv_type type, int n_head_kv, int head_dim_k, int head_dim_v, int64_t max_ctx,
                          rw_layer_state **out, rw_error *err);
/* A sliding-window attention layer's KV state: the token at position p
 * attends to p-window+1..p, so the state releases the pages before the
 * window (kv_state.c: its windows are its checkpoints, retain keeps those
 * of the kept positions, restore_point names the positions whose window
 * is held; further back the caller recomputes). window > 0. */
rw_status rw_kv_state_new_window(rw_kv_type type, int n_head_kv, int head_dim_k, int head_dim_v, int64_t window,
                                 int64_t max_ctx, rw_layer_state **out, rw_error *err);
/* Bytes of the pages one window spans (what a kept window can cost); 0
 * for a full KV state or another kind. */
size_t rw_kv_state_window_bytes(const rw_layer_state *st);
/* The storage behind a KV state, NULL for another kind. */
rw_kv_cache *rw_kv_state_cache(rw_layer_state *st);
/* Stores rows for positions length..length+m-1 and advances the length
 * (kv.h's rw_kv_store layout). RW_ERR_CONTEXT past max_ctx. */
rw_status rw_kv_state_append(rw_layer_state *st, int64_t m, const float *k, int64_t k_stride, const float *v,
                             int64_t v_stride, rw_error *err);

/* A recurrent layer's constants, owned by the model, outliving its states. */
typedef struct {
    int conv_channels, conv_kernel; /* C, Kc: conv state holds (Kc-1)*C floats */
    const float *conv_w, *conv_b;   /* [C][Kc], [C] or NULL */
    int64_t mat_floats;             /* floats of the matrix / SSM state */
    int64_t log_floats;             /* recurrence inputs per token */
    int64_t out_floats;             /* outputs per token */
    float eps;
    /* DeltaNet: nv value heads of dk x dv, nk key heads, tiled head map;
     * log = [u (C: q|k|v before the conv) | g (nv) | beta (nv)], out = o
     * [nv*dv]. */
    int nk, nv, dk, dv;
    bool tiled;
    /* Mamba2: heads of head_dim x d_state, groups; log = [xBC (C) | dt
     * (heads, raw)], out = y [heads*head_dim] (before the gate and norm). */
    int heads, groups, head_dim, d_state;
    const float *dt_bias, *a, *d; /* per head: dt bias, A (negative), D skip (may be NULL) */
} rw_rec_params;

/* A layer that keeps nothing per sequence (an MLP-only block): a length
 * its layer advances by n positions per pass with rw_none_state_append
 * (RW_ERR_CONTEXT past max_ctx), so that it rewinds, clones and saves like
 * the other kinds. */
rw_status rw_none_state_new(int64_t max_ctx, rw_layer_state **out, rw_error *err);
rw_status rw_none_state_append(rw_layer_state *st, int64_t n, rw_error *err);

rw_status rw_deltanet_state_new(const rw_rec_params *p, rw_layer_state **out, rw_error *err);
rw_status rw_mamba2_state_new(const rw_rec_params *p, rw_layer_state **out, rw_error *err);
/* Short conv (lfm2): conv_channels, conv_kernel, conv_w (no bias); log = v
 * (C), out = the conv of v (C). */
rw_status rw_shortconv_state_new(const rw_rec_params *p, rw_layer_state **out, rw_error *err);

/* Appends n tokens to a recurrent state: in[t*in_stride ...] holds token
 * t's recurrence inputs (log_floats, layout as rw_rec_params says); the
 * outputs go to out + t*out_stride. The state is copied into a checkpoint
 * at every position of cuts (ascending, within [length, length+n]; a cut at
 * length is taken before the first token) and the inputs of positions >=
 * log_from are logged. On error the state is unchanged. */
rw_status rw_rec_state_append(rw_layer_state *st, const float *in, int64_t in_stride, int64_t n, const int64_t *cuts,
                              int n_cuts, int64_t log_from, float *out, int64_t out_stride, rw_threadpool *pool,
                              rw_error *err);
/* Bytes of one checkpoint and of one logged token (0 for KV states). */
size_t rw_rec_state_checkpoint_bytes(const rw_layer_state *st);
size_t rw_rec_state_log_bytes_per_token(const rw_layer_state *st);

#endif
