/* api_slots.c - llama-server's /slots: GET lists the engine's slots (the
 * --parallel places requests run in) with what each holds; POST
 * /slots/{id}?action=save|restore|erase writes the state a slot holds to a
 * file under --slot-save-path, loads one back into the prefix cache, or
 * forgets it (engine.h's rw_engine_slot_*; docs/server.md has the mapping).
 *
 * File names are plain names inside that folder: letters, digits, '.',
 * '_' and '-', not starting with '.', so no request reaches another path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/api_int.h"

enum { HEAD_TOKENS = 256 }; /* the tokens of each slot whose text GET /slots shows */

static rw_server__reply error_reply(int http, const char *type, const char *param, const char *fmt, const char *a) {
    rw_server__error e;
    char msg[400];
    snprintf(msg, sizeof msg, fmt, a);
    rw_server__errorf(&e, http, type, NULL, param, "%s", msg);
    return (rw_server__reply){.http = http, .body = rw_server__error_json(&e)};
}

static rw_server__reply json_reply(json_t *o) {
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!txt) return error_reply(500, "server_error", NULL, "%s", "out of memory");
    return (rw_server__reply){.http = 200, .body = txt};
}

rw_status rw_server__slots_setup(rw_server *s, const rw_server_config *cfg, rw_error *err) {
    s->no_slots = cfg->no_slots;
    if (!cfg->slot_save_path || !cfg->slot_save_path[0]) return RW_OK;
    struct stat sb;
    if (mkdir(cfg->slot_save_path, 0755) && errno != EEXIST)
        return rw_errorf(err, RW_ERR_IO, "cannot create the slot folder %s: %s", cfg->slot_save_path, strerror(errno));
    if (stat(cfg->slot_save_path, &sb) || !S_ISDIR(sb.st_mode))
        return rw_errorf(err, RW_ERR_IO, "--slot-save-path %s is not a folder", cfg->slot_save_path);
    if (!(s->slot_save_path = strdup(cfg->slot_save_path))) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    return RW_OK;
}

static rw_server__reply slots_off(void) {
    return error_reply(501, "not_supported_error", NULL, "%s", "This server has /slots turned off (--no-slots)");
}

rw_server__reply rw_server__slots(rw_server__model *m, bool fail) {
    const rw_server *s = m->srv;
    if (s->no_slots) return slots_off();
    const int n = (int)rw_engine_setting_get(m->engine, RW_ENGINE_MAX_RUNNING);
    const int64_t n_ctx = rw_engine_setting_get(m->engine, RW_ENGINE_N_CTX);
    rw_engine_slot *sl = calloc((size_t)n, sizeof *sl);
    int32_t *head = malloc((size_t)n * HEAD_TOKENS * sizeof *head);
    int64_t *n_head = calloc((size_t)n, sizeof *n_head);
    json_t *a = json_array();
    if (!sl || !head || !n_head || !a) {
        free(sl), free(head), free(n_head);
        json_decref(a);
        return error_reply(500, "server_error", NULL, "%s", "out of memory");
    }
    rw_engine_slots(m->engine, sl, head, HEAD_TOKENS, n_head);
    bool idle = false;
    for (int i = 0; i < n; i++) {
        char *text = NULL;
        size_t len = 0;
        if (n_head[i] &&
            rw_detokenize(m->tok, head + (size_t)i * HEAD_TOKENS, (size_t)n_head[i], true, &text, &len, NULL))
            text = NULL, len = 0;
        idle |= !sl[i].busy;
        json_array_append_new(a, json_pack("{s:i,s:I,s:I,s:b,s:I,s:I,s:o,s:b}", "id", i, "id_task",
                                           sl[i].busy ? (json_int_t)sl[i].request : (json_int_t)-1, "n_ctx",
                                           (json_int_t)n_ctx, "is_processing", sl[i].busy, "n_prompt_tokens",
                                           (json_int_t)sl[i].n_prompt, "n_tokens", (json_int_t)sl[i].n_tokens, "prompt",
                                           rw_server__text_lossy(text, len), "prompt_truncated",
                                           (sl[i].busy ? sl[i].n_prompt : sl[i].n_tokens) > n_head[i]));
        free(text);
    }
    free(sl), free(head), free(n_head);
    if (fail && !idle) {
        json_decref(a);
        return error_reply(503, "unavailable_error", NULL, "%s", "no slot available (every slot is processing)");
    }
    return json_reply(a);
}

