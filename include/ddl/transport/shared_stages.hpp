#pragma once
/// \file
/// Stages that the processes of one machine share (`detail::shared_stages`,
/// behind a transport's `stage` / `peer_stage`, see `transport/concept.hpp`).
/// Each process's stage is an anonymous shared-memory file (Linux
/// `memfd_create`); its peers open it through `/proc/<pid>/fd/<fd>` (allowed
/// where they may look into each other's processes: the same user, ptrace
/// not forbidden) and map it for reading. The owner grows it with
/// `ftruncate` and never shrinks it, so a mapping never reaches past the
/// file's end; a peer maps it again only when it needs more than it holds.
/// Nothing is named in the file system: a crash leaves nothing behind, the
/// memory goes with the last process that holds it. Linux only; elsewhere
/// nothing is shared.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include "ddl/core/error.hpp"

namespace ddl {
namespace detail {

class shared_stages {
 public:
  /// What a process tells its peers of its stage.
  struct file {
    std::int32_t fd = -1;
    std::uint64_t dev = 0, ino = 0;  // checked after opening it through /proc: the same file
  };

  shared_stages() = default;
  shared_stages(const shared_stages&) = delete;
  shared_stages& operator=(const shared_stages&) = delete;
  ~shared_stages() { close(); }

  /// Whether every peer's stage is open here (`agree`).
  bool shared() const noexcept { return shared_; }

  /// Bytes every stage holds from its creation (zeroed): its first page.
  /// A peer may map and watch them before the owner's first call.
  static constexpr std::size_t page = std::size_t{64} << 10;

  /// Creates this process's stage (one page, zeroed); `fd` -1 where it cannot.
  file create() {
    file f;
#if defined(__linux__)
    fd_ = ::memfd_create("ddl-stage", MFD_CLOEXEC);
    struct stat st {};
    if (fd_ >= 0 && ::ftruncate(fd_, static_cast<off_t>(page)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0) {
      f.fd = fd_;
      f.dev = static_cast<std::uint64_t>(st.st_dev);
      f.ino = static_cast<std::uint64_t>(st.st_ino);
    }
#endif
    return f;
  }

  /// Opens rank `p`'s stage, file `f` of process `pid` (`n` ranks in all);
  /// false when it cannot be opened or is another file.
  bool open_peer(int p, std::int64_t pid, const file& f, int n) {
    if (peers_.size() != static_cast<std::size_t>(n)) peers_.resize(static_cast<std::size_t>(n));
#if defined(__linux__)
    if (f.fd < 0) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%lld/fd/%d", static_cast<long long>(pid), static_cast<int>(f.fd));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != f.dev ||
        static_cast<std::uint64_t>(st.st_ino) != f.ino) {
      ::close(fd);
      return false;
    }
    peers_[static_cast<std::size_t>(p)].fd = fd;
    return true;
#else
    (void)p;
    (void)pid;
    (void)f;
    return false;
#endif
  }

  /// What every rank found (the least of their answers): shared, or all closed.
  void agree(bool ok) {
    if (ok) shared_ = true;
    else close();
  }

  /// This process's stage, at least `bytes` long (at least doubled when it
  /// grows, in whole pages). `who` prefixes error texts.
  std::byte* own(std::size_t bytes, const std::string& who) {
    if (!shared_) throw invalid_argument(who + ": no shared stages here (stages_shared() is false)");
    if (own_.at && bytes <= own_.len) return own_.at;
#if defined(__linux__)
    std::size_t len = (bytes + page - 1) / page * page;
    if (len < 2 * own_.len) len = 2 * own_.len;
    if (len == 0) len = page;
    if (::ftruncate(fd_, static_cast<off_t>(len)) != 0)
      throw transport_error(who + ": cannot grow its shared stage to " + std::to_string(len) +
                            " bytes: " + std::strerror(errno));
    void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED)
      throw transport_error(who + ": cannot map its shared stage of " + std::to_string(len) +
                            " bytes: " + std::strerror(errno));
    unmap(own_);
    own_ = mapping{static_cast<std::byte*>(m), len};
    return own_.at;
#else
    throw invalid_argument(who + ": shared stages need Linux");
#endif
  }

  /// This process's stage when it is mapped and at least `bytes` long,
  /// else null (then `own` grows it): the fast path, no error text built.
  std::byte* own_mapped(std::size_t bytes) const noexcept {
    return shared_ && own_.at && bytes <= own_.len ? own_.at : nullptr;
  }
  /// Rank `p`'s stage when it is mapped here for at least `bytes`, else null
  /// (then `peer` maps it): the fast path.
  const std::byte* peer_mapped(int p, std::size_t bytes) const noexcept {
    if (!shared_ || p < 0 || static_cast<std::size_t>(p) >= peers_.size()) return nullptr;
    const mapping& m = peers_[static_cast<std::size_t>(p)].map;
    return m.at && bytes <= m.len ? m.at : nullptr;
  }

  /// Rank `p`'s stage as mapped here, at least its first `bytes`. `who`
  /// (naming the peer) prefixes error texts.
  const std::byte* peer(int p, std::size_t bytes, const std::string& who) {
    if (!shared_ || p < 0 || static_cast<std::size_t>(p) >= peers_.size() || peers_[static_cast<std::size_t>(p)].fd < 0)
      throw invalid_argument(who + ": its stage is not shared with this rank (stages_shared() is false)");
    peer_file& f = peers_[static_cast<std::size_t>(p)];
    if (f.map.at && bytes <= f.map.len) return f.map.at;
#if defined(__linux__)
    struct stat st {};
    if (::fstat(f.fd, &st) != 0)
      throw transport_error(who + ": its shared stage cannot be looked at: " + std::strerror(errno));
    const auto len = static_cast<std::size_t>(st.st_size);  // all of it: fewer maps later
    if (len < bytes || len == 0)
      throw transport_error(who + ": its shared stage holds " + std::to_string(len) + " bytes, fewer than the " +
                            std::to_string(bytes) + " this call reads (did every rank pass the same count?)");
    void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, f.fd, 0);
    if (m == MAP_FAILED)
      throw transport_error(who + ": cannot map its shared stage of " + std::to_string(len) +
                            " bytes: " + std::strerror(errno));
    unmap(f.map);
    f.map = mapping{static_cast<std::byte*>(m), len};
    return f.map.at;
#else
    throw invalid_argument(who + ": shared stages need Linux");
#endif
  }

  /// Unmaps and closes everything; nothing is shared afterwards.
  void close() noexcept {
    shared_ = false;
    for (peer_file& f : peers_) {
      unmap(f.map);
#if defined(__linux__)
      if (f.fd >= 0) ::close(f.fd);
#endif
      f.fd = -1;
    }
    unmap(own_);
#if defined(__linux__)
    if (fd_ >= 0) ::close(fd_);
#endif
    fd_ = -1;
  }

 private:
  struct mapping {
    std::byte* at = nullptr;
    std::size_t len = 0;
  };
  struct peer_file {
    int fd = -1;
    mapping map;
  };
  static void unmap(mapping& m) noexcept {
#if defined(__linux__)
    if (m.at) ::munmap(m.at, m.len);
#endif
    m = mapping{};
  }
  int fd_ = -1;  // this process's stage file
  mapping own_;
  std::vector<peer_file> peers_;  // per rank (this rank's entry unused)
  bool shared_ = false;
};

}  // namespace detail
}  // namespace ddl
