/* client.h - a small blocking HTTP/1.1 client for the tests, `rewind bench
 * serve` and `rewind demo-client`: one request per connection
 * ("Connection: close"), Content-Length or chunked bodies, body bytes handed
 * to a callback as they arrive (for streaming), and a parser of server-sent
 * events. Plain sockets, numeric addresses only. */
#ifndef RW_TOOLS_HTTP_CLIENT_H
#define RW_TOOLS_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

/* Body bytes as they arrive; return false to hang up at once. */
typedef bool (*rw_http_data_fn)(void *user, const char *data, size_t n);

typedef struct {
    const char *host;    /* numeric address; NULL = 127.0.0.1 */
    int port;
    const char *method;  /* "GET", "POST", ... */
    const char *path;
    const char *headers; /* extra header lines, each ending in "\r\n", or NULL */
    const char *body;    /* may be NULL */
    size_t body_len;
    rw_http_data_fn on_data; /* NULL: only collect the body */
    void *user;
    int timeout_ms;      /* per read; 0 = 120000 */
} rw_http_request;

typedef struct {
    int status;
    char *body;        /* the whole body, NUL-terminated (malloc'd; rw_http_response_free) */
    size_t body_len;
    bool hung_up;      /* on_data asked to stop */
} rw_http_response;

/* Sends the request and reads the response. A non-2xx status is not an
 * error. The caller frees *out with rw_http_response_free (also on error). */
rw_status rw_http_do(const rw_http_request *rq, rw_http_response *out, rw_error *err);
void rw_http_response_free(rw_http_response *r);

/* Server-sent events: feed body bytes, get the payload of every "data:" line. */
typedef bool (*rw_sse_event_fn)(void *user, const char *data, size_t n);
typedef struct {
    char *line;
    size_t len, cap;
    rw_sse_event_fn on_event;
    void *user;
} rw_sse_parser;

/* Returns false when on_event asked to stop (or out of memory). */
bool rw_sse_feed(rw_sse_parser *p, const char *data, size_t n);
void rw_sse_free(rw_sse_parser *p);

#endif
