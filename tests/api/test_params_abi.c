/* test_params_abi.c - parameter structs that grow without breaking callers
 * (include/rewind.h, docs/api.md "Compatibility"): the defaults carry their
 * size; a zeroed struct (struct_size 0) and a struct of the first sized
 * layout (rw_engine_params without the fields added since) are read only as
 * far as they go, the fields they lack taking the defaults; a newer
 * program's larger struct is accepted while its unknown fields are zero,
 * refused once one is set; a struct_size below the first layout is
 * refused. Includes only rewind.h besides the harness. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rewind.h"

/* The first sized layout of rw_engine_params ends at `manual`; the fields
 * after it came later. */
#define ENGINE_V1 (offsetof(rw_engine_params, manual) + sizeof(bool))

static char *answer(rw_engine *e, const char *prompt, rw_gen_options *o) {
    char *text = NULL;
    rw_gen_result res;
    rw_error err;
    CHECK_MSG(!rw_engine_run(e, prompt, o, &text, &res, &err), "%s", err.msg);
    CHECK(res.completion_tokens == 6);
    return text;
}

int main(void) {
    CHECK(rw_model_params_default().struct_size == sizeof(rw_model_params));
    CHECK(rw_gen_options_default().struct_size == sizeof(rw_gen_options));
    CHECK(rw_engine_params_default().struct_size == sizeof(rw_engine_params));
    CHECK(rw_embed_options_default().struct_size == sizeof(rw_embed_options));
    CHECK(rw_quantize_params_default().struct_size == sizeof(rw_quantize_params));
    {
        /* a struct_size below the first layout is refused, before any file is read */
        rw_quantize_params qp = rw_quantize_params_default();
        rw_error err;
        qp.struct_size = 4;
        CHECK(rw_quantize_file("/nonexistent/in.gguf", "/nonexistent/out.gguf", "Q8_0", &qp, &err) ==
                  RW_ERR_INVALID_ARG &&
              strstr(err.msg, "rw_quantize_params"));
    }
    CHECK(rw_engine_params_default().cache_write_delay == 1.0);
    CHECK(ENGINE_V1 < sizeof(rw_engine_params));

    /* *_init writes only the caller's bytes: an old program's shorter
     * struct gets its first bytes of the defaults, the bytes after it stay
     * as they were; a newer program's longer one gets zeros (defaults)
     * past the fields this library knows */
    _Alignas(rw_engine_params) unsigned char buf[sizeof(rw_engine_params) + 32];
    memset(buf, 0xa5, sizeof buf);
    rw_engine_params_init((rw_engine_params *)buf, ENGINE_V1);
    rw_engine_params full = rw_engine_params_default();
    size_t got_size;
    memcpy(&got_size, buf, sizeof got_size);
    CHECK(got_size == ENGINE_V1);
    CHECK(!memcmp(buf + sizeof(size_t), (unsigned char *)&full + sizeof(size_t), ENGINE_V1 - sizeof(size_t)));
    bool untouched = true;
    for (size_t i = ENGINE_V1; i < sizeof buf; i++) untouched &= buf[i] == 0xa5;
    CHECK(untouched);
    memset(buf, 0xa5, sizeof buf);
    rw_engine_params_init((rw_engine_params *)buf, sizeof buf);
    bool zeros = true;
    for (size_t i = sizeof(rw_engine_params); i < sizeof buf; i++) zeros &= buf[i] == 0;
    CHECK(zeros && ((rw_engine_params *)buf)->cache_write_delay == 1.0);

    rw_error err;
    rw_model *m = NULL;
    rw_model_params small = rw_model_params_default();
    small.struct_size = sizeof(size_t); /* below the first layout */
    CHECK(rw_model_open("x.gguf", &small, &m, &err) == RW_ERR_INVALID_ARG && strstr(err.msg, "struct_size"));

    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    if (!rw_test_fixtures()) rw_test_skip("no fixtures");
    /* a newer program's struct: 16 more bytes, zero (fields it left at
     * their defaults): accepted */
    unsigned char *newer = calloc(1, sizeof(rw_model_params) + 16);
    rw_model_params mp = rw_model_params_default();
    mp.struct_size = sizeof(rw_model_params) + 16;
    memcpy(newer, &mp, sizeof mp);
    CHECK_MSG(!rw_model_open(path, (const rw_model_params *)newer, &m, &err), "%s", err.msg);
    if (!m) return rw_test_done();
    /* one of its unknown fields set: refused, naming the byte */
    newer[sizeof(rw_model_params) + 3] = 1;
    rw_model *m2 = NULL;
    CHECK(rw_model_open(path, (const rw_model_params *)newer, &m2, &err) == RW_ERR_UNSUPPORTED && !m2);
    CHECK_MSG(strstr(err.msg, "rw_model_params") && strstr(err.msg, "past"), "%s", err.msg);
    free(newer);

    /* the reference: today's struct, defaults, a manual engine */
    rw_engine_params ep = rw_engine_params_default();
    ep.manual = true;
    rw_gen_options o = rw_gen_options_default();
    o.max_tokens = 6;
    const char *prompt = "<|im_start|>user\nCount: one two three<|im_end|>\n<|im_start|>assistant\n";
    rw_engine *e = NULL;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    if (!e) return rw_test_done();
    char *want = answer(e, prompt, &o);
    rw_engine_close(e);

    /* a field the library checks, set wrong: today's struct_size reads it */
    ep.cache_write_delay = -1;
    CHECK(rw_engine_open(m, &ep, &e, &err) == RW_ERR_INVALID_ARG && !e && strstr(err.msg, "cache_write_delay"));

    /* the same bytes under the first layout's struct_size: the library
     * stops before cache_write_delay and takes its default, so it opens */
    ep.struct_size = ENGINE_V1;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    if (e) {
        char *got = answer(e, prompt, &o);
        CHECK(want && got && !strcmp(want, got));
        rw_free(got);
        rw_engine_close(e);
    }

    /* an old program's struct is only ENGINE_V1 bytes long: nothing past
     * it is read (under AddressSanitizer a read past would stop the test) */
    rw_engine_params *old = malloc(ENGINE_V1);
    ep = rw_engine_params_default();
    ep.manual = true;
    ep.struct_size = ENGINE_V1;
    memcpy(old, &ep, ENGINE_V1);
    CHECK_MSG(!rw_engine_open(m, old, &e, &err), "%s", err.msg);
    free(old);
    if (e) {
        /* struct_size 0 (a zeroed struct of the first layout) for the
         * options: read as that layout */
        rw_gen_options zero = {0};
        zero.max_tokens = 6;
        char *got = answer(e, prompt, &zero);
        CHECK(want && got && !strcmp(want, got));
        rw_free(got);
        rw_gen_options tiny = o;
        tiny.struct_size = 4;
        CHECK(rw_engine_run(e, prompt, &tiny, NULL, NULL, &err) == RW_ERR_INVALID_ARG &&
              strstr(err.msg, "rw_gen_options"));
        rw_embed_options eo = rw_embed_options_default();
        eo.struct_size = 4;
        const int32_t ids[2] = {1, 2};
        float vec[8];
        CHECK(rw_engine_embed(e, ids, 2, &eo, vec, NULL, &err) == RW_ERR_INVALID_ARG &&
              strstr(err.msg, "rw_embed_options"));
        rw_engine_close(e);
    }
    rw_free(want);
    rw_model_close(m);
    return rw_test_done();
}
