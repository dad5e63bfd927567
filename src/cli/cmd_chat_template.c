/* cmd_chat_template.c - `rewind chat-template MODEL_OR_TEMPLATE --messages
 * FILE.json [--add-generation-prompt] [--tools FILE.json] [--enable-thinking
 * true|false] [--bos-token S] [--eos-token S] [--now YYYY-MM-DDTHH:MM:SS]`:
 * prints the rendered prompt exactly, with no newline added. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "rewind.h"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n - 1 == 0) {
            char *b = realloc(buf, cap * 2);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = n;
    return buf;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int rw_cmd_chat_template(int argc, char **argv) {
    const char *src_path = NULL, *msgs_path = NULL, *tools_path = NULL, *bos_arg = NULL, *eos_arg = NULL, *now = NULL;
    rw_template_vars o = rw_template_vars_default(); /* enable_thinking undefined */
    const char *thinking = NULL;
    bool add_gen = false;
    const rw_cli_opt opts[] = {
        {"--messages", RW_OPT_STR, &msgs_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--tools", RW_OPT_STR, &tools_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--add-generation-prompt", RW_OPT_FLAG, &add_gen, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--enable-thinking", RW_OPT_CHOICE, &thinking, 0, 0, 0, 0, "true|false", NULL, NULL},
        {"--bos-token", RW_OPT_STR, &bos_arg, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--eos-token", RW_OPT_STR, &eos_arg, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--now", RW_OPT_STR, &now, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    if (rw_cli_parse_opts("chat-template", argc, argv, opts, &src_path, 1, NULL)) return 2;
    o.add_generation_prompt = add_gen;
    if (thinking) o.enable_thinking = !strcmp(thinking, "true");
    if (now) {
        struct tm tm;
        const char *end = strptime(now, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!end || *end) {
            rw_cli_error("chat-template", "--now takes YYYY-MM-DDTHH:MM:SS, not '%s'", now);
            return 2;
        }
    }
    if (!src_path || !msgs_path) {
        fprintf(stderr, "usage: rewind chat-template MODEL_OR_TEMPLATE --messages FILE.json [--add-generation-prompt] "
                        "[--tools FILE.json] [--enable-thinking true|false] [--bos-token S] [--eos-token S] [--now T]\n");
        return 2;
    }
    rw_error err = {0};
    rw_chat_template *t = NULL;
    char *bos = NULL, *eos = NULL, *msgs = NULL, *tools = NULL, *out = NULL;
    int rc = 1;
    if (ends_with(src_path, ".gguf")) {
        rw_status s = rw_chat_template_load(src_path, &t, &bos, &eos, &err);
        if (s == RW_ERR_TEMPLATE) {
            fprintf(stderr, "%s\n", err.msg); /* the template's own message */
            goto done;
        } else if (s) {
            rw_cli_error("chat-template", "%s", err.msg);
            goto done;
        }
    } else {
        size_t len;
        char *src = read_all(src_path, &len);
        if (!src) {
            rw_cli_error("chat-template", "cannot read %s", src_path);
            goto done;
        }
        rw_status s = rw_chat_template_parse(src, len, &t, &err);
        free(src);
        if (s) {
            fprintf(stderr, "%s\n", err.msg);
            goto done;
        }
    }
    msgs = read_all(msgs_path, NULL);
    if (!msgs) {
        rw_cli_error("chat-template", "cannot read %s", msgs_path);
        goto done;
    }
    if (tools_path && !(tools = read_all(tools_path, NULL))) {
        rw_cli_error("chat-template", "cannot read %s", tools_path);
        goto done;
    }
    o.messages_json = msgs;
    o.tools_json = tools;
    o.bos_token = bos_arg ? bos_arg : bos;
    o.eos_token = eos_arg ? eos_arg : eos;
    o.now = now;
    size_t len;
    if (rw_chat_template_apply(t, &o, &out, &len, &err) != RW_OK) {
        fprintf(stderr, "%s\n", err.msg); /* for raise_exception(msg): exactly msg */
        goto done;
    }
    rc = fwrite(out, 1, len, stdout) == len ? 0 : 1;
done:
    free(out);
    free(msgs);
    free(tools);
    rw_free(bos);
    rw_free(eos);
    rw_chat_template_free(t);
    return rc;
}
