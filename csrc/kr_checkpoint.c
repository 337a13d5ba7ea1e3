/* Atomic, self-verifying checkpoint files: payload lines followed by one trailer line
 * "xxh64 <16 lowercase hex digits>\n" hashing every byte before it. A crash leaves
 * either the old file or the new one (tmp + fsync + rename + fsync(dir)); a torn or
 * bit-flipped file fails verification instead of being trusted. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kr_core.h"

static const char TRAILER_TAG[] = "xxh64 ";
#define TAG_LEN 6
#define HEX_LEN 16

static int close_keep_errno(int fd)
{
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

static int fsync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0)
        return -1;
    while (fsync(fd) < 0) {
        if (errno != EINTR)
            return close_keep_errno(fd);
    }
    return close(fd);
}

int kr_checkpoint_write(const char *path, const void *payload, size_t len,
                        const char **failed_step)
{
    return kr_checkpoint_write_ex(path, payload, len, 1, failed_step);
}

int kr_checkpoint_write_ex(const char *path, const void *payload, size_t len, int sync,
                           const char **failed_step)
{
    char trailer[KR_CHECKPOINT_TRAILER_SIZE + 1];
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        *failed_step = "allocate";
        errno = ENOMEM;
        return -1;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);

    snprintf(trailer, sizeof(trailer), "%s%016" PRIx64 "\n", TRAILER_TAG,
             kr_xxh64(payload, len, 0));

    if (!sync) {
        /* In place, no temporary file, no fsync: one file system operation instead of
         * four. A crash may leave it torn, which the trailer's hash detects. */
        free(tmp);
        int pfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (pfd < 0) {
            *failed_step = "open";
            return -1;
        }
        if (kr_write_all(pfd, payload, len) < 0 ||
            kr_write_all(pfd, trailer, KR_CHECKPOINT_TRAILER_SIZE) < 0) {
            *failed_step = "write";
            return close_keep_errno(pfd);
        }
        if (close(pfd) < 0) {
            *failed_step = "close";
            return -1;
        }
        return 0;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        *failed_step = "open temporary file";
        goto fail;
    }
    if (kr_write_all(fd, payload, len) < 0 ||
        kr_write_all(fd, trailer, KR_CHECKPOINT_TRAILER_SIZE) < 0) {
        *failed_step = "write temporary file";
        close_keep_errno(fd);
        goto fail_unlink;
    }
    while (fsync(fd) < 0) {
        if (errno != EINTR) {
            *failed_step = "fsync temporary file";
            close_keep_errno(fd);
            goto fail_unlink;
        }
    }
    if (close(fd) < 0) {
        *failed_step = "close temporary file";
        goto fail_unlink;
    }
    if (rename(tmp, path) < 0) {
        *failed_step = "rename";
        goto fail_unlink;
    }
    free(tmp);
    if (fsync_dir_of(path) < 0) {
        *failed_step = "fsync directory";
        return -1;
    }
    return 0;

fail_unlink: {
    int saved = errno;
    unlink(tmp);
    errno = saved;
}
fail:
    free(tmp);
    return -1;
}

int kr_read_file(const char *path, uint8_t **out, size_t *len)
{
    struct stat st;
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0)
        return close_keep_errno(fd);
    /* one spare byte so a file that grew meanwhile is noticed and read to its end */
    size_t cap = (size_t)(st.st_size > 0 ? st.st_size : 0) + 1;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        errno = ENOMEM;
        return close_keep_errno(fd);
    }
    size_t used = 0;
    for (;;) {
        if (used == cap) {
            uint8_t *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                errno = ENOMEM;
                return close_keep_errno(fd);
            }
            buf = grown;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + used, cap - used);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            free(buf);
            return close_keep_errno(fd);
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    *out = buf;
    *len = used;
    return 0;
}

static int is_lower_hex(uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

int64_t kr_checkpoint_verify(const uint8_t *buf, size_t len, char *reason)
{
    if (len < KR_CHECKPOINT_TRAILER_SIZE) {
        snprintf(reason, KR_REASON_MAX,
                 "file too short for the xxh64 trailer line (%zu bytes)", len);
        return -1;
    }
    size_t payload_len = len - KR_CHECKPOINT_TRAILER_SIZE;
    const uint8_t *t = buf + payload_len;
    if (memcmp(t, TRAILER_TAG, TAG_LEN) != 0 || t[KR_CHECKPOINT_TRAILER_SIZE - 1] != '\n') {
        snprintf(reason, KR_REASON_MAX, "missing xxh64 trailer line");
        return -1;
    }
    uint64_t stored = 0;
    for (int i = 0; i < HEX_LEN; i++) {
        uint8_t c = t[TAG_LEN + i];
        if (!is_lower_hex(c)) {
            snprintf(reason, KR_REASON_MAX, "malformed xxh64 trailer line");
            return -1;
        }
        stored = stored << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (payload_len > 0 && buf[payload_len - 1] != '\n') {
        snprintf(reason, KR_REASON_MAX, "xxh64 trailer is not on a line of its own");
        return -1;
    }
    uint64_t computed = kr_xxh64(buf, payload_len, 0);
    if (computed != stored) {
        snprintf(reason, KR_REASON_MAX,
                 "xxh64 mismatch: stored %016" PRIx64 " computed %016" PRIx64, stored, computed);
        return -1;
    }
    return (int64_t)payload_len;
}
