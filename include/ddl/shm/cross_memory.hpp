#pragma once
/// \file
/// Copies between this process and another of the same machine by the
/// kernel, one copy (Linux cross-memory attach: `process_vm_readv`,
/// `process_vm_writev`; what MPI libraries call single-copy). Allowed where
/// the kernel lets a process attach to its peer (the same user, ptrace not
/// forbidden, e.g. Yama's `ptrace_scope` 0); elsewhere `ENOSYS`.
#include <cerrno>
#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/types.h>
#include <sys/uio.h>
#endif

namespace ddl::detail {

/// `bytes` between `local` here and `remote` in process `pid`, into
/// `remote` with `into_remote`, else out of it: 0 or the errno.
inline int cross_memory_copy(std::int64_t pid, std::byte* local, std::byte* remote, std::size_t bytes,
                              bool into_remote) noexcept {
#if defined(__linux__)
  while (bytes > 0) {
    struct iovec here {local, bytes}, there {remote, bytes};
    const ssize_t got = into_remote ? ::process_vm_writev(static_cast<pid_t>(pid), &here, 1, &there, 1, 0)
                                    : ::process_vm_readv(static_cast<pid_t>(pid), &here, 1, &there, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? errno : EFAULT;
    const auto done = static_cast<std::size_t>(got);
    local += done;
    remote += done;
    bytes -= done;
  }
  return 0;
#else
  (void)pid;
  (void)local;
  (void)remote;
  (void)into_remote;
  return bytes > 0 ? ENOSYS : 0;
#endif
}

/// `bytes` from address `at` of process `pid` into `dst`: 0 or the errno.
inline int cross_memory_read(std::int64_t pid, const std::byte* at, std::byte* dst, std::size_t bytes) noexcept {
  return cross_memory_copy(pid, dst, const_cast<std::byte*>(at), bytes, false);
}

}  // namespace ddl::detail
