/* test_seq_props.c - the cache layer's invariants on every fixture
 * architecture, bitwise: random programs of append (in passes of random
 * sizes, several sequences of different lengths joining and leaving the
 * batch), rewind to any position, snapshot / restore, save / load, compared
 * with a plain single pass over the same tokens. Seeded and reproducible
 * (RW_PROPS_SEED overrides the seed, RW_PROPS_STEPS the program length).
 *
 * Token streams: a few branches that share prefixes of different lengths,
 * each branch's logits computed once by one forward pass (the reference).
 * A sequence follows one branch; after a rewind below the shared prefix it
 * may switch to another, which exercises rewinds followed by different
 * tokens. Every logit row a program produces must equal the reference row. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/model.h"

#define N_BRANCH 3
#define MAX_LIVE 3

typedef struct {
    int32_t *tok;  /* [len] */
    int64_t len;
    float *ref;    /* [len][V] */
} branch;

typedef struct {
    rw_model_seq *s; /* NULL = slot empty */
    int b;           /* branch it follows */
    bool small;      /* checkpoint budget cut below the default */
    int64_t top;     /* length after its latest forward pass (seq.c: retention) */
    int64_t safe16;  /* rewinds to >= this are replay-only (-1: no claim) */
    int64_t target;  /* rw_model_seq_plan_until in force on s (0: none) */
    bool planned;    /* s or a state it came from had one: the 256-token claim is off */
} live_seq;

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int64_t rint_(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

static int64_t V;

/* Longest common prefix of two branches. */
static int64_t shared(const branch *a, const branch *b) {
    int64_t n = 0;
    while (n < a->len && n < b->len && a->tok[n] == b->tok[n]) n++;
    return n;
}

static bool rows_equal(const float *got, const branch *br, int64_t pos, int64_t n) {
    return memcmp(got, br->ref + pos * V, (size_t)(n * V) * sizeof(float)) == 0;
}

static void run_model(const char *rel, int steps, uint64_t seed) {
    const char *path = rw_test_fixture_path(rel);
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_error err = {0};
    if (rw_gguf_open(path, &g, &err) || rw_model_load(g, &m, &err)) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
        rw_gguf_close(g);
        return;
    }
    V = rw_model_get_hparams(m)->n_vocab;
    rw_threadpool *pool = NULL;
    CHECK(rw_threadpool_new(2, &pool, &err) == RW_OK);
    rng_state = seed;
    /* branches: branch 0 is long (past the 256-token recent window); the
     * others share a random prefix of it */
    const int64_t L0 = rw_test_sanitized() ? 300 : 420;
    branch br[N_BRANCH];
    for (int b = 0; b < N_BRANCH; b++) {
        br[b].len = b == 0 ? L0 : rint_(L0 / 3, L0);
        br[b].tok = malloc((size_t)br[b].len * sizeof(int32_t));
        const int64_t keep = b == 0 ? 0 : rint_(1, br[b].len - 1);
        for (int64_t i = 0; i < br[b].len; i++)
            br[b].tok[i] = i < keep ? br[0].tok[i] : (int32_t)rint_(1, V - 1);
        br[b].ref = malloc((size_t)(br[b].len * V) * sizeof(float));
        rw_model_seq *s = NULL;
        rw_forward_args a = {.tokens = br[b].tok, .n = br[b].len, .logits = br[b].ref, .all_logits = true, .pool = pool};
        CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &s, &err) == RW_OK && rw_model_forward(m, s, &a, &err) == RW_OK);
        rw_model_seq_free(s);
    }
    live_seq live[MAX_LIVE] = {{0}};
    live_seq snap = {0};
    float *out[MAX_LIVE];
    for (int i = 0; i < MAX_LIVE; i++) out[i] = malloc((size_t)(64 * V) * sizeof(float));
    int failures_before = rw_test_failures;
    int n_rewind_replay = 0, n_rewind_recompute = 0;
    for (int step = 0; step < steps && rw_test_failures == failures_before; step++) {
        const int op = (int)rint_(0, 9);
        const int i = (int)rint_(0, MAX_LIVE - 1);
        live_seq *q = &live[i];
        if (!q->s) { /* join: a new sequence on a random branch */
            CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &q->s, &err) == RW_OK);
            q->b = (int)rint_(0, N_BRANCH - 1);
            q->small = rint_(0, 1);
            q->top = 0, q->safe16 = -1;
            if (q->small) rw_model_seq_set_checkpoint_budget(q->s, (size_t)rint_(0, 4) * rw_model_seq_checkpoint_bytes(q->s));
            /* a prompt fed in chunks (the engine's): planned for its end */
            q->target = rint_(0, 2) == 0 ? rint_(1, br[q->b].len) : 0;
            q->planned = q->target > 0;
            if (q->target) rw_model_seq_plan_until(q->s, q->target);
            continue;
        }
        const int64_t len = rw_model_seq_length(q->s);
        if (getenv("RW_PROPS_TRACE")) fprintf(stderr, "step %d op %d slot %d len %lld\n", step, op, i, (long long)len);
        if (op <= 3) { /* append: every live sequence with tokens left may join the pass */
            rw_batch_item items[MAX_LIVE];
            int who[MAX_LIVE], k = 0;
            for (int j = 0; j < MAX_LIVE; j++) {
                live_seq *x = &live[j];
                if (!x->s || (j != i && rint_(0, 2) == 0)) continue;
                const int64_t l = rw_model_seq_length(x->s), left = br[x->b].len - l;
                if (left <= 0) continue;
                const int64_t n = rint_(1, left < 64 ? left : 64);
                items[k] = (rw_batch_item){.seq = x->s, .tokens = br[x->b].tok + l, .n = n, .logits = out[j],
                                           .all_logits = true};
                who[k++] = j;
            }
            if (!k) continue;
            CHECK_MSG(rw_model_forward_batch(m, items, k, pool, &err) == RW_OK, "%s", err.msg);
            if (getenv("RW_PROPS_TRACE"))
                for (int j = 0; j < k; j++) fprintf(stderr, "  append slot %d +%lld\n", who[j], (long long)items[j].n);
            for (int j = 0; j < k; j++) {
                const live_seq *x = &live[who[j]];
                const int64_t pos = rw_model_seq_length(x->s) - items[j].n;
                live[who[j]].top = rw_model_seq_length(x->s);
                /* a pass of >= 31 tokens logs its last fine step itself
                 * (one planned for a later length only from that length on) */
                live[who[j]].safe16 =
                    items[j].n >= 31 && live[who[j]].top >= x->target ? live[who[j]].top - 16 : -1;
                CHECK_MSG(rows_equal(out[who[j]], &br[x->b], pos, items[j].n),
                          "%s step %d: %lld rows at %lld (branch %d, %d in the pass) differ", rel, step,
                          (long long)items[j].n, (long long)pos, x->b, k);
            }
        } else if (op <= 6) { /* rewind, mostly short */
            int64_t n = rint_(0, 1) ? len - rint_(0, len < 20 ? len : 20) : rint_(0, len);
            int64_t rep, rec;
            CHECK(rw_model_seq_rewind_cost(q->s, n, &rep, &rec) == RW_OK);
            if (rec) n_rewind_recompute++;
            else n_rewind_replay++;
            /* the retention guarantees, relative to the end of the latest pass */
            if (q->safe16 >= 0 && n >= q->safe16)
                CHECK_MSG(rec == 0, "%s: rewind to %lld (last pass ended at %lld) recomputes %lld", rel, (long long)n,
                          (long long)q->top, (long long)rec);
            if (q->top - n <= 256 && !q->small && !q->planned)
                CHECK_MSG(rec < 64, "%s: rewind to %lld (last pass ended at %lld) recomputes %lld", rel, (long long)n,
                          (long long)q->top, (long long)rec);
            if (getenv("RW_PROPS_TRACE")) fprintf(stderr, "  slot %d rewind to %lld (replay %lld recompute %lld)\n", i, (long long)n, (long long)rep, (long long)rec);
            CHECK_MSG(rw_model_seq_rewind(q->s, n, pool, &err) == RW_OK, "%s", err.msg);
            CHECK_EQ_INT(rw_model_seq_length(q->s), n);
            if (rec) q->top = n, q->safe16 = -1; /* the recompute was a pass ending at n */
            /* switch branch when the prefix allows it */
            int nb = (int)rint_(0, N_BRANCH - 1);
            if (shared(&br[q->b], &br[nb]) >= n) q->b = nb;
        } else if (op == 7) { /* snapshot or restore */
            if (!snap.s || rint_(0, 1)) {
                rw_model_seq_free(snap.s);
                snap.s = NULL;
                CHECK(rw_model_seq_clone(q->s, &snap.s, &err) == RW_OK);
                snap.b = q->b, snap.small = q->small, snap.top = q->top, snap.safe16 = q->safe16;
                snap.target = 0, snap.planned = q->planned; /* a clone does not carry the plan */
            } else {
                CHECK(rw_model_seq_copy(q->s, snap.s, &err) == RW_OK);
                q->b = snap.b, q->small = snap.small, q->top = snap.top, q->safe16 = snap.safe16;
                q->planned = q->planned || snap.planned; /* q->s keeps its own plan */
            }
        } else if (op == 8) { /* save and load into a fresh sequence */
            uint8_t *data = NULL;
            size_t n = 0;
            rw_model_seq *t = NULL;
            CHECK(rw_model_seq_save_buffer(q->s, &data, &n, &err) == RW_OK);
            CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &t, &err) == RW_OK);
            CHECK_MSG(rw_model_seq_load_buffer(t, data, n, &err) == RW_OK, "%s", err.msg);
            CHECK_EQ_INT(rw_model_seq_length(t), len);
            free(data);
            rw_model_seq_free(q->s);
            q->s = t;
            q->target = 0; /* a state file does not carry the plan */
        } else { /* leave */
            rw_model_seq_free(q->s);
            q->s = NULL;
        }
    }
    /* speculative decoding's pattern: from length P append K+1 (K <= 15),
     * rewind to any position in [P, P+K+1]: never a matmul */
    if (rw_test_failures == failures_before) {
        rw_model_seq *s = NULL;
        CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &s, &err) == RW_OK);
        const branch *b0 = &br[0];
        int64_t P = rint_(0, 40);
        rw_forward_args a0 = {.tokens = b0->tok, .n = P > 0 ? P : 1, .logits = out[0], .all_logits = true, .pool = pool};
        CHECK(rw_model_forward(m, s, &a0, &err) == RW_OK);
        P = rw_model_seq_length(s);
        int n_spec = 0;
        while (rw_test_failures == failures_before) {
            const int64_t K = rint_(1, 15);
            if (P + K + 1 > b0->len) break;
            rw_forward_args a = {.tokens = b0->tok + P, .n = K + 1, .logits = out[0], .all_logits = true, .pool = pool};
            CHECK(rw_model_forward(m, s, &a, &err) == RW_OK);
            CHECK_MSG(rows_equal(out[0], b0, P, K + 1), "%s: verify pass at %lld differs", rel, (long long)P);
            const int64_t to = P + rint_(0, K + 1);
            int64_t rep, rec;
            CHECK(rw_model_seq_rewind_cost(s, to, &rep, &rec) == RW_OK);
            CHECK_MSG(rec == 0 && rep < 16, "%s: speculative rewind %lld -> %lld costs replay %lld recompute %lld", rel,
                      (long long)(P + K + 1), (long long)to, (long long)rep, (long long)rec);
            CHECK(rw_model_seq_rewind(s, to, pool, &err) == RW_OK);
            P = to, n_spec++;
        }
        rw_model_seq_free(s);
        printf("%-24s %d speculative steps\n", rel, n_spec);
    }
    printf("%-24s %d steps, rewinds: %d by replay, %d with recompute\n", rel, steps, n_rewind_replay,
           n_rewind_recompute);
    for (int i = 0; i < MAX_LIVE; i++) {
        rw_model_seq_free(live[i].s);
        free(out[i]);
    }
    rw_model_seq_free(snap.s);
    for (int b = 0; b < N_BRANCH; b++) free(br[b].tok), free(br[b].ref);
    rw_threadpool_free(pool);
    rw_model_free(m);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    const char *e = getenv("RW_PROPS_SEED");
    const uint64_t seed = e ? strtoull(e, NULL, 10) : 20261123;
    e = getenv("RW_PROPS_STEPS");
    const int steps = e ? atoi(e) : rw_test_sanitized() ? 60 : 200;
    static const char *models[] = {
        "llama/llama-F32.gguf",         "qwen3/qwen3-F32.gguf",         "qwen35/qwen35-F32.gguf",
        "qwen35/qwen35-Q4_K_M.gguf",   "qwen35moe/qwen35moe-F32.gguf", "qwen3next/qwen3next-F32.gguf",
        "granitehybrid/granitehybrid-F32.gguf", "granitehybrid/granitehybrid-Q8_0.gguf",
        "lfm2/lfm2-F32.gguf",           "lfm2/lfm2-Q8_0.gguf",
        "nemotron_h/nemotron_h-F32.gguf",
        "gemma3/gemma3-F32.gguf", /* sliding-window layers: every rewind and batch past the window */
        "gpt-oss/gpt-oss-F32.gguf", "gpt-oss/gpt-oss-MXFP4_MOE.gguf", /* sinks, a window of 8, MoE */
    };
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) run_model(models[i], steps, seed + i);
    return rw_test_done();
}
