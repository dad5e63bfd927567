/* pcache_disk.c - the prefix cache's disk tier (pcache.h, docs/persistence.md).
 *
 * One file per entry, named <key>-<hash>-<n>.rwc: key = 16 hex digits of
 * the model's fingerprint (models/seq_file.c: tensors, hyperparameters,
 * numerics; every kernel tier computes the same bits) and the KV type, so files of other models or
 * configurations never share a name with ours and are told apart without
 * opening them; hash = FNV-1a of the n token ids. Format, version 1
 * (little-endian):
 *
 *   magic "RWPCACHE" | version u32 | fingerprint 16 | kv_type u32 |
 *   n_vocab u64 | n_tokens u64 | seq_len u64 | logits_len u64 |
 *   draft_len u64 | tokens (n_tokens x i32) | head_crc u32 (CRC-32 of all
 *   before it)
 *   seq (seq_len bytes: a state file, models/seq_file.c, own checksums)
 *   logits (logits_len bytes: 0 or n_vocab floats) | logits_crc u32 (if any)
 *   draft (draft_len bytes: the draft model's state file, or nothing)
 *
 * The file's size must be exactly what the header says (a truncated file
 * is refused), every part's checksum must hold, the state file's tokens
 * must be the header's and the header's the name's: a file is used only
 * when all of it is verified. Files are written to a temporary name
 * (<name>.tmp.<host>.<pid>.<n>), fsynced, renamed into place and the folder
 * fsynced, so a crash at any moment leaves either the old state or the new
 * complete file; temporary files of processes that no longer run (or older
 * than an hour, from other hosts) are removed by the next scan.
 *
 * Threads (pcache_int.h): the writer takes writes, deletes and touches in
 * order (a write waits until it is due); the reader takes folder checks
 * first, then loads. Both run without io.mu while they do I/O. A folder
 * check is a stat of the folder; only when its mtime moved (or moved too
 * recently to be sure) is it listed, and only names not seen before are
 * opened (for their header). So several processes can share a folder: each
 * finds the others' new files at its next miss.
 *
 * The disk budget covers every file with our key and every temporary file
 * of ours or of other processes with our key. Before a write the writer
 * makes room by removing the files with the oldest mtime; a load or a hit
 * sets a file's mtime to now, so the mtime is an LRU clock that every
 * process sharing the folder reads the same way: a process removes another
 * one's fresh file only if everything older is gone already.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/log.h"
#include "cache/state.h"
#include "pcache/pcache_int.h"

static const char MAGIC[8] = {'R', 'W', 'P', 'C', 'A', 'C', 'H', 'E'};
#define VERSION 1u
#define HEAD_FIXED (8 + 4 + 16 + 4 + 8 * 5)
#define MAX_FILE ((uint64_t)64 << 30)
#define MAX_OWNED 4          /* evicted entries waiting for their write (memory above the budget) */
#define STALE_TMP_SECONDS 3600

enum { LOG_WRITE = 1, LOG_READ = 2, LOG_INVALID = 4, LOG_SKIP = 8, LOG_BIG = 16, LOG_FOREIGN = 32 };

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rw_pcache__name(const rw_pcache *c, const int32_t *t, int64_t n, char out[PC_NAME_MAX]) {
    const uint64_t h = rw_hash_bytes(RW_HASH_INIT, t, (size_t)n * sizeof *t);
    snprintf(out, PC_NAME_MAX, "%s-%016llx-%lld.rwc", c->key, (unsigned long long)h, (long long)n);
}

void rw_pcache__disk_log(rw_pcache__io *io, unsigned bit, const char *fmt, ...) {
    pthread_mutex_lock(&io->mu);
    const bool first = !(io->logged & bit);
    io->logged |= bit;
    pthread_mutex_unlock(&io->mu);
    if (!first) return;
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rw_log(RW_LOG_WARN, "prefix cache: %s (further ones of this kind are counted in /metrics, not logged)", msg);
}

void rw_pcache__job_free(rw_pcache__job *j) {
    if (!j) return;
    if (j->owned) {
        rw_model_seq_free(j->seq);
        rw_model_seq_free(j->draft);
    }
    rw_model_seq_free(j->out_seq);
    rw_model_seq_free(j->out_draft);
    free(j->logits);
    free(j->obsolete);
    free(j->tokens);
    free(j);
}

/* ---- the list of our files (under io.mu) ---- */

static rw_pcache__file *file_find(rw_pcache__io *io, const char *name) {
    for (int i = 0; i < io->n_files; i++)
        if (!strcmp(io->files[i].name, name)) return &io->files[i];
    return NULL;
}

static void files_sum(rw_pcache__io *io) {
    io->files_bytes = 0;
    for (int i = 0; i < io->n_files; i++) io->files_bytes += io->files[i].bytes;
}

static void file_put(rw_pcache__io *io, const char *name, size_t bytes, struct timespec mtime, uint64_t gen) {
    rw_pcache__file *f = file_find(io, name);
    if (!f) {
        if (io->n_files == io->cap_files) {
            int cap = io->cap_files ? 2 * io->cap_files : 64;
            rw_pcache__file *nf = realloc(io->files, (size_t)cap * sizeof *nf);
            if (!nf) return; /* not counted: the next listing tries again */
            io->files = nf, io->cap_files = cap;
        }
        f = &io->files[io->n_files++];
        memset(f, 0, sizeof *f);
        snprintf(f->name, sizeof f->name, "%s", name);
    }
    f->bytes = bytes;
    f->mtime = mtime;
    f->added = gen;
    files_sum(io);
}