static bool plain_name(const char *f) {
    size_t n = strlen(f);
    if (n == 0 || n > 200 || f[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char c = f[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

/* An engine error as an HTTP answer; the folder's path is not the
 * client's business: its messages name the file only. */
static rw_server__reply engine_error(const rw_server__model *m, rw_error *err) {
    const rw_server *s = m->srv;
    const size_t dl = s->slot_save_path ? strlen(s->slot_save_path) : 0;
    for (char *p; dl && (p = strstr(err->msg, s->slot_save_path)) && p[dl] == '/';)
        memmove(p, p + dl + 1, strlen(p + dl + 1) + 1);
    switch (err->code) {
    case RW_ERR_BUSY: return error_reply(503, "unavailable_error", NULL, "%s", err->msg);
    case RW_ERR_UNSUPPORTED: return error_reply(501, "not_supported_error", NULL, "%s", err->msg);
    case RW_ERR_RANGE:
    case RW_ERR_NOT_FOUND:
    case RW_ERR_FORMAT:
    case RW_ERR_INVALID_ARG:
    case RW_ERR_IO: return error_reply(400, "invalid_request_error", NULL, "%s", err->msg);
    default: return error_reply(500, "server_error", NULL, "%s", err->msg);
    }
}

rw_server__reply rw_server__slot_action(rw_server__model *m, const char *id, const char *action, const char *body,
                                        size_t len) {
    const rw_server *s = m->srv;
    if (s->no_slots) return slots_off();
    const int n = (int)rw_engine_setting_get(m->engine, RW_ENGINE_MAX_RUNNING);
    char *end = NULL;
    long slot = strtol(id, &end, 10);
    if (!id[0] || *end || id[0] < '0' || id[0] > '9' || slot < 0 || slot >= n) {
        char msg[64];
        snprintf(msg, sizeof msg, "%d", n - 1);
        return error_reply(400, "invalid_request_error", "id_slot", "Invalid slot id (this server has slots 0 to %s)",
                           msg);
    }
    const bool save = !strcmp(action, "save"), restore = !strcmp(action, "restore"), erase = !strcmp(action, "erase");
    if (!save && !restore && !erase)
        return error_reply(400, "invalid_request_error", "action", "%s",
                           "Invalid action: ?action= must be save, restore or erase");
    rw_error err = {0};
    const double t0 = rw_server__now();
    if (erase) {
        int64_t n_erased = 0;
        if (rw_engine_slot_erase(m->engine, (int)slot, &n_erased, &err)) return engine_error(m, &err);
        return json_reply(json_pack("{s:i,s:I}", "id_slot", (int)slot, "n_erased", (json_int_t)n_erased));
    }
    if (!s->slot_save_path)
        return error_reply(501, "not_supported_error", NULL, "%s",
                           "This server does not save or restore slots: start it with --slot-save-path DIR");
    json_error_t jerr;
    json_t *o = json_loadb(body ? body : "", len, 0, &jerr);
    json_t *fn = json_object_get(o, "filename");
    if (!json_is_string(fn) || strlen(json_string_value(fn)) != json_string_length(fn) ||
        !plain_name(json_string_value(fn))) {
        json_decref(o);
        return error_reply(400, "invalid_request_error", "filename", "%s",
                           "Invalid filename: give {\"filename\": NAME}, a plain file name (letters, digits, '.', '_', "
                           "'-'; not starting with '.'; no folders)");
    }
    char *path = malloc(strlen(s->slot_save_path) + json_string_length(fn) + 2);
    if (!path) {
        json_decref(o);
        return error_reply(500, "server_error", NULL, "%s", "out of memory");
    }
    sprintf(path, "%s/%s", s->slot_save_path, json_string_value(fn));
    int64_t n_tok = 0;
    size_t n_bytes = 0;
    rw_status st = save ? rw_engine_slot_save(m->engine, (int)slot, path, &n_tok, &n_bytes, &err)
                        : rw_engine_slot_restore(m->engine, (int)slot, path, &n_tok, &n_bytes, &err);
    free(path);
    if (st) {
        json_decref(o);
        if (save && st == RW_ERR_IO) err.code = RW_ERR_INTERNAL; /* writing into our folder failed: a 500 */
        return engine_error(m, &err);
    }
    const double ms = 1e3 * (rw_server__now() - t0);
    json_t *out = json_pack("{s:i,s:O,s:I,s:I,s:{s:f}}", "id_slot", (int)slot, "filename", fn,
                            save ? "n_saved" : "n_restored", (json_int_t)n_tok, save ? "n_written" : "n_read",
                            (json_int_t)n_bytes, "timings", save ? "save_ms" : "restore_ms", ms);
    json_decref(o);
    return json_reply(out);
}
