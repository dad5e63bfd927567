/* test_pcache_draft.c - prefix-cache entries that keep a draft model's
 * sequence (speculative decoding, prefix_cache.h).
 *
 * A hybrid target (qwen35: DeltaNet + attention) with a hybrid draft
 * (qwen3next): an entry left with its draft sequence is counted in the
 * budget with it (and the running figures match a recount,
 * rw_pcache_check, after every step); a hit hands out a copy of the draft
 * whose tokens are a prefix of the prompt, within what was restored, and
 * whose logits continue bitwise as a draft computed from scratch; a prompt
 * that leaves the entry early gets the draft cut back too; a draft whose
 * tokens are not a prefix of the entry's is refused (freed, not counted);
 * eviction takes the draft with its entry; the disk tier keeps it beside
 * the entry's file and gives it back after a restart, and removes a
 * corrupted draft file. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pcache/pcache.h"
#include "harness.h"

#define N 80

static rw_model *load(const char *rel, rw_gguf **g) {
    rw_error err = {0};
    rw_model *m = NULL;
    if (rw_gguf_open(rw_test_fixture_path(rel), g, &err) || rw_model_load(*g, &m, &err))
        rw_test_skip("fixture model missing");
    return m;
}

static rw_model_seq *run(rw_model *m, const int32_t *t, int64_t n, rw_threadpool *pool, float *logits) {
    rw_error err = {0};
    rw_model_seq *s = NULL;
    CHECK(rw_model_seq_new(m, RW_KV_F16, 0, &s, &err) == RW_OK);
    rw_forward_args a = {.tokens = t, .n = n, .logits = logits, .pool = pool};
    CHECK_MSG(rw_model_forward(m, s, &a, &err) == RW_OK, "%s", err.msg);
    return s;
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no fixtures");
    rw_gguf *g = NULL, *dg = NULL;
    rw_model *m = load("qwen35/qwen35-Q8_0.gguf", &g), *dm = load("qwen3next/qwen3next-Q8_0.gguf", &dg);
    rw_error err = {0};
    rw_threadpool *pool = NULL;
    CHECK(rw_threadpool_new(2, &pool, &err) == RW_OK);
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    float *lt = malloc((size_t)V * sizeof *lt), *l1 = malloc((size_t)V * sizeof *l1), *l2 = malloc((size_t)V * sizeof *l2);
    int32_t t[N + 1];
    for (int i = 0; i <= N; i++) t[i] = (int32_t)(1 + (i * 37 + 11) % (V - 1));

    rw_pcache *c = NULL;
    const rw_pcache_config cfg = {.mem_bytes = (size_t)1 << 30};
    CHECK(rw_pcache_new(m, RW_KV_F16, 0, &cfg, &c, &err) == RW_OK);
    rw_pcache_stats st0, st1;
    rw_pcache_get_stats(c, &st0);

    /* the entry t[0..N) with a draft over t[0..N-3) */
    rw_model_seq *draft = run(dm, t, N - 3, pool, l1);
    const size_t draft_bytes = rw_model_seq_bytes(draft);
    rw_pcache_insert_with_draft(c, run(m, t, N, pool, lt), draft, lt, 0, NULL);
    CHECK_MSG(rw_pcache_check(c, &err) == RW_OK, "%s", err.msg);
    rw_pcache_get_stats(c, &st1);
    CHECK(st1.bytes_kv_and_state >= draft_bytes); /* the draft is in the budget */

    /* the same prompt plus one: the draft comes back as a prefix of it */
    rw_model_seq *s = NULL, *d = NULL;
    int64_t reused = 0;
    CHECK(rw_pcache_acquire_with_draft(c, t, N + 1, pool, &s, &d, &reused, lt, NULL, &err) == RW_OK);
    CHECK(reused > 0 && d != NULL);
    if (d) {
        const int64_t dn = rw_model_seq_length(d);
        CHECK(dn > 0 && dn <= N - 3 && dn <= reused);
        CHECK(!memcmp(rw_model_seq_tokens(d), t, (size_t)dn * sizeof *t));
        /* it continues bitwise as a draft that saw only those tokens */
        rw_forward_args a = {.tokens = t + dn, .n = N + 1 - dn, .logits = l1, .pool = pool};
        CHECK(rw_model_forward(dm, d, &a, &err) == RW_OK);
        rw_model_seq *ref = run(dm, t, N + 1, pool, l2);
        CHECK(!memcmp(l1, l2, (size_t)V * sizeof *l1));
        rw_model_seq_free(ref);
    }
    rw_model_seq_free(s);
    rw_model_seq_free(d);
    s = d = NULL;

    /* a prompt that leaves the entry after 40 tokens: the draft within them */
    int32_t u[50];
    memcpy(u, t, 40 * sizeof *u);
    for (int i = 40; i < 50; i++) u[i] = (int32_t)((t[i] + 5) % V);
    CHECK(rw_pcache_acquire_with_draft(c, u, 50, pool, &s, &d, &reused, NULL, NULL, &err) == RW_OK);
    CHECK(reused <= 40);
    if (d) CHECK(rw_model_seq_length(d) <= reused && !memcmp(rw_model_seq_tokens(d), u, 40 * sizeof *u));
    rw_model_seq_free(s);
    rw_model_seq_free(d);
    s = d = NULL;

    /* a draft that is not a prefix of its entry's tokens is not kept */
    rw_model_seq *bad = run(dm, u, 50, pool, l1);
    rw_pcache_get_stats(c, &st0);
    rw_pcache_insert_with_draft(c, run(m, t, N - 10, pool, lt), bad, lt, 0, NULL);
    CHECK_MSG(rw_pcache_check(c, &err) == RW_OK, "%s", err.msg);
    CHECK(rw_pcache_acquire_with_draft(c, t, N - 10, pool, &s, &d, &reused, lt, NULL, &err) == RW_OK);
    CHECK(d == NULL || !memcmp(rw_model_seq_tokens(d), t, (size_t)rw_model_seq_length(d) * sizeof *t));
    rw_model_seq_free(s);
    rw_model_seq_free(d);
    rw_pcache_free(c);

    /* a budget too small for anything: the draft goes with its entry */
    const rw_pcache_config tiny = {.mem_bytes = 1};
    CHECK(rw_pcache_new(m, RW_KV_F16, 0, &tiny, &c, &err) == RW_OK);
    rw_pcache_insert_with_draft(c, run(m, t, N, pool, lt), run(dm, t, N, pool, l1), lt, 0, NULL);
    CHECK_MSG(rw_pcache_check(c, &err) == RW_OK, "%s", err.msg);
    rw_pcache_get_stats(c, &st1);
    CHECK_EQ_INT(st1.entries, 0);
    rw_pcache_free(c);

    /* the disk tier: an entry evicted to disk keeps its draft in its file,
     * and a cache made later on the same folder (a restart) with the draft
     * model gives it back, continuing bitwise; a file whose draft part is
     * corrupted is removed as a whole, never trusted */
    char dir[] = "/tmp/rw_pcache_draft_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const rw_pcache_config dc = {.mem_bytes = (size_t)1 << 30, .dir = dir, .dir_bytes = (size_t)1 << 30, .draft = dm};
    const rw_pcache_config small = {.mem_bytes = 1, .dir = dir, .dir_bytes = (size_t)1 << 30, .draft = dm};
    for (int corrupt = 0; corrupt < 2; corrupt++) {
        CHECK(rw_pcache_new(m, RW_KV_F16, 0, &small, &c, &err) == RW_OK); /* every entry goes to disk */
        rw_pcache_insert_with_draft(c, run(m, t, N, pool, lt), run(dm, t, N - 3, pool, l1), lt, 0, NULL);
        rw_pcache_flush(c, false, 60);
        rw_pcache_get_stats(c, &st1);
        CHECK(st1.disk_entries == 1);
        rw_pcache_free(c);
        int n_files = 0;
        char victim[512] = "";
        DIR *dd = opendir(dir);
        for (struct dirent *de; dd && (de = readdir(dd));) {
            size_t l = strlen(de->d_name);
            if (l > 4 && !strcmp(de->d_name + l - 4, ".rwc")) {
                n_files++;
                snprintf(victim, sizeof victim, "%s/%s", dir, de->d_name);
            }
        }
        if (dd) closedir(dd);
        CHECK_EQ_INT(n_files, 1);
        if (corrupt && victim[0]) { /* a byte near the end: the draft's state, the file's last part */
            FILE *f = fopen(victim, "r+b");
            CHECK(f != NULL);
            if (f) {
                fseek(f, 0, SEEK_END);
                long sz = ftell(f);
                fseek(f, sz - 40, SEEK_SET);
                int ch = fgetc(f);
                fseek(f, sz - 40, SEEK_SET);
                fputc(ch ^ 0x5A, f);
                fclose(f);
            }
        }
        CHECK(rw_pcache_new(m, RW_KV_F16, 0, &dc, &c, &err) == RW_OK);
        CHECK(rw_pcache_acquire_with_draft(c, t, N + 1, pool, &s, &d, &reused, lt, NULL, &err) == RW_OK);
        if (!corrupt) {
            CHECK(reused > 0);
            CHECK(d != NULL);
            if (d) {
                const int64_t dn = rw_model_seq_length(d);
                CHECK(dn > 0 && dn <= N - 3 && !memcmp(rw_model_seq_tokens(d), t, (size_t)dn * sizeof *t));
                rw_forward_args a = {.tokens = t + dn, .n = N + 1 - dn, .logits = l1, .pool = pool};
                CHECK(rw_model_forward(dm, d, &a, &err) == RW_OK);
                rw_model_seq *ref = run(dm, t, N + 1, pool, l2);
                CHECK(!memcmp(l1, l2, (size_t)V * sizeof *l1));
                rw_model_seq_free(ref);
            }
        } else {
            CHECK(reused == 0 && d == NULL);
            CHECK(access(victim, F_OK) != 0); /* removed, never trusted */
            rw_pcache_get_stats(c, &st1);
            CHECK(st1.disk_invalid >= 1);
            CHECK(st1.bytes_disk == 0); /* and no longer counted */
        }
        CHECK_MSG(rw_pcache_check(c, &err) == RW_OK, "%s", err.msg);
        rw_model_seq_free(s);
        rw_model_seq_free(d);
        s = d = NULL;
        rw_pcache_free(c);
        /* empty the folder for the next round */
        dd = opendir(dir);
        for (struct dirent *de; dd && (de = readdir(dd));) {
            if (de->d_name[0] == '.') continue;
            char p[600];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
        if (dd) closedir(dd);
    }
    rmdir(dir);

    free(lt);
    free(l1);
    free(l2);
    rw_threadpool_free(pool);
    rw_model_free(dm);
    rw_model_free(m);
    rw_gguf_close(dg);
    rw_gguf_close(g);
    return rw_test_done();
}