static void file_drop(rw_pcache__io *io, const char *name) {
    rw_pcache__file *f = file_find(io, name);
    if (!f) return;
    *f = io->files[--io->n_files];
    files_sum(io);
}

/* Appends j to the done list and tells the caller. Under io.mu. */
static void post_locked(rw_pcache *c, rw_pcache__job *j) {
    j->next = NULL;
    rw_pcache__job **pp = &c->io.done;
    while (*pp) pp = &(*pp)->next;
    *pp = j;
    pthread_cond_broadcast(&c->io.done_cv);
}

static void notify(rw_pcache *c) {
    if (c->cfg.notify) c->cfg.notify(c->cfg.notify_ctx);
}

/* ---- opening files: regular ones only, never blocking ---- */

static char *path_of(const rw_pcache *c, const char *name) {
    size_t n = strlen(c->dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", c->dir, name);
    return p;
}

/* An open descriptor of a regular file (a FIFO, device or link is never
 * opened for reading, so it cannot hang us), or -1 with errno. */
static int open_regular(const char *path, struct stat *sb) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    if (fstat(fd, sb) || !S_ISREG(sb->st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

static bool read_all(int fd, void *buf, size_t n, off_t at) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r, n -= (size_t)r, at += r;
    }
    return true;
}

/* ---- the header ---- */

typedef struct {
    uint64_t n_tokens, seq_len, logits_len, draft_len;
    size_t head_len; /* with the tokens and the CRC */
} head_info;

/* Checks a header (buf holds at least HEAD_FIXED bytes; *need_more gets
 * the full header length). NULL if fine, else why not. foreign: another
 * model or configuration. */
static const char *head_check(const rw_pcache *c, const uint8_t *buf, uint64_t file_size, head_info *h,
                              bool *foreign) {
    *foreign = false;
    uint32_t version, kv;
    uint64_t n_vocab;
    if (memcmp(buf, MAGIC, 8)) return "not a prefix cache file";
    memcpy(&version, buf + 8, 4);
    if (version != VERSION) return "another version of the format";
    memcpy(&kv, buf + 28, 4);
    memcpy(&n_vocab, buf + 32, 8);
    memcpy(&h->n_tokens, buf + 40, 8);
    memcpy(&h->seq_len, buf + 48, 8);
    memcpy(&h->logits_len, buf + 56, 8);
    memcpy(&h->draft_len, buf + 64, 8);
    if (memcmp(buf + 12, c->fp, 16) || kv != (uint32_t)c->kv_type || n_vocab != (uint64_t)c->n_vocab) {
        *foreign = true;
        return "made for another model or configuration";
    }
    if (h->n_tokens == 0 || h->n_tokens > (1u << 28) || h->seq_len > MAX_FILE || h->draft_len > MAX_FILE ||
        (h->logits_len != 0 && h->logits_len != n_vocab * 4))
        return "bad sizes in the header";
    h->head_len = HEAD_FIXED + (size_t)h->n_tokens * 4 + 4;
    const uint64_t total = h->head_len + h->seq_len + h->logits_len + (h->logits_len ? 4 : 0) + h->draft_len;
    if (total != file_size) return "truncated, or trailing bytes";
    return NULL;
}

/* Reads and checks the header and tokens of an open file; *tokens owned by
 * the caller. */
static const char *read_head(const rw_pcache *c, int fd, uint64_t size, head_info *h, int32_t **tokens,
                             bool *foreign, bool *io_error) {
    uint8_t fixed[HEAD_FIXED];
    *tokens = NULL;
    *io_error = false;
    if (size < HEAD_FIXED + 4) return "truncated";
    if (!read_all(fd, fixed, HEAD_FIXED, 0)) {
        *io_error = true;
        return strerror(errno ? errno : EIO);
    }
    const char *why = head_check(c, fixed, size, h, foreign);
    if (why) return why;
    uint8_t *rest = malloc((size_t)h->n_tokens * 4 + 4);
    if (!rest) return "out of memory";
    if (!read_all(fd, rest, (size_t)h->n_tokens * 4 + 4, HEAD_FIXED)) {
        free(rest);
        *io_error = true;
        return strerror(errno ? errno : EIO);
    }
    uint32_t crc, want;
    crc = rw_crc32(0, fixed, HEAD_FIXED);
    crc = rw_crc32(crc, rest, (size_t)h->n_tokens * 4);
    memcpy(&want, rest + h->n_tokens * 4, 4);
    if (crc != want) {
        free(rest);
        return "header checksum mismatch";
    }
    int32_t *t = (int32_t *)(void *)rest; /* malloc'd: aligned for any type */
    for (uint64_t i = 0; i < h->n_tokens; i++)
        if (t[i] < 0 || t[i] >= c->n_vocab) {
            free(rest);
            return "token id out of range";
        }
    *tokens = t;
    return NULL;
}

/* ---- scanning the folder ---- */

static bool our_name(const rw_pcache *c, const char *name) {
    const size_t l = strlen(name);
    return l > 21 && l < PC_NAME_MAX && !strncmp(name, c->key, 16) && name[16] == '-' && !strcmp(name + l - 4, ".rwc");
}

/* The host and pid in a temporary file's name (<name>.tmp.<host>.<pid>.<n>);
 * false if it is not one. */
static bool parse_tmp(const char *name, const char **host, size_t *host_len, long *pid) {
    const char *t = strstr(name, ".rwc.tmp.");
    if (!t) return false;
    t += 9;
    const char *last = strrchr(t, '.');
    if (!last || last == t) return false;
    const char *p = last - 1;
    while (p > t && *p != '.') p--;
    if (*p != '.') return false;
    *host = t;
    *host_len = (size_t)(p - t);
    *pid = strtol(p + 1, NULL, 10);
    return true;
}

static bool tmp_of_this_process(const rw_pcache *c, const char *name) {
    const char *host;
    size_t hl;
    long pid;
    return parse_tmp(name, &host, &hl, &pid) && hl == strlen(c->io.host) && !strncmp(host, c->io.host, hl) &&
           pid == (long)getpid();
}

/* A temporary file no process will finish: of this host with a pid that is
 * gone, or anyone's older than STALE_TMP_SECONDS. */
static bool stale_tmp(const rw_pcache *c, const char *name, const struct stat *sb) {
    const char *host;
    size_t hl;
    long pid;
    if (!parse_tmp(name, &host, &hl, &pid)) return false;
    if (time(NULL) - sb->st_mtime > STALE_TMP_SECONDS) return true;
    if (hl != strlen(c->io.host) || strncmp(host, c->io.host, hl) || pid <= 0 || pid == (long)getpid()) return false;
    return kill((pid_t)pid, 0) && errno == ESRCH;
}

static bool same_time(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

/* Lists the folder if it changed since the last listing: new files of ours
 * are read (header) and reported (FOUND), vanished ones reported (GONE),
 * stale temporary files removed, the bytes recounted. */
static void scan(rw_pcache *c) {
    rw_pcache__io *io = &c->io;
    pthread_mutex_lock(&io->scan_mu);
    struct stat dsb;
    if (stat(c->dir, &dsb)) {
        rw_pcache__disk_log(io, LOG_READ, "cannot read the folder %s: %s", c->dir, strerror(errno));
        pthread_mutex_lock(&io->mu);
        io->read_errors++;
        pthread_mutex_unlock(&io->mu);
        pthread_mutex_unlock(&io->scan_mu);
        return;
    }
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    pthread_mutex_lock(&io->mu);
    /* unchanged, and listed well after its last change (timestamps are
     * coarse: a change in the same tick as the listing would not show) */
    const double mt = (double)dsb.st_mtim.tv_sec + 1e-9 * (double)dsb.st_mtim.tv_nsec;
    const bool fresh = io->scanned_at > 0 && same_time(dsb.st_mtim, io->dir_mtime) && io->listed_wall > mt + 0.05;
    const uint64_t gen = ++io->list_gen;
    pthread_mutex_unlock(&io->mu);
    if (fresh) {
        pthread_mutex_unlock(&io->scan_mu);
        return;
    }
    DIR *d = opendir(c->dir);
    if (!d) {
        rw_pcache__disk_log(io, LOG_READ, "cannot list the folder %s: %s", c->dir, strerror(errno));
        pthread_mutex_lock(&io->mu);
        io->read_errors++;
        pthread_mutex_unlock(&io->mu);
        pthread_mutex_unlock(&io->scan_mu);
        return;
    }
    pthread_mutex_lock(&io->mu);
    for (int i = 0; i < io->n_files; i++) io->files[i].seen = false;
    pthread_mutex_unlock(&io->mu);
    size_t tmp_bytes = 0;
    int n_foreign = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (name[0] == '.') continue;
        const size_t l = strlen(name);
        if (strstr(name, ".rwc.tmp.")) {
            struct stat sb;
            if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode)) continue;
            if (stale_tmp(c, name, &sb) && !unlinkat(dirfd(d), name, 0)) continue; /* a crash's leftover */
            if (!strncmp(name, c->key, 16) && !tmp_of_this_process(c, name))
                tmp_bytes += (size_t)sb.st_size; /* another process's write under way (ours count once written) */
            continue;
        }
        if (l < 5 || strcmp(name + l - 4, ".rwc")) continue;
        if (!our_name(c, name)) {
            n_foreign++;
            continue;
        }
        pthread_mutex_lock(&io->mu);
        rw_pcache__file *f = file_find(io, name);
        if (f) f->seen = true;
        pthread_mutex_unlock(&io->mu);
        if (f) continue;
        /* new: its header says whether and where it belongs */
        char *path = path_of(c, name);
        if (!path) continue;
        struct stat sb;
        int fd = open_regular(path, &sb);
        if (fd < 0) {
            if (errno != ENOENT) {
                rw_pcache__disk_log(io, LOG_SKIP, "leaving %s alone: not a regular file we can open (%s)", path,
                                    strerror(errno));
                pthread_mutex_lock(&io->mu);
                io->skipped++;
                pthread_mutex_unlock(&io->mu);
            }
            free(path);
            continue;
        }
        head_info h;
        int32_t *tokens = NULL;
        bool foreign, io_error;
        const char *why = read_head(c, fd, (uint64_t)sb.st_size, &h, &tokens, &foreign, &io_error);
        close(fd);
        char want[PC_NAME_MAX];
        if (!why) {
            rw_pcache__name(c, tokens, (int64_t)h.n_tokens, want);
            if (strcmp(want, name)) why = "its tokens are not those of its name";
        }
        pthread_mutex_lock(&io->mu);
        if (why && io_error) {
            io->read_errors++;
        } else if (why) {
            io->invalid++;
        } else {
            file_put(io, name, (size_t)sb.st_size, sb.st_mtim, 0);
            if ((f = file_find(io, name))) f->seen = true;
        }
        pthread_mutex_unlock(&io->mu);
        if (why && io_error) {
            rw_pcache__disk_log(io, LOG_READ, "cannot read %s: %s", path, why);
        } else if (why) { /* our name, not our content: never to be trusted */
            rw_pcache__disk_log(io, LOG_INVALID, "removing %s: %s", path, why);
            unlink(path);
        } else {
            rw_pcache__job *j = calloc(1, sizeof *j);
            if (j) {
                j->kind = PC_JOB_FOUND;
                snprintf(j->name, sizeof j->name, "%s", name);
                j->tokens = tokens;
                tokens = NULL;
                j->n_tokens = (int64_t)h.n_tokens;
                j->bytes = (size_t)sb.st_size;
                pthread_mutex_lock(&io->mu);
                post_locked(c, j);
                pthread_mutex_unlock(&io->mu);
            }
        }
        free(tokens);
        free(path);
    }
    closedir(d);
    /* files gone since (listed before this listing began, not seen now) */
    pthread_mutex_lock(&io->mu);
    for (int i = 0; i < io->n_files;) {
        rw_pcache__file *f = &io->files[i];
        if (f->seen || f->added >= gen) {
            i++;
            continue;
        }
        rw_pcache__job *j = calloc(1, sizeof *j);
        if (j) {
            j->kind = PC_JOB_GONE;
            snprintf(j->name, sizeof j->name, "%s", f->name);
            post_locked(c, j);
        }
        *f = io->files[--io->n_files];
    }
    files_sum(io);
    io->tmp_bytes = tmp_bytes;
    if (n_foreign && !io->n_foreign) {
        io->skipped += (uint64_t)n_foreign;
        pthread_mutex_unlock(&io->mu);
        rw_pcache__disk_log(io, LOG_FOREIGN, "leaving %d files of other models or configurations alone in %s",
                            n_foreign, c->dir);
        pthread_mutex_lock(&io->mu);
    }
    io->n_foreign = n_foreign;
    io->dir_mtime = dsb.st_mtim;
    io->scanned_at = mono();
    io->listed_wall = (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec;
    pthread_mutex_unlock(&io->mu);
    pthread_mutex_unlock(&io->scan_mu);
}

