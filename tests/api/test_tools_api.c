/* test_tools_api.c - the header's tools section used as an embedder uses
 * it: the GGUF reader against the quantization zoo (every tensor's rows
 * equal gguf-py's dequantized values, bit for bit, and the metadata found
 * by iteration and by key agree), rw_seq_eval_batch against rw_seq_eval
 * alone (bitwise, with its argument errors), rw_model_state_bytes,
 * rw_model_text_get, rw_cache_verify on an empty folder, the
 * comparison switches refused while a model is open, and a split model
 * (rw_model_file_split / _merge, its parts read as one file). Includes
 * only rewind.h besides the harness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "rewind.h"

static float *read_f32(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)bytes);
    *n = v && fread(v, 1, (size_t)bytes, f) == (size_t)bytes ? (size_t)bytes / sizeof *v : 0;
    fclose(f);
    return v;
}

/* Every tensor of zoo-TYPE.gguf read row by row equals zoo-TYPE.dequant.f32. */
static void check_zoo(const char *fx, const char *type) {
    char path[1024], ref_path[1024];
    snprintf(path, sizeof path, "%s/quant/zoo-%s.gguf", fx, type);
    snprintf(ref_path, sizeof ref_path, "%s/quant/zoo-%s.dequant.f32", fx, type);
    size_t n_ref = 0;
    float *ref = read_f32(ref_path, &n_ref);
    CHECK_MSG(ref && n_ref, "cannot read %s", ref_path);
    if (!ref) return;
    rw_model_file *f = NULL;
    rw_error err = {0};
    CHECK_MSG(rw_model_file_open(path, &f, &err) == RW_OK, "%s: %s", path, err.msg);
    if (!f) return;
    size_t at = 0;
    rw_tensor_info t;
    for (size_t i = 0; rw_model_file_tensor(f, i, &t); i++) {
        CHECK(rw_model_file_find_tensor(f, t.name) == (int64_t)i);
        CHECK_MSG(t.readable, "%s: %s is %s", path, t.name, t.type);
        const uint64_t rows = t.ne[1] * t.ne[2] * t.ne[3];
        float *row = malloc(t.ne[0] * sizeof *row);
        for (uint64_t r = 0; r < rows && at + t.ne[0] <= n_ref; r++, at += t.ne[0]) {
            CHECK(rw_model_file_read_rows(f, i, r, 1, row, &err) == RW_OK);
            CHECK_MSG(!memcmp(row, ref + at, t.ne[0] * sizeof *row), "%s: %s row %llu", path, t.name,
                      (unsigned long long)r);
        }
        CHECK(rw_model_file_read_rows(f, i, rows, 1, row, &err) == RW_ERR_RANGE);
        free(row);
    }
    CHECK_MSG(at == n_ref, "%s: %zu of %zu reference values compared", path, at, n_ref);
    CHECK(rw_model_file_find_tensor(f, "no such tensor") == -1);
    CHECK(!rw_model_file_tensor(f, rw_model_file_n_tensors(f), &t) && !t.name);
    CHECK(!rw_model_file_tensor(f, 0, NULL)); /* a NULL out is refused, not written */
    /* the metadata: by position and by key the same values */
    rw_meta_value v, w;
    for (size_t i = 0; i < rw_model_file_n_meta(f); i++) {
        const char *key = rw_model_file_meta(f, i, &v);
        CHECK(key && rw_model_file_find_meta(f, key, &w));
        CHECK(v.type == w.type && v.u == w.u && v.i == w.i && v.str_len == w.str_len && v.n_elems == w.n_elems);
        if (v.type == RW_META_ARRAY && v.n_elems) {
            rw_meta_value e;
            CHECK(rw_meta_elem(&v, 0, &e) && e.type == v.elem_type);
            CHECK(!rw_meta_elem(&v, v.n_elems, &e));
            CHECK(!rw_meta_elem(&v, 0, NULL));
        }
    }
    CHECK(!rw_model_file_meta(f, rw_model_file_n_meta(f), &v) && v.type == 0 && !v.str);
    CHECK(rw_model_file_find_meta(f, "general.architecture", &v) && v.type == RW_META_STRING && v.str_len > 0);
    CHECK(!strcmp(rw_meta_type_name(RW_META_STRING), "string") && !strcmp(rw_meta_type_name((rw_meta_type)99), "?"));
    CHECK(rw_model_file_size(f) > rw_model_file_data_offset(f) && rw_model_file_version(f) >= 2);
    rw_model_file_close(f);
    free(ref);
}

