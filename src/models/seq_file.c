/* seq_file.c - state files: a sequence saved with everything needed to go
 * on exactly where it stopped.
 *
 * Format, version 1 (integers little-endian):
 *   magic     "RWSTATE\0"                       8 bytes
 *   version   u32 = 1
 *   model     16-byte fingerprint (rw_model_fingerprint)
 *   kv_type   u32 (0 f32, 1 f16)
 *   n_tokens  u64, then n_tokens x i32 token ids
 *   n_layer   u32, then per layer:
 *     kind    u32 length + bytes ("kv", "deltanet", "mamba2", "shortconv", "none")
 *     size    u64, then size bytes of the state's own save (cache/state.h:
 *             only the valid part, its checkpoints and its log)
 *     crc     u32 CRC-32 of those bytes
 *   crc       u32 CRC-32 of everything before it
 * A file is accepted only if every check passes; the sequence is replaced
 * only after the whole file has been decoded into fresh states.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "kernels/matmul.h"
#include "models/model_int.h"

static const char MAGIC[8] = {'R', 'W', 'S', 'T', 'A', 'T', 'E', 0};
#define VERSION 1u
#define MAX_FILE ((size_t)64 << 30)
/* The revision of our arithmetic that states depend on: 2 since activations
 * are rounded as ggml's x86 build rounds them; 3 since K-quants sum in
 * ggml's order under RW_NUMERICS_GGML; 4 since the default mode (auto) sums
 * K-quants in ggml's order; 5 since f32 dot products fuse their elements
 * past the last multiple of 64 onto a float sum (recurrences, attention); 6
 * since auto sums a K-quant model's 32-block matrices in ggml's order; 7
 * since Mamba2's conv taps and its scan's scalar steps fuse as GCC
 * contracts ggml's (fmas); 8 since auto is fast for every type. */
#define ARITH_REVISION 8u