/* ---- the writer ---- */

/* Removes the oldest files until need more bytes fit the budget (not
 * `keep`, the name about to be replaced, whose bytes are counted as freed).
 * false if they cannot fit. Under io.mu (unlink is quick: metadata). */
static bool make_room(rw_pcache *c, size_t need, const char *keep) {
    rw_pcache__io *io = &c->io;
    const rw_pcache__file *old_self = file_find(io, keep);
    const size_t self = old_self ? old_self->bytes : 0;
    if (need > c->cfg.dir_bytes) return false;
    while (io->files_bytes - self + io->tmp_bytes + need > c->cfg.dir_bytes) {
        rw_pcache__file *old = NULL;
        for (int i = 0; i < io->n_files; i++) {
            rw_pcache__file *f = &io->files[i];
            if (strcmp(f->name, keep) &&
                (!old || f->mtime.tv_sec < old->mtime.tv_sec ||
                 (f->mtime.tv_sec == old->mtime.tv_sec && f->mtime.tv_nsec < old->mtime.tv_nsec)))
                old = f;
        }
        if (!old) return false; /* temporary files of others fill it */
        char *path = path_of(c, old->name);
        if (path) unlink(path);
        free(path);
        io->evicted++;
        rw_pcache__job *j = calloc(1, sizeof *j);
        if (j) {
            j->kind = PC_JOB_GONE;
            snprintf(j->name, sizeof j->name, "%s", old->name);
            post_locked(c, j);
        }
        *old = io->files[--io->n_files];
        files_sum(io);
    }
    return true;
}