/* Two sequences batched equal each alone, logits of every position. */
static void check_batch(const char *model_path) {
    rw_model *m = NULL;
    rw_error err = {0};
    rw_model_params mp = rw_model_params_default();
    mp.n_threads = 2;
    CHECK_MSG(rw_model_open(model_path, &mp, &m, &err) == RW_OK, "%s", err.msg);
    if (!m) return;
    const int64_t nv = rw_model_n_vocab(m);
    int32_t a[23], b[9];
    for (int i = 0; i < 23; i++) a[i] = (int32_t)((i * 37 + 5) % nv);
    for (int i = 0; i < 9; i++) b[i] = (int32_t)((i * 11 + 3) % nv);
    float *la = malloc(23 * (size_t)nv * sizeof *la), *lb = malloc(9 * (size_t)nv * sizeof *lb);
    float *solo = malloc((size_t)nv * sizeof *solo);
    rw_seq *s1 = NULL, *s2 = NULL, *s3 = NULL;
    CHECK(!rw_seq_new(m, 64, true, &s1, &err) && !rw_seq_new(m, 64, true, &s2, &err) &&
          !rw_seq_new(m, 64, true, &s3, &err));
    rw_seq_batch items[2] = {{.seq = s1, .ids = a, .n = 23, .logits = la, .all_logits = true},
                             {.seq = s2, .ids = b, .n = 9, .logits = lb, .all_logits = true}};
    CHECK_MSG(rw_seq_eval_batch(items, 2, &err) == RW_OK, "%s", err.msg);
    CHECK(rw_seq_length(s1) == 23 && rw_seq_length(s2) == 9);
    for (int i = 0; i < 23; i++) { /* s3 one token at a time: every row bitwise */
        CHECK(rw_seq_eval(s3, a + i, 1, solo, &err) == RW_OK);
        CHECK_MSG(!memcmp(solo, la + (size_t)i * (size_t)nv, (size_t)nv * sizeof *solo), "row %d", i);
    }
    /* argument errors leave the sequences as they were */
    rw_seq_batch twice[2] = {{.seq = s1, .ids = a, .n = 1}, {.seq = s1, .ids = b, .n = 1}};
    CHECK(rw_seq_eval_batch(twice, 2, &err) == RW_ERR_INVALID_ARG && rw_seq_length(s1) == 23);
    CHECK(rw_seq_eval_batch(items, 0, &err) == RW_ERR_INVALID_ARG);
    rw_seq_batch none = {.seq = s2, .ids = b, .n = 0};
    CHECK(rw_seq_eval_batch(&none, 1, &err) == RW_ERR_INVALID_ARG && rw_seq_length(s2) == 9);
    CHECK(rw_model_state_bytes(m, 64, true, 0) > 0 && rw_model_state_bytes(m, 0, true, 0) == 0);
    CHECK(rw_model_state_bytes(m, 4096, true, 0) >= rw_model_state_bytes(m, 64, true, 0));
    CHECK(rw_model_text_get(m, (rw_model_text)77) == NULL);
    /* the switches: refused while a model is open */
    CHECK(rw_set_packed_panels(true, &err) == RW_ERR_BUSY && rw_set_avx_vnni(true, &err) == RW_ERR_BUSY);
    CHECK(rw_set_weight_prefetch("l1", &err) == RW_ERR_BUSY);
    CHECK(rw_set_stored_panels("all", &err) == RW_ERR_BUSY && !strcmp(rw_get_stored_panels(), "experts"));
    /* an empty disk-tier folder verifies with nothing in it */
    char dir[] = "/tmp/rw_tools_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    rw_engine_params ep = rw_engine_params_default();
    int ok = -1, bad = -1, unreadable = -1;
    CHECK(rw_cache_verify(m, &ep, &ok, &bad, &unreadable, &err) == RW_ERR_INVALID_ARG && ok == 0);
    ep.cache_dir = dir;
    CHECK_MSG(rw_cache_verify(m, &ep, &ok, &bad, &unreadable, &err) == RW_OK, "%s", err.msg);
    CHECK(ok == 0 && bad == 0 && unreadable == 0);
    rmdir(dir);
    rw_seq_free(s1);
    rw_seq_free(s2);
    rw_seq_free(s3);
    free(la);
    free(lb);
    free(solo);
    rw_model_close(m);
    CHECK(rw_set_packed_panels(true, &err) == RW_OK && rw_set_avx_vnni(true, &err) == RW_OK);
    CHECK(rw_set_weight_prefetch("l3", &err) == RW_ERR_INVALID_ARG && strstr(err.msg, "l3"));
    CHECK(rw_set_weight_prefetch(NULL, &err) == RW_ERR_INVALID_ARG);
    CHECK(rw_set_weight_prefetch("l2", &err) == RW_OK && !strcmp(rw_get_weight_prefetch(), "l2"));
    CHECK(rw_set_weight_prefetch("l1", &err) == RW_OK && !strcmp(rw_get_weight_prefetch(), "l1"));
    CHECK(rw_set_weight_prefetch("auto", &err) == RW_OK);
    CHECK(rw_set_stored_panels("some", &err) == RW_ERR_INVALID_ARG && strstr(err.msg, "some"));
    CHECK(rw_set_stored_panels(NULL, &err) == RW_ERR_INVALID_ARG);
    CHECK(rw_set_stored_panels("off", &err) == RW_OK && !strcmp(rw_get_stored_panels(), "off"));
    CHECK(rw_set_stored_panels("all", &err) == RW_OK && !strcmp(rw_get_stored_panels(), "all"));
    CHECK(rw_set_stored_panels("experts", &err) == RW_OK && !strcmp(rw_get_stored_panels(), "experts"));
}