void rw_model_fingerprint(const rw_model *m, uint8_t out[16]) {
    uint64_t a = RW_HASH_INIT, b = 0x84222325cbf29ce4ull;
    /* hp is zero-filled at allocation (calloc), so padding hashes the same */
    a = rw_hash_bytes(a, &m->hp, sizeof m->hp);
    b = rw_hash_bytes(b, &m->hp, sizeof m->hp);
    if (m->mtp_on) { /* its sequences hold two more states (models without it hash as before) */
        static const char tag[] = "mtp";
        a = rw_hash_bytes(a, tag, 3), b = rw_hash_bytes(b, tag, 3);
    }
    if (m->hp.n_swa > 0) { /* its sliding layers save their held windows (models without one hash as before) */
        static const char tag[] = "swa-ring";
        a = rw_hash_bytes(a, tag, 8), b = rw_hash_bytes(b, tag, 8);
    }
    if (m->loras) { /* the adapters' tensors and scales (lora.c; models without one hash as before) */
        a = rw_hash_bytes(a, &m->lora_fp[0], 8), b = rw_hash_bytes(b, &m->lora_fp[1], 8);
    }
    for (size_t i = 0; i < rw_gguf_n_tensors(m->g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(m->g, i);
        uint32_t ty = (uint32_t)t->type;
        a = rw_hash_bytes(a, t->name, strlen(t->name)), b = rw_hash_bytes(b, t->name, strlen(t->name));
        a = rw_hash_bytes(a, &ty, 4), b = rw_hash_bytes(b, &ty, 4);
        a = rw_hash_bytes(a, t->ne, sizeof t->ne), b = rw_hash_bytes(b, t->ne, sizeof t->ne);
    }
    /* and the arithmetic: a state computed by other kernels (another
     * numerics mode, or an older rounding) would not go on bit for bit as a
     * recomputation here would, so it counts as another model's. Every tier
     * computes the AVX-512 tier's bits, so states move between machines: the
     * tier hashed is that one (files saved by AVX-512 machines keep their
     * fingerprint; those of the other tiers' former arithmetic do not match) */
    const rw_numerics nm = rw_numerics_current() == RW_NUMERICS_GGML ? RW_NUMERICS_GGML : RW_NUMERICS_FAST;
    const uint32_t arith[3] = {ARITH_REVISION, (uint32_t)RW_TIER_AVX512, (uint32_t)nm}; /* auto is fast */
    a = rw_hash_bytes(a, arith, sizeof arith), b = rw_hash_bytes(b, arith, sizeof arith);
    memcpy(out, &a, 8);
    memcpy(out + 8, &b, 8);
}

rw_status rw_model_seq_save_buffer(const rw_model_seq *s, uint8_t **data, size_t *len, rw_error *err) {
    rw_sbuf b = {0};
    uint8_t fp[16];
    rw_model_fingerprint(s->m, fp);
    rw_sbuf_put(&b, MAGIC, 8);
    rw_sbuf_put_u32(&b, VERSION);
    rw_sbuf_put(&b, fp, 16);
    rw_sbuf_put_u32(&b, (uint32_t)s->kv_type);
    rw_sbuf_put_u64(&b, (uint64_t)s->len);
    rw_sbuf_put(&b, s->tokens, (size_t)s->len * sizeof(int32_t));
    rw_sbuf_put_u32(&b, (uint32_t)rw_models__n_states(s->m));
    for (int il = 0; il < rw_models__n_states(s->m); il++) {
        const rw_layer_state *st = s->layer[il];
        const char *kind = st->ops->kind;
        rw_sbuf_put_u32(&b, (uint32_t)strlen(kind));
        rw_sbuf_put(&b, kind, strlen(kind));
        const size_t at = b.len;
        rw_sbuf_put_u64(&b, 0); /* size, patched below */
        st->ops->save(st, &b);
        if (b.failed) break;
        const uint64_t size = b.len - at - 8;
        memcpy(b.data + at, &size, 8);
        rw_sbuf_put_u32(&b, rw_crc32(0, b.data + at + 8, (size_t)size));
    }
    if (!b.failed) rw_sbuf_put_u32(&b, rw_crc32(0, b.data, b.len));
    if (b.failed) {
        free(b.data);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory serialising the sequence");
    }
    *data = b.data;
    *len = b.len;
    return RW_OK;
}

rw_status rw_model_seq_load_buffer(rw_model_seq *s, const uint8_t *data, size_t len, rw_error *err) {
    if (len < 8 + 4 + 16 + 4 + 8 + 4 + 4 || memcmp(data, MAGIC, 8))
        return rw_errorf(err, RW_ERR_FORMAT, "not a rewind state file");
    uint32_t crc;
    memcpy(&crc, data + len - 4, 4);
    if (rw_crc32(0, data, len - 4) != crc)
        return rw_errorf(err, RW_ERR_FORMAT, "state file checksum mismatch (truncated or corrupted)");
    rw_sreader r = {.p = data, .len = len - 4, .off = 8};
    uint32_t version, kv_type, n_layer;
    uint8_t fp[16], mine[16];
    uint64_t n;
    rw_sread_u32(&r, &version);
    if (version != VERSION) return rw_errorf(err, RW_ERR_UNSUPPORTED, "state file version %u (this build reads %u)", version, VERSION);
    rw_sread(&r, fp, 16);
    rw_model_fingerprint(s->m, mine);
    if (memcmp(fp, mine, 16))
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "state file was made for another model (or by other kernels: --numerics, version)");
    rw_sread_u32(&r, &kv_type);
    if (kv_type != (uint32_t)s->kv_type)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "state file has a %s KV cache, the sequence %s",
                         kv_type ? "f16" : "f32", s->kv_type ? "f16" : "f32");
    if (!rw_sread_u64(&r, &n) || n > (uint64_t)s->max_ctx || n * 4 > r.len - r.off)
        return rw_errorf(err, RW_ERR_FORMAT, "state file: bad token count (or longer than the context %lld)",
                         (long long)s->max_ctx);
    int32_t *tokens = malloc((size_t)(n ? n : 1) * sizeof *tokens);
    if (!tokens) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    rw_sread(&r, tokens, (size_t)n * 4);
    for (uint64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->hp.n_vocab) {
            free(tokens);
            return rw_errorf(err, RW_ERR_FORMAT, "state file: token id out of range");
        }
    rw_layer_state **L;
    rw_status st = rw_models__seq_new_layers(s, &L, err);
    if (st) {
        free(tokens);
        return st;
    }
    if (!rw_sread_u32(&r, &n_layer) || n_layer != (uint32_t)rw_models__n_states(s->m))
        st = rw_errorf(err, RW_ERR_FORMAT, "state file: layer count differs");
    for (int il = 0; !st && il < rw_models__n_states(s->m); il++) {
        uint32_t kl;
        uint64_t size;
        uint32_t lcrc;
        const char *kind = NULL, *payload = NULL;
        if (!rw_sread_u32(&r, &kl) || kl > 64 || !(kind = rw_sread_ptr(&r, kl)) || !rw_sread_u64(&r, &size) ||
            size > r.len - r.off || !(payload = rw_sread_ptr(&r, (size_t)size)) || !rw_sread_u32(&r, &lcrc)) {
            st = rw_errorf(err, RW_ERR_FORMAT, "state file: layer %d truncated", il);
            break;
        }
        if (strlen(L[il]->ops->kind) != kl || memcmp(kind, L[il]->ops->kind, kl)) {
            st = rw_errorf(err, RW_ERR_FORMAT, "state file: layer %d has kind %.*s, the model needs %s", il, (int)kl,
                           kind, L[il]->ops->kind);
            break;
        }
        if (rw_crc32(0, payload, (size_t)size) != lcrc) {
            st = rw_errorf(err, RW_ERR_FORMAT, "state file: layer %d checksum mismatch", il);
            break;
        }
        rw_sreader lr = {.p = (const uint8_t *)payload, .len = (size_t)size};
        if ((st = L[il]->ops->load(L[il], &lr, err))) break;
        /* every state holds the file's n positions, but the MTP block's KV,
         * which lags (model_int.h) and holds at most n */
        const int64_t have = rw_state_length(L[il]);
        if (lr.off != lr.len || have > (int64_t)n || (have != (int64_t)n && il != rw_models__mtp_kv_index(s->m)))
            st = rw_errorf(err, RW_ERR_FORMAT, "state file: layer %d holds %lld positions, the file %llu tokens", il,
                           (long long)rw_state_length(L[il]), (unsigned long long)n);
    }
    if (!st && r.off != r.len) st = rw_errorf(err, RW_ERR_FORMAT, "state file: trailing bytes");
    if (st) {
        rw_models__seq_free_layers(s, L);
        free(tokens);
        return st;
    }
    rw_models__seq_adopt(s, L, tokens, (int64_t)n);
    return RW_OK;
}