/* An exclusive lock on <dir>/.rwc.lock (flock: released by the kernel if
 * the process dies), or -1 when the folder cannot take one (read-only:
 * then nothing is written anyway). */
static int lock_dir(const rw_pcache *c) {
    char *p = path_of(c, ".rwc.lock");
    int fd = p ? open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666) : -1;
    free(p);
    if (fd < 0) return -1;
    while (flock(fd, LOCK_EX) && errno == EINTR) {
    }
    return fd;
}

static void unlock_dir(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd);
}

static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Writes j's entry; j->st and j->msg say how it went. */
static void do_write(rw_pcache *c, rw_pcache__job *j) {
    rw_pcache__io *io = &c->io;
    uint8_t *seq = NULL, *draft = NULL, *head = NULL;
    size_t seq_len = 0, draft_len = 0;
    rw_error err = {0};
    char *path = NULL, *tmp = NULL;
    int fd = -1;
    if ((j->st = rw_model_seq_save_buffer(j->seq, &seq, &seq_len, &err))) goto fail_msg;
    if (j->draft && (j->st = rw_model_seq_save_buffer(j->draft, &draft, &draft_len, &err))) goto fail_msg;
    const int64_t n = rw_model_seq_length(j->seq);
    const size_t head_len = HEAD_FIXED + (size_t)n * 4 + 4;
    const uint64_t logits_len = j->logits ? (uint64_t)c->n_vocab * 4 : 0;
    head = malloc(head_len);
    if (!head) {
        j->st = rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
        goto fail_msg;
    }
    const uint32_t version = VERSION, kv = (uint32_t)c->kv_type;
    const uint64_t nv = (uint64_t)c->n_vocab, nt = (uint64_t)n, sl = seq_len, dl = draft_len;
    memcpy(head, MAGIC, 8);
    memcpy(head + 8, &version, 4);
    memcpy(head + 12, c->fp, 16);
    memcpy(head + 28, &kv, 4);
    memcpy(head + 32, &nv, 8);
    memcpy(head + 40, &nt, 8);
    memcpy(head + 48, &sl, 8);
    memcpy(head + 56, &logits_len, 8);
    memcpy(head + 64, &dl, 8);
    memcpy(head + HEAD_FIXED, rw_model_seq_tokens(j->seq), (size_t)n * 4);
    const uint32_t hcrc = rw_crc32(0, head, head_len - 4);
    memcpy(head + head_len - 4, &hcrc, 4);
    const uint32_t lcrc = j->logits ? rw_crc32(0, j->logits, (size_t)logits_len) : 0;
    const size_t total = head_len + seq_len + (size_t)logits_len + (j->logits ? 4 : 0) + draft_len;

    if (total > c->cfg.dir_bytes) {
        j->st = rw_errorf(&err, RW_ERR_NOMEM, "%zu bytes do not fit the disk budget", total);
        rw_pcache__disk_log(io, LOG_BIG, "not writing %s: %zu bytes do not fit the disk budget of %zu", j->name,
                            total, c->cfg.dir_bytes);
        goto out;
    }
    static unsigned counter;
    path = path_of(c, j->name);
    const size_t tl = path ? strlen(path) + strlen(io->host) + 48 : 0;
    tmp = path ? malloc(tl) : NULL;
    if (!tmp) {
        j->st = rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
        goto fail_msg;
    }
    snprintf(tmp, tl, "%s.tmp.%s.%ld.%u", path, io->host, (long)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    mode_t um = umask(0);
    umask(um);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666 & ~um);
    if (fd < 0) {
        j->st = rw_errorf(&err, RW_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto fail_msg;
    }
    struct iovec iov[5] = {{head, head_len}, {seq, seq_len}, {j->logits, (size_t)logits_len},
                           {(void *)&lcrc, j->logits ? 4 : 0}, {draft, draft_len}};
    int at = 0;
    size_t left = total;
    while (left) {
        while (at < 5 && iov[at].iov_len == 0) at++;
        ssize_t w = writev(fd, iov + at, 5 - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            j->st = rw_errorf(&err, RW_ERR_IO, "cannot write %s: %s", tmp, w < 0 ? strerror(errno) : "no progress");
            break;
        }
        left -= (size_t)w;
        for (size_t k = (size_t)w; k;) {
            const size_t step = k < iov[at].iov_len ? k : iov[at].iov_len;
            iov[at].iov_base = (uint8_t *)iov[at].iov_base + step;
            iov[at].iov_len -= step;
            k -= step;
            if (iov[at].iov_len == 0) at++;
        }
    }
    if (!j->st && fsync(fd)) j->st = rw_errorf(&err, RW_ERR_IO, "cannot sync %s: %s", tmp, strerror(errno));
    if (close(fd) && !j->st) j->st = rw_errorf(&err, RW_ERR_IO, "cannot close %s: %s", tmp, strerror(errno));
    fd = -1;
    if (j->st) {
        unlink(tmp);
        goto fail_msg;
    }
    /* room, then the rename, under the folder's lock: processes sharing the
     * folder make room one at a time, each seeing the others' files */
    const int lk = lock_dir(c);
    scan(c);
    pthread_mutex_lock(&io->mu);
    const bool room = make_room(c, total, j->name);
    pthread_mutex_unlock(&io->mu);
    if (room && rename(tmp, path)) j->st = rw_errorf(&err, RW_ERR_IO, "cannot rename %s: %s", tmp, strerror(errno));
    unlock_dir(lk);
    if (!room) {
        unlink(tmp);
        j->st = rw_errorf(&err, RW_ERR_NOMEM, "no room in the disk budget");
        goto out; /* temporary files of others fill it: not an error of the disk */
    }
    if (j->st) {
        unlink(tmp);
        goto fail_msg;
    }
    sync_dir(c->dir);
    struct stat sb;
    struct timespec mt;
    if (!stat(path, &sb)) mt = sb.st_mtim;
    else clock_gettime(CLOCK_REALTIME, &mt);
    pthread_mutex_lock(&io->mu);
    file_put(io, j->name, total, mt, io->list_gen + 1);
    io->writes_ok++;
    pthread_mutex_unlock(&io->mu);
    j->bytes = total;
    /* files this entry makes redundant (it restores all of theirs) */
    for (char *s = j->obsolete; s && *s;) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = 0;
        if (strcmp(s, j->name)) {
            char *op = path_of(c, s);
            if (op) unlink(op);
            free(op);
            pthread_mutex_lock(&io->mu);
            file_drop(io, s);
            pthread_mutex_unlock(&io->mu);
        }
        s = nl ? nl + 1 : s + strlen(s);
    }
    goto out;
fail_msg:
    snprintf(j->msg, sizeof j->msg, "%s", err.msg);
    pthread_mutex_lock(&io->mu);
    io->write_errors++;
    pthread_mutex_unlock(&io->mu);
    rw_pcache__disk_log(io, LOG_WRITE, "cannot write to the disk tier (%s); serving on without it", err.msg);
out:
    if (fd >= 0) close(fd);
    free(seq), free(draft), free(head), free(path), free(tmp);
}