static uint64_t file_bytes(const char *path) {
    struct stat st;
    return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

/* zoo-Q4_K.gguf (5 tensors) split 2 tensors a part: 3 parts read as the
 * one file (tensors, parts, rows, bytes), and merged back. */
static void check_split(const char *one) {
    char dir[] = "/tmp/rw_split_XXXXXX", prefix[64], first[96], part[96], merged[96];
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    snprintf(prefix, sizeof prefix, "%s/zoo", dir);
    snprintf(first, sizeof first, "%s-00001-of-00003.gguf", prefix);
    snprintf(merged, sizeof merged, "%s/merged.gguf", dir);
    rw_error err = {0};
    uint32_t n = 9;
    CHECK(rw_model_file_split(one, prefix, 2, 1000, &n, &err) == RW_ERR_INVALID_ARG && n == 0);
    CHECK(rw_model_file_split(one, prefix, 0, 0, NULL, &err) == RW_ERR_INVALID_ARG);
    CHECK(rw_model_file_split(NULL, prefix, 2, 0, NULL, &err) == RW_ERR_INVALID_ARG);
    CHECK(rw_model_file_merge(one, merged, &err) == RW_ERR_INVALID_ARG && strstr(err.msg, "not a split model"));
    CHECK(rw_model_file_split(one, prefix, 2, 0, &n, &err) == RW_OK && n == 3);
    rw_model_file *a = NULL, *b = NULL, *m = NULL;
    CHECK(rw_model_file_open(one, &a, &err) == RW_OK && rw_model_file_open(first, &b, &err) == RW_OK);
    uint64_t bytes = 0;
    for (int i = 1; i <= 3; i++) {
        snprintf(part, sizeof part, "%s-%05d-of-00003.gguf", prefix, i);
        bytes += file_bytes(part);
    }
    if (a && b) {
        CHECK(rw_model_file_n_parts(a) == 1 && rw_model_file_n_parts(b) == 3 && rw_model_file_n_parts(NULL) == 0);
        CHECK(rw_model_file_size(b) == bytes && rw_model_file_size(a) == file_bytes(one));
        CHECK(rw_model_file_n_tensors(b) == rw_model_file_n_tensors(a) && rw_model_file_n_tensors(b) == 5);
        for (size_t i = 0; i < rw_model_file_n_tensors(a); i++) {
            rw_tensor_info ta, tb;
            CHECK(rw_model_file_tensor(a, i, &ta) && rw_model_file_tensor(b, i, &tb));
            CHECK(!strcmp(ta.name, tb.name) && ta.nbytes == tb.nbytes && rw_model_file_tensor_part(b, i) == i / 2);
            CHECK(rw_model_file_find_tensor(b, ta.name) == (int64_t)i);
            float *ra = malloc(ta.ne[0] * sizeof *ra), *rb = malloc(ta.ne[0] * sizeof *rb);
            CHECK(ra && rb && rw_model_file_read_rows(a, i, 1, 1, ra, &err) == RW_OK &&
                  rw_model_file_read_rows(b, i, 1, 1, rb, &err) == RW_OK && !memcmp(ra, rb, ta.ne[0] * sizeof *ra));
            free(ra);
            free(rb);
        }
        CHECK(rw_model_file_tensor_part(b, 99) == 0);
    }
    snprintf(part, sizeof part, "%s-00002-of-00003.gguf", prefix);
    CHECK(rw_model_file_open(part, &m, &err) == RW_ERR_INVALID_ARG && !m && strstr(err.msg, first));
    CHECK(rw_model_file_merge(first, merged, &err) == RW_OK && rw_model_file_open(merged, &m, &err) == RW_OK);
    rw_meta_value v;
    if (m)
        CHECK(rw_model_file_n_parts(m) == 1 && rw_model_file_n_tensors(m) == 5 &&
              rw_model_file_find_meta(m, "split.count", &v) && v.u == 0);
    rw_model_file_close(a);
    rw_model_file_close(b);
    rw_model_file_close(m);
    for (int i = 1; i <= 3; i++) {
        snprintf(part, sizeof part, "%s-%05d-of-00003.gguf", prefix, i);
        remove(part);
    }
    remove(merged);
    rmdir(dir);
}

int main(void) {
    const char *fx = rw_test_fixtures();
    char path[1024];
    snprintf(path, sizeof path, "%s/quant/zoo-Q4_K.gguf", fx);
    if (access(path, R_OK)) rw_test_skip("no quantization zoo in the fixtures");
    rw_model_file *f = NULL;
    rw_error err = {0};
    CHECK(rw_model_file_open("/nonexistent.gguf", &f, &err) == RW_ERR_IO && !f && strstr(err.msg, "nonexistent"));
    const char *types[] = {"F16",  "BF16", "Q4_0", "Q4_1",   "Q5_0",   "Q5_1",  "Q8_0",  "Q2_K", "Q3_K",
                           "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_zoo(fx, types[i]);
    check_split(path);
    snprintf(path, sizeof path, "%s/qwen35/qwen35-Q8_0.gguf", fx);
    check_batch(path);
    return rw_test_done();
}
