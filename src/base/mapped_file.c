/* mapped_file.c - mmap a file read-only. */
#include "base/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

rw_status rw_mapped_file_open(const char *path, rw_mapped_file *out, rw_error *err) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rw_errorf(err, RW_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rw_errorf(err, RW_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rw_errorf(err, RW_ERR_IO, "%s is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return RW_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file open */
    if (p == MAP_FAILED) return rw_errorf(err, RW_ERR_IO, "cannot map %s: %s", path, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    return RW_OK;
}

void rw_mapped_file_close(rw_mapped_file *f) {
    if (f->data) munmap((void *)f->data, f->size);
    f->data = NULL;
    f->size = 0;
}