static void do_small(rw_pcache *c, rw_pcache__job *j) {
    char *path = path_of(c, j->name);
    if (!path) return;
    if (j->kind == PC_JOB_DELETE) {
        unlink(path);
        pthread_mutex_lock(&c->io.mu);
        file_drop(&c->io, j->name);
        pthread_mutex_unlock(&c->io.mu);
    } else { /* touch: the shared LRU clock */
        if (!utimensat(AT_FDCWD, path, NULL, 0)) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            pthread_mutex_lock(&c->io.mu);
            rw_pcache__file *f = file_find(&c->io, j->name);
            if (f) f->mtime = now;
            pthread_mutex_unlock(&c->io.mu);
        }
    }
    free(path);
}

static void *writer_main(void *arg) {
    rw_pcache *c = arg;
    rw_pcache__io *io = &c->io;
    /* behind the forward pass's threads when they compete for the cores:
     * a write may come a little later, a token must not */
    setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
    pthread_mutex_lock(&io->mu);
    for (;;) {
        if (io->stopping && !io->flush) break;
        /* the first job that is due (deletes and touches always are) */
        rw_pcache__job **pp = &io->writes, *j = NULL;
        double next_due = 0;
        const double now = mono();
        for (; *pp; pp = &(*pp)->next) {
            rw_pcache__job *x = *pp;
            if (x->kind != PC_JOB_WRITE || io->flush || x->due <= now) {
                j = x;
                break;
            }
            if (!next_due || x->due < next_due) next_due = x->due;
        }
        if (!j) {
            if (io->stopping) break;
            if (next_due) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                double wait = next_due - now;
                if (wait > 10) wait = 10;
                const long ns = ts.tv_nsec + (long)(wait * 1e9);
                ts.tv_sec += ns / 1000000000L;
                ts.tv_nsec = ns % 1000000000L;
                pthread_cond_timedwait(&io->wake_writer, &io->mu, &ts);
            } else {
                pthread_cond_wait(&io->wake_writer, &io->mu);
            }
            continue;
        }
        *pp = j->next;
        j->next = NULL;
        j->running = true;
        io->n_busy++;
        io->n_busy_writes += j->kind == PC_JOB_WRITE;
        pthread_mutex_unlock(&io->mu);
        if (j->kind == PC_JOB_WRITE) do_write(c, j);
        else do_small(c, j);
        pthread_mutex_lock(&io->mu);
        io->n_busy--;
        io->n_busy_writes -= j->kind == PC_JOB_WRITE;
        j->running = false;
        j->finished = true;
        if (j->kind == PC_JOB_WRITE) {
            if (j->owned) io->n_owned--;
            post_locked(c, j);
            pthread_mutex_unlock(&io->mu);
            notify(c);
            pthread_mutex_lock(&io->mu);
        } else {
            rw_pcache__job_free(j);
            pthread_cond_broadcast(&io->done_cv);
        }
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

/* ---- the reader ---- */

void rw_pcache__disk_load(rw_pcache *c, rw_pcache__job *j) {
    rw_pcache__io *io = &c->io;
    char *path = path_of(c, j->name);
    uint8_t *buf = NULL;
    int32_t *tokens = NULL;
    const char *why = NULL;
    bool io_error = false, foreign = false;
    rw_error err = {0};
    struct stat sb;
    int fd = path ? open_regular(path, &sb) : -1;
    if (fd < 0) {
        j->st = RW_ERR_IO;
        if (path && errno != ENOENT) {
            snprintf(j->msg, sizeof j->msg, "cannot open %s: %s", path, strerror(errno));
            io_error = true;
        }
        goto out;
    }
    head_info h;
    why = read_head(c, fd, (uint64_t)sb.st_size, &h, &tokens, &foreign, &io_error);
    if (why) goto bad;
    char want[PC_NAME_MAX];
    rw_pcache__name(c, tokens, (int64_t)h.n_tokens, want);
    if (strcmp(want, j->name)) {
        why = "its tokens are not those of its name";
        goto bad;
    }
    const size_t body = (size_t)(sb.st_size - (off_t)h.head_len);
    buf = malloc(body ? body : 1);
    if (!buf) {
        why = "out of memory";
        io_error = true; /* not the file's fault */
        goto bad;
    }
    if (!read_all(fd, buf, body, (off_t)h.head_len)) {
        why = strerror(errno ? errno : EIO);
        io_error = true;
        goto bad;
    }
    if ((j->st = rw_model_seq_new(c->m, c->kv_type, c->max_ctx, &j->out_seq, &err))) {
        why = err.msg;
        io_error = true;
        goto bad;
    }
    if (rw_model_seq_load_buffer(j->out_seq, buf, (size_t)h.seq_len, &err)) {
        why = err.msg;
        goto bad;
    }
    if (rw_model_seq_length(j->out_seq) != (int64_t)h.n_tokens ||
        memcmp(rw_model_seq_tokens(j->out_seq), tokens, (size_t)h.n_tokens * 4)) {
        why = "its state holds other tokens than its header";
        goto bad;
    }
    if (h.logits_len) {
        uint32_t want_crc;
        memcpy(&want_crc, buf + h.seq_len + h.logits_len, 4);
        if (rw_crc32(0, buf + h.seq_len, (size_t)h.logits_len) != want_crc) {
            why = "logits checksum mismatch";
            goto bad;
        }
        j->logits = malloc((size_t)h.logits_len);
        if (j->logits) memcpy(j->logits, buf + h.seq_len, (size_t)h.logits_len);
    }
    if (h.draft_len && c->cfg.draft) {
        const uint8_t *d = buf + h.seq_len + h.logits_len + (h.logits_len ? 4 : 0);
        if (!rw_model_seq_new(c->cfg.draft, c->kv_type, c->max_ctx, &j->out_draft, &err) &&
            rw_model_seq_load_buffer(j->out_draft, d, (size_t)h.draft_len, &err)) {
            why = err.msg;
            goto bad;
        }
    }
    j->st = RW_OK;
    /* used now: the shared LRU clock */
    if (!futimens(fd, NULL)) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        pthread_mutex_lock(&io->mu);
        rw_pcache__file *f = file_find(io, j->name);
        if (f) f->mtime = now;
        pthread_mutex_unlock(&io->mu);
    }
    goto out;
bad:
    j->st = RW_ERR_FORMAT;
    snprintf(j->msg, sizeof j->msg, "%s", why);
    rw_model_seq_free(j->out_seq);
    rw_model_seq_free(j->out_draft);
    j->out_seq = j->out_draft = NULL;
    free(j->logits);
    j->logits = NULL;
    if (!io_error) { /* our name, not our content (another model's, truncated, flipped): never trusted */
        j->invalid = true;
        rw_pcache__disk_log(io, LOG_INVALID, "removing %s: %s", path, why);
        unlink(path);
        pthread_mutex_lock(&io->mu);
        io->invalid++;
        file_drop(io, j->name);
        pthread_mutex_unlock(&io->mu);
    }
out:
    if (io_error) {
        pthread_mutex_lock(&io->mu);
        io->read_errors++;
        pthread_mutex_unlock(&io->mu);
        rw_pcache__disk_log(io, LOG_READ, "cannot read the disk tier (%s); recomputing instead",
                            j->msg[0] ? j->msg : why ? why : "?");
    } else if (j->st && !j->invalid) { /* vanished (another process's budget) */
        pthread_mutex_lock(&io->mu);
        file_drop(io, j->name);
        pthread_mutex_unlock(&io->mu);
    }
    if (fd >= 0) close(fd);
    free(buf), free(tokens), free(path);
}