rw_status rw_model_seq_save(const rw_model_seq *s, const char *path, rw_error *err) {
    uint8_t *data;
    size_t len;
    rw_status st = rw_model_seq_save_buffer(s, &data, &len, err);
    if (st) return st;
    /* temporary file in the same folder, fsync, rename, fsync the folder */
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16), *dircopy = strdup(path);
    if (!tmp || !dircopy) {
        free(data), free(tmp), free(dircopy);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = rw_errorf(err, RW_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    /* mkstemp creates the file 0600; a state file is as readable as any
     * other output (the umask still applies on top) */
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            st = rw_errorf(err, RW_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
            break;
        }
        off += (size_t)w;
    }
    if (!st && fsync(fd)) st = rw_errorf(err, RW_ERR_IO, "cannot sync %s: %s", tmp, strerror(errno));
    if (close(fd) && !st) st = rw_errorf(err, RW_ERR_IO, "cannot close %s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path)) st = rw_errorf(err, RW_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st) {
        unlink(tmp);
        goto out;
    }
    int dfd = open(dirname(dircopy), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
out:
    free(data), free(tmp), free(dircopy);
    return st;
}

rw_status rw_model_seq_load(rw_model_seq *s, const char *path, rw_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return rw_errorf(err, RW_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) || sb.st_size < 0 || (uint64_t)sb.st_size > MAX_FILE) {
        fclose(f);
        return rw_errorf(err, RW_ERR_IO, "cannot size %s", path);
    }
    size_t len = (size_t)sb.st_size;
    uint8_t *data = malloc(len ? len : 1);
    if (!data) {
        fclose(f);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t got = fread(data, 1, len, f);
    fclose(f);
    rw_status st = got != len ? rw_errorf(err, RW_ERR_IO, "cannot read %s", path)
                              : rw_model_seq_load_buffer(s, data, len, err);
    free(data);
    return st;
}

rw_status rw_model_state_file_tokens(const rw_model *m, const char *path, int32_t **tokens, int64_t *n,
                                     rw_error *err) {
    *tokens = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return rw_errorf(err, RW_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    uint8_t head[8 + 4 + 16 + 4 + 8], mine[16];
    rw_status st = RW_OK;
    uint32_t version;
    uint64_t cnt;
    if (fread(head, 1, sizeof head, f) != sizeof head || memcmp(head, MAGIC, 8)) {
        st = rw_errorf(err, RW_ERR_FORMAT, "%s: not a rewind state file", path);
        goto out;
    }
    memcpy(&version, head + 8, 4);
    memcpy(&cnt, head + 8 + 4 + 16 + 4, 8);
    rw_model_fingerprint(m, mine);
    if (version != VERSION) st = rw_errorf(err, RW_ERR_FORMAT, "%s: state file version %u", path, version);
    else if (memcmp(head + 12, mine, 16))
        st = rw_errorf(err, RW_ERR_INVALID_ARG, "%s: made for another model (or by other kernels)", path);
    else if (cnt > (1u << 28)) st = rw_errorf(err, RW_ERR_FORMAT, "%s: bad token count", path);
    if (st) goto out;
    *tokens = malloc((size_t)(cnt ? cnt : 1) * sizeof **tokens);
    if (!*tokens) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    else if (fread(*tokens, 4, (size_t)cnt, f) != (size_t)cnt) {
        free(*tokens);
        *tokens = NULL;
        st = rw_errorf(err, RW_ERR_FORMAT, "%s: truncated", path);
    } else {
        *n = (int64_t)cnt;
    }
out:
    fclose(f);
    return st;
}
