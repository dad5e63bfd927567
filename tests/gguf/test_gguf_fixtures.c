/* test_gguf_fixtures.c - the reader against every fixture GGUF's JSON, and
 * the writer's byte-for-byte round trip of every fixture GGUF. */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "harness.h"

/* Compares the tensor table of g with a JSON list of {name,type,ne,offset,n_bytes}. */
static void check_tensors(const char *path, const rw_gguf *g, json_t *tensors) {
    CHECK_MSG(json_array_size(tensors) == rw_gguf_n_tensors(g), "%s: %zu tensors in JSON, %zu read", path,
              json_array_size(tensors), rw_gguf_n_tensors(g));
    size_t i;
    json_t *jt;
    json_array_foreach(tensors, i, jt) {
        const char *name = json_string_value(json_object_get(jt, "name"));
        const rw_gguf_tensor *t = name ? rw_gguf_find_tensor(g, name) : NULL;
        CHECK_MSG(t != NULL, "%s: tensor %s missing", path, name ? name : "?");
        if (!t) continue;
        CHECK_MSG(!strcmp(rw_dtype_name(t->type), json_string_value(json_object_get(jt, "type"))), "%s: %s type", path, name);
        json_t *ne = json_object_get(jt, "ne");
        CHECK_EQ_INT(json_array_size(ne), t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < json_array_size(ne); d++)
            CHECK_EQ_INT(json_integer_value(json_array_get(ne, d)), t->ne[d]);
        json_t *off = json_object_get(jt, "offset");
        if (!off) off = json_object_get(jt, "offset_bytes");
        CHECK_EQ_INT(json_integer_value(off), t->file_offset);
        json_t *nb = json_object_get(jt, "n_bytes");
        if (nb) CHECK_EQ_INT(json_integer_value(nb), t->nbytes);
    }
}

/* Writes back every kv and tensor of g and compares with the original bytes. */
static void check_round_trip(const char *path, const rw_gguf *g) {
    rw_error err = {0};
    rw_gguf_writer *w = rw_gguf_writer_new();
    CHECK(w != NULL);
    if (rw_gguf_n_tensors(g) == 0) rw_gguf_writer_set_pad_empty(w, rw_gguf_file_size(g) >= rw_gguf_data_offset(g));
    for (size_t i = 0; i < rw_gguf_n_kv(g); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        CHECK_MSG(rw_gguf_writer_add_kv(w, kv->key, &kv->value, &err) == RW_OK, "%s: %s", path, err.msg);
    }
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        CHECK_MSG(rw_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL, &err) == RW_OK,
                  "%s: %s", path, err.msg);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(rw_gguf_writer_write_stream(w, f, &err) == RW_OK);
    fclose(f);
    size_t n = rw_gguf_file_size(g);
    CHECK_MSG(len == n, "%s: rewritten size %zu, original %zu", path, len, n);
    if (len == n) {
        const unsigned char *a = (const unsigned char *)buf, *b = rw_gguf_file_data(g);
        size_t first = 0;
        while (first < n && a[first] == b[first]) first++;
        CHECK_MSG(first == n, "%s: rewritten file differs first at byte %zu", path, first);
    }
    free(buf);
    rw_gguf_writer_free(w);
}

static int n_files = 0;

static void check_file(const char *path, const char *json_path, const char *tensors_key) {
    rw_gguf *g;
    rw_error err = {0};
    rw_status s = rw_gguf_open(path, &g, &err);
    CHECK_MSG(s == RW_OK, "%s: %s", path, err.msg);
    if (s) return;
    n_files++;
    if (json_path) {
        json_error_t jerr;
        json_t *root = json_load_file(json_path, 0, &jerr);
        if (root) {
            json_t *tensors = json_object_get(root, tensors_key);
            if (tensors) check_tensors(path, g, tensors);
            json_decref(root);
        }
    }
    check_round_trip(path, g);
    rw_gguf_close(g);
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int main(void) {
    const char *fx = rw_test_fixtures();
    if (!fx) rw_test_skip("no ../shared/fixtures");
    const char *dirs[] = {"llama", "qwen3", "qwen35", "qwen35moe", "qwen3next", "granitehybrid", "lfm2", "nemotron_h", "gemma3", "gpt-oss", "quant", "tokenizer"};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", fx, dirs[d]);
        DIR *dp = opendir(dir);
        if (!dp) continue;
        struct dirent *e;
        while ((e = readdir(dp))) {
            if (!ends_with(e->d_name, ".gguf")) continue;
            char path[4200], json[4300];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            snprintf(json, sizeof json, "%.*s.json", (int)(strlen(path) - 5), path);
            if (!strcmp(dirs[d], "quant")) check_file(path, NULL, NULL);
            else if (!strcmp(dirs[d], "tokenizer")) check_file(path, NULL, NULL);
            else check_file(path, json, "tensors");
        }
        closedir(dp);
    }
    printf("%d fixture files checked\n", n_files);
    CHECK(n_files > 40);
    return rw_test_done();
}
