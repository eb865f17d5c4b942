#ifndef TOKENRELAY_CSYSTEM_SHIM_H
#define TOKENRELAY_CSYSTEM_SHIM_H

// The few Linux calls Swift's Glibc module does not show: eventfd and mallopt (headers outside
// its module map), ioctl's FIONREAD (a variadic call Swift cannot make) and pwritev2 (behind
// _GNU_SOURCE, which a header cannot turn on for an already-built system module: declared here
// with glibc's prototype). Nothing to link beyond libc.

#include <sys/types.h>
#include <sys/uio.h>

#ifdef __linux__
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <malloc.h>

extern ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags);

/// Writes up to `count` bytes at the file's current position without ever waiting for room:
/// `pwritev2(..., -1, RWF_NOWAIT)`. A pipe takes what fits (all or nothing for at most PIPE_BUF
/// bytes), else -1 with EAGAIN; files that cannot honour it give EOPNOTSUPP (or EINVAL on
/// kernels older than 4.14).
static inline ssize_t tr_write_nowait(int fd, const void *bytes, size_t count) {
    struct iovec vector = { (void *)bytes, count };
    return pwritev2(fd, &vector, 1, -1, 0x00000008 /* RWF_NOWAIT, linux/fs.h */);
}

/// The bytes `fd` holds for reading now (FIONREAD: a pipe's or socket's queue, a terminal's
/// complete lines, a file's rest), or -1 when it cannot tell.
static inline int tr_readable_bytes(int fd) {
    int count = 0;
    return ioctl(fd, FIONREAD, &count) == 0 ? count : -1;
}
#endif

#endif
