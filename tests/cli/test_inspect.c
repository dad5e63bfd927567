/* test_inspect.c - `rewind inspect --json` against every model fixture's JSON
 * (metadata values, tensor names, types, shapes, offsets, sizes), and the
 * exit status / one-line error of `rewind inspect` on broken files. */
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *rewind_bin(void) {
    const char *b = getenv("REWIND");
    return b && *b ? b : "build/rewind";
}

/* Runs `rewind inspect PATH --json` and parses its stdout. */
static json_t *inspect_json(const char *path) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' --json", rewind_bin(), path);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    json_error_t jerr;
    json_t *root = json_loadf(p, 0, &jerr);
    int rc = pclose(p);
    CHECK_MSG(rc == 0, "%s exited %d", cmd, rc);
    CHECK_MSG(root != NULL, "%s: invalid JSON: %s", cmd, jerr.text);
    return root;
}

static void compare_with_fixture(const char *gguf, const char *json_path) {
    json_error_t jerr;
    json_t *want = json_load_file(json_path, 0, &jerr);
    if (!want) return; /* not every .json is a model description */
    json_t *got = inspect_json(gguf);
    if (!got) {
        json_decref(want);
        return;
    }
    const char *key;
    json_t *v;
    json_t *meta = json_object_get(got, "metadata");
    json_object_foreach(json_object_get(want, "gguf_metadata"), key, v) {
        json_t *g = json_object_get(meta, key);
        CHECK_MSG(g && json_equal(g, v), "%s: metadata %s differs", gguf, key);
    }
    json_t *gt = json_object_get(got, "tensors"), *wt = json_object_get(want, "tensors");
    CHECK_MSG(json_array_size(gt) == json_array_size(wt), "%s: tensor count", gguf);
    for (size_t i = 0; i < json_array_size(wt) && i < json_array_size(gt); i++) {
        json_t *a = json_array_get(gt, i), *b = json_array_get(wt, i);
        CHECK_MSG(json_equal(json_object_get(a, "name"), json_object_get(b, "name")), "%s: tensor %zu name", gguf, i);
        CHECK_MSG(json_equal(json_object_get(a, "type"), json_object_get(b, "type")), "%s: tensor %zu type", gguf, i);
        CHECK_MSG(json_equal(json_object_get(a, "ne"), json_object_get(b, "ne")), "%s: tensor %zu ne", gguf, i);
        CHECK_MSG(json_equal(json_object_get(a, "offset"), json_object_get(b, "offset")), "%s: tensor %zu offset", gguf, i);
        CHECK_MSG(json_equal(json_object_get(a, "nbytes"), json_object_get(b, "n_bytes")), "%s: tensor %zu nbytes", gguf, i);
    }
    json_decref(got);
    json_decref(want);
}

/* A broken file: exit status 1 and exactly one line on stderr. */
static void check_broken(const char *path) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' 2>&1 >/dev/null", rewind_bin(), path);
    FILE *p = popen(cmd, "r");
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    CHECK_MSG(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "%s: exit status %d", path, rc);
    char *nl = strchr(out, '\n');
    CHECK_MSG(n > 0 && nl && nl[1] == 0, "%s: stderr is not one line: %s", path, out);
}

int main(void) {
    const char *fx = rw_test_fixtures();
    if (!fx) rw_test_skip("no ../shared/fixtures");
    const char *dirs[] = {"llama", "qwen3", "qwen35", "qwen35moe", "qwen3next", "granitehybrid", "lfm2", "nemotron_h",
                          "gemma3", "gpt-oss"};
    int n = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", fx, dirs[d]);
        DIR *dp = opendir(dir);
        if (!dp) continue;
        struct dirent *e;
        while ((e = readdir(dp))) {
            size_t len = strlen(e->d_name);
            if (len < 6 || strcmp(e->d_name + len - 5, ".gguf")) continue;
            char gguf[4400], json[4400];
            snprintf(gguf, sizeof gguf, "%s/%s", dir, e->d_name);
            snprintf(json, sizeof json, "%s/%.*s.json", dir, (int)(len - 5), e->d_name);
            compare_with_fixture(gguf, json);
            n++;
        }
        closedir(dp);
    }
    CHECK(n >= 20);

    /* truncated copies of one model, and a file that is not GGUF at all */
    size_t size;
    char *data = rw_test_read_file(rw_test_fixture_path("llama/llama-Q8_0.gguf"), &size);
    CHECK(data != NULL);
    char tmp[] = "/tmp/rw_inspect_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    close(fd);
    size_t cuts[] = {0, 3, 10, 30, 500, 4000, size / 2, size - 1};
    for (size_t i = 0; data && i < sizeof cuts / sizeof cuts[0]; i++) {
        FILE *f = fopen(tmp, "wb");
        fwrite(data, 1, cuts[i], f);
        fclose(f);
        check_broken(tmp);
    }
    check_broken("/nonexistent/file.gguf");
    unlink(tmp);
    free(data);
    printf("%d fixture files compared\n", n);
    return rw_test_done();
}
