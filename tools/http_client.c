/* client.c - the small HTTP/1.1 client of client.h. */
#include "tools/http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/portable.h"

typedef struct {
    int fd;
    int timeout_ms;
    char buf[16384];
    size_t pos, len;
    bool eof;
} reader;

/* Fills the buffer if empty; false on error/timeout, true at EOF with len 0. */
static bool fill(reader *r, rw_error *err) {
    if (r->pos < r->len || r->eof) return true;
    struct pollfd p = {.fd = r->fd, .events = POLLIN};
    int k = poll(&p, 1, r->timeout_ms);
    if (k <= 0) {
        rw_errorf(err, RW_ERR_IO, k == 0 ? "timed out waiting for the server" : "poll: %s", strerror(errno));
        return false;
    }
    ssize_t n = recv(r->fd, r->buf, sizeof r->buf, 0);
    if (n < 0) {
        rw_errorf(err, RW_ERR_IO, "recv: %s", strerror(errno));
        return false;
    }
    r->pos = 0;
    r->len = (size_t)n;
    if (n == 0) r->eof = true;
    return true;
}

/* One line without its CRLF into line (cap bytes); false on error or EOF. */
static bool read_line(reader *r, char *line, size_t cap, rw_error *err) {
    size_t n = 0;
    for (;;) {
        if (!fill(r, err)) return false;
        if (r->eof && r->pos >= r->len) {
            rw_errorf(err, RW_ERR_IO, "the server closed the connection mid-response");
            return false;
        }
        char c = r->buf[r->pos++];
        if (c == '\n') break;
        if (n + 1 < cap) line[n++] = c;
    }
    if (n && line[n - 1] == '\r') n--;
    line[n] = 0;
    return true;
}

static bool deliver(const rw_http_request *rq, rw_http_response *out, const char *d, size_t n, rw_error *err) {
    char *p = realloc(out->body, out->body_len + n + 1);
    if (!p) {
        rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        return false;
    }
    out->body = p;
    memcpy(out->body + out->body_len, d, n);
    out->body_len += n;
    out->body[out->body_len] = 0;
    if (rq->on_data && !rq->on_data(rq->user, d, n)) {
        out->hung_up = true;
        return false;
    }
    return true;
}

/* Reads n body bytes (n < 0: until EOF). */
static bool read_body(reader *r, const rw_http_request *rq, rw_http_response *out, long long n, rw_error *err) {
    while (n != 0) {
        if (!fill(r, err)) return false;
        if (r->pos >= r->len) {
            if (n < 0) return true;
            rw_errorf(err, RW_ERR_IO, "the server closed the connection mid-body");
            return false;
        }
        size_t k = r->len - r->pos;
        if (n > 0 && (long long)k > n) k = (size_t)n;
        if (!deliver(rq, out, r->buf + r->pos, k, err)) return false;
        r->pos += k;
        if (n > 0) n -= (long long)k;
    }
    return true;
}

static int connect_to(const char *host, int port, rw_error *err) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        len = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        len = sizeof *a6;
    } else {
        rw_errorf(err, RW_ERR_INVALID_ARG, "not a numeric address: %s", host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | RW_SOCK_CLOEXEC, 0);
    rw_cloexec(fd);
    rw_nosigpipe(fd);
    if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len)) {
        rw_errorf(err, RW_ERR_IO, "cannot connect to %s port %d: %s", host, port, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static bool send_all(int fd, const char *p, size_t n, rw_error *err) {
    while (n) {
        ssize_t k = send(fd, p, n, RW_MSG_NOSIGNAL);
        if (k <= 0) {
            rw_errorf(err, RW_ERR_IO, "send: %s", strerror(errno));
            return false;
        }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

rw_status rw_http_do(const rw_http_request *rq, rw_http_response *out, rw_error *err) {
    memset(out, 0, sizeof *out);
    const char *host = rq->host ? rq->host : "127.0.0.1";
    int fd = connect_to(host, rq->port, err);
    if (fd < 0) return RW_ERR_IO;
    reader *r = calloc(1, sizeof *r);
    char head[2048];
    if (!r) {
        close(fd);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    r->fd = fd;
    r->timeout_ms = rq->timeout_ms > 0 ? rq->timeout_ms : 120000;
    int hn = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n%s", rq->method,
                      rq->path, host, rq->port, rq->headers ? rq->headers : "");
    if (rq->body) hn += snprintf(head + hn, sizeof head - (size_t)hn, "Content-Length: %zu\r\n", rq->body_len);
    hn += snprintf(head + hn, sizeof head - (size_t)hn, "\r\n");
    rw_status st = RW_ERR_IO;
    if (hn >= (int)sizeof head) {
        rw_errorf(err, RW_ERR_INVALID_ARG, "request head too long");
        goto done;
    }
    /* a server may answer (413) before reading the whole body: not an error */
    if (!send_all(fd, head, (size_t)hn, err)) goto done;
    if (rq->body) send_all(fd, rq->body, rq->body_len, NULL);
    char line[4096];
    if (!read_line(r, line, sizeof line, err)) goto done;
    if (sscanf(line, "HTTP/%*d.%*d %d", &out->status) != 1) {
        rw_errorf(err, RW_ERR_FORMAT, "bad status line: %.100s", line);
        goto done;
    }
    long long clen = -1;
    bool chunked = false;
    for (;;) {
        if (!read_line(r, line, sizeof line, err)) goto done;
        if (!line[0]) break;
        if (!strncasecmp(line, "Content-Length:", 15)) clen = atoll(line + 15);
        else if (!strncasecmp(line, "Transfer-Encoding:", 18) && strcasestr(line + 18, "chunked")) chunked = true;
    }
    if (chunked) {
        for (;;) {
            if (!read_line(r, line, sizeof line, err)) goto done;
            long long n = strtoll(line, NULL, 16);
            if (n < 0) {
                rw_errorf(err, RW_ERR_FORMAT, "bad chunk size");
                goto done;
            }
            if (n == 0) break;
            if (!read_body(r, rq, out, n, err)) {
                st = out->hung_up ? RW_OK : RW_ERR_IO;
                goto done;
            }
            if (!read_line(r, line, sizeof line, err)) goto done;
        }
    } else if (!read_body(r, rq, out, clen, err)) {
        st = out->hung_up ? RW_OK : RW_ERR_IO;
        goto done;
    }
    if (!out->body && !(out->body = calloc(1, 1))) {
        st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto done;
    }
    st = RW_OK;
done:
    close(fd);
    free(r);
    return st;
}

void rw_http_response_free(rw_http_response *r) {
    free(r->body);
    memset(r, 0, sizeof *r);
}

bool rw_sse_feed(rw_sse_parser *p, const char *data, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = data[i];
        if (c != '\n') {
            if (p->len + 1 >= p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 1024;
                char *q = realloc(p->line, cap);
                if (!q) return false;
                p->line = q;
                p->cap = cap;
            }
            p->line[p->len++] = c;
            continue;
        }
        size_t len = p->len;
        if (len && p->line[len - 1] == '\r') len--;
        p->len = 0;
        if (len >= 5 && !memcmp(p->line, "data:", 5)) {
            size_t off = 5 + (len > 5 && p->line[5] == ' ');
            p->line[len] = 0;
            if (!p->on_event(p->user, p->line + off, len - off)) return false;
        }
    }
    return true;
}

void rw_sse_free(rw_sse_parser *p) {
    free(p->line);
    p->line = NULL;
    p->len = p->cap = 0;
}