static void *reader_main(void *arg) {
    rw_pcache *c = arg;
    rw_pcache__io *io = &c->io;
    pthread_mutex_lock(&io->mu);
    while (!io->stopping) {
        if (io->scan_want > io->scan_done) {
            const uint64_t gen = io->scan_want;
            io->scan_taken = gen;
            io->n_busy++;
            pthread_mutex_unlock(&io->mu);
            scan(c);
            pthread_mutex_lock(&io->mu);
            io->n_busy--;
            if (gen > io->scan_done) io->scan_done = gen;
            pthread_cond_broadcast(&io->done_cv);
            pthread_mutex_unlock(&io->mu);
            notify(c);
            pthread_mutex_lock(&io->mu);
            continue;
        }
        rw_pcache__job *j = io->loads;
        if (!j) {
            pthread_cond_wait(&io->wake_reader, &io->mu);
            continue;
        }
        io->loads = j->next;
        j->next = NULL;
        j->running = true;
        io->n_busy++;
        pthread_mutex_unlock(&io->mu);
        rw_pcache__disk_load(c, j);
        pthread_mutex_lock(&io->mu);
        io->n_busy--;
        j->running = false;
        j->finished = true;
        post_locked(c, j);
        pthread_mutex_unlock(&io->mu);
        notify(c);
        pthread_mutex_lock(&io->mu);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

/* ---- the caller's side ---- */

rw_status rw_pcache__disk_start(rw_pcache *c, rw_error *err) {
    rw_pcache__io *io = &c->io;
    rw_model_fingerprint(c->m, c->fp);
    const uint32_t kv = (uint32_t)c->kv_type;
    uint64_t k = rw_hash_bytes(RW_HASH_INIT, c->fp, 16);
    k = rw_hash_bytes(k, &kv, 4);
    snprintf(c->key, sizeof c->key, "%016llx", (unsigned long long)k);
    if (gethostname(io->host, sizeof io->host - 1)) snprintf(io->host, sizeof io->host, "host");
    for (char *p = io->host; *p; p++)
        if (*p == '/' || *p == '.') *p = '_'; /* one path component, no dots (the pid follows the last one) */
    pthread_mutex_init(&io->mu, NULL);
    pthread_mutex_init(&io->scan_mu, NULL);
    pthread_cond_init(&io->wake_writer, NULL);
    pthread_cond_init(&io->wake_reader, NULL);
    pthread_cond_init(&io->done_cv, NULL);
    io->on = true;
    io->scan_want = 1; /* the first listing, before any lookup is served */
    if (pthread_create(&io->writer, NULL, writer_main, c)) {
        return rw_errorf(err, RW_ERR_INTERNAL, "prefix cache: cannot start the disk writer thread");
    }
    io->writer_started = true;
    if (pthread_create(&io->reader, NULL, reader_main, c))
        return rw_errorf(err, RW_ERR_INTERNAL, "prefix cache: cannot start the disk reader thread");
    io->reader_started = true;
    return RW_OK;
}

void rw_pcache__disk_stop(rw_pcache *c, double seconds) {
    (void)seconds;
    rw_pcache__io *io = &c->io;
    if (!io->on) return;
    pthread_mutex_lock(&io->mu);
    io->stopping = true;
    io->flush = false;
    pthread_cond_broadcast(&io->wake_writer);
    pthread_cond_broadcast(&io->wake_reader);
    pthread_mutex_unlock(&io->mu);
    if (io->writer_started) pthread_join(io->writer, NULL);
    if (io->reader_started) pthread_join(io->reader, NULL);
    io->writer_started = io->reader_started = false;
    free(io->files);
    io->files = NULL;
    io->n_files = io->cap_files = 0;
    /* what never ran: the entries forget it */
    for (rw_pcache__job **lists[2] = {&io->writes, &io->loads}, **l = lists[0]; l; l = l == lists[0] ? lists[1] : NULL) {
        while (*l) {
            rw_pcache__job *j = *l;
            *l = j->next;
            if (j->e) {
                if (j->e->write == j) j->e->write = NULL;
                if (j->e->load == j) j->e->load = NULL;
            }
            rw_pcache__job_free(j);
        }
    }
}

static rw_pcache__job *new_job(rw_pcache__job_kind kind, rw_pcache__entry *e, const char *name) {
    rw_pcache__job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->e = e;
    snprintf(j->name, sizeof j->name, "%s", name);
    return j;
}

static void append(rw_pcache__job **list, rw_pcache__job *j) {
    while (*list) list = &(*list)->next;
    *list = j;
}

void rw_pcache__disk_queue_write(rw_pcache *c, rw_pcache__entry *e, double delay) {
    if (!c->io.on || !e->seq || e->write || !e->name[0]) return;
    rw_pcache__job *j = new_job(PC_JOB_WRITE, e, e->name);
    if (!j) return;
    j->seq = e->seq;
    j->draft = e->draft;
    if (e->node->logits && (j->logits = malloc((size_t)c->n_vocab * sizeof(float))))
        memcpy(j->logits, e->node->logits, (size_t)c->n_vocab * sizeof(float));
    j->obsolete = e->obsolete;
    e->obsolete = NULL;
    j->due = mono() + delay;
    e->write = j;
    pthread_mutex_lock(&c->io.mu);
    append(&c->io.writes, j);
    pthread_cond_signal(&c->io.wake_writer);
    pthread_mutex_unlock(&c->io.mu);
}

static void queue_small(rw_pcache *c, rw_pcache__job_kind kind, const char *name) {
    if (!c->io.on) return;
    pthread_mutex_lock(&c->io.mu);
    for (rw_pcache__job *x = c->io.writes; x; x = x->next) /* one touch per file is enough */
        if (x->kind == kind && !strcmp(x->name, name)) {
            pthread_mutex_unlock(&c->io.mu);
            return;
        }
    pthread_mutex_unlock(&c->io.mu);
    rw_pcache__job *j = new_job(kind, NULL, name);
    if (!j) return;
    pthread_mutex_lock(&c->io.mu);
    append(&c->io.writes, j);
    pthread_cond_signal(&c->io.wake_writer);
    pthread_mutex_unlock(&c->io.mu);
}

void rw_pcache__disk_queue_delete(rw_pcache *c, const char *name) { queue_small(c, PC_JOB_DELETE, name); }
void rw_pcache__disk_queue_touch(rw_pcache *c, const char *name) { queue_small(c, PC_JOB_TOUCH, name); }

void rw_pcache__disk_queue_load(rw_pcache *c, rw_pcache__entry *e) {
    if (!c->io.on || e->load || e->seq) return;
    rw_pcache__job *j = new_job(PC_JOB_LOAD, e, e->name);
    if (!j) return;
    e->load = j;
    pthread_mutex_lock(&c->io.mu);
    append(&c->io.loads, j);
    pthread_cond_signal(&c->io.wake_reader);
    pthread_mutex_unlock(&c->io.mu);
}

bool rw_pcache__disk_release(rw_pcache *c, rw_pcache__entry *e, bool keep) {
    rw_pcache__io *io = &c->io;
    rw_pcache__job *j = e->write;
    pthread_mutex_lock(&io->mu);
    if (j->finished) { /* done with them already */
        pthread_mutex_unlock(&io->mu);
        return false;
    }
    if (j->running || (keep && io->n_owned < MAX_OWNED)) {
        j->owned = true;
        io->n_owned++;
        j->due = 0; /* write it now: its memory is over the budget */
        pthread_cond_signal(&io->wake_writer);
        pthread_mutex_unlock(&io->mu);
        return true;
    }
    for (rw_pcache__job **pp = &io->writes; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    pthread_mutex_unlock(&io->mu);
    e->write = NULL;
    if (!e->obsolete) e->obsolete = j->obsolete, j->obsolete = NULL;
    rw_pcache__job_free(j);
    return false;
}

void rw_pcache__disk_detach(rw_pcache *c, rw_pcache__entry *e) {
    rw_pcache__io *io = &c->io;
    if (!io->on || (!e->write && !e->load)) return;
    pthread_mutex_lock(&io->mu);
    rw_pcache__job *gone = NULL;
    if (e->write) e->write->e = NULL;
    if (e->load) {
        e->load->e = NULL;
        if (!e->load->running && !e->load->finished) {
            for (rw_pcache__job **pp = &io->loads; *pp; pp = &(*pp)->next)
                if (*pp == e->load) {
                    *pp = e->load->next;
                    gone = e->load;
                    break;
                }
        }
    }
    pthread_mutex_unlock(&io->mu);
    rw_pcache__job_free(gone);
    e->write = e->load = NULL;
}

uint64_t rw_pcache__disk_want_scan(rw_pcache *c) {
    rw_pcache__io *io = &c->io;
    pthread_mutex_lock(&io->mu);
    /* a check asked for and not started yet covers this one too */
    if (io->scan_want <= io->scan_done || io->scan_taken == io->scan_want) io->scan_want++;
    const uint64_t gen = io->scan_want;
    pthread_cond_signal(&io->wake_reader);
    pthread_mutex_unlock(&io->mu);
    return gen;
}

rw_pcache__job *rw_pcache__disk_take_done(rw_pcache *c) {
    pthread_mutex_lock(&c->io.mu);
    rw_pcache__job *d = c->io.done;
    c->io.done = NULL;
    pthread_mutex_unlock(&c->io.mu);
    return d;
}
