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
///
/// Each file begins with a `header` the ranks' stage waits use as a doorbell
/// (`ring`, `sleep_on`): a rank waiting on a counter in a peer's stage notes
/// in its own header that it sleeps on that peer, then sleeps on a futex
/// word in the peer's header, which the peer bumps (and wakes) after it
/// raises a counter, if it finds such a note.
///
/// Ranks that share stages may also read each other's memory at any address
/// (`read`: Linux cross-memory attach, `process_vm_readv`, one copy by the
/// kernel, what MPI libraries call single-copy): allowed where the kernel
/// lets a process attach to its peer (the same user, ptrace not forbidden,
/// e.g. Yama's `ptrace_scope` 0). Each pair tries it at `open_peer` on a
/// word the owner publishes in its `file`; `readable` says whether every
/// pair could. Such ranks may also write into each other's memory (`write`,
/// `process_vm_writev`): the kernel asks the same of both directions (a
/// process that may attach to its peer), so `readable` answers for it too.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#endif
#include <thread>

#include "ddl/core/error.hpp"
#include "ddl/shm/cross_memory.hpp"
#include "ddl/shm/shared_buffer.hpp"

namespace ddl {
namespace detail {

class shared_stages {
 public:
  /// What a process tells its peers of its stage.
  struct file {
    std::int32_t fd = -1;
    std::uint64_t dev = 0, ino = 0;  // checked after opening it through /proc: the same file
    std::uint64_t probe_at = 0;      // the address of a word holding `probe_value(ino)` (`read` tried on it); 0: none
  };
  /// What a stage's owner keeps at its `file::probe_at`.
  static constexpr std::uint64_t probe_value(std::uint64_t ino) noexcept { return ino ^ 0x64646c2d72656164u; }

  shared_stages() = default;
  shared_stages(const shared_stages&) = delete;
  shared_stages& operator=(const shared_stages&) = delete;
  ~shared_stages() { close(); }

  /// Whether every rank maps every other's stage (`agree`).
  bool shared() const noexcept { return shared_; }
  /// Whether the ranks `base + i * stride` (i < `size`) all map each
  /// other's stages (`agree`): the same answer on every rank.
  bool shared_among(int base, int stride, int size) const noexcept {
    return shared_ || pairs_among(base, stride, size, false);
  }

  /// Bytes every stage holds from its creation (zeroed): its first page.
  /// A peer may map and watch them before the owner's first call.
  static constexpr std::size_t page = std::size_t{64} << 10;
  /// Bytes of each file before its stage: the doorbell (`ring`, `sleep_on`).
  static constexpr std::size_t header = 4096;
  /// Bytes at the start of a stage that every new mapping faults in at once
  /// (`warm`): where the direct strategies keep their counters, slots and
  /// the broadcast ring, which small calls touch page by page. A first touch
  /// of a page costs more than such a call (a small broadcast through fresh
  /// ring entries took about three times as long as through warm ones).
  static constexpr std::size_t warm_bytes = std::size_t{256} << 10;

  /// Creates this process's stage (one page, zeroed); `fd` -1 where it cannot.
  file create() {
    file f;
#if defined(__linux__)
    fd_ = ::memfd_create("ddl-stage", MFD_CLOEXEC);
    struct stat st {};
    if (fd_ >= 0 && ::ftruncate(fd_, static_cast<off_t>(header + page)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0) {
      f.fd = fd_;
      f.dev = static_cast<std::uint64_t>(st.st_dev);
      f.ino = static_cast<std::uint64_t>(st.st_ino);
      probe_ = probe_value(f.ino);
      f.probe_at = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&probe_));
    }
#endif
    return f;
  }

  /// Opens rank `p`'s stage, file `f` of process `pid` (`n` ranks in all);
  /// false when it cannot be opened or is another file. With `try_read`,
  /// also tries `read` on the peer's probe word (`readable`).
  bool open_peer(int p, std::int64_t pid, const file& f, int n, bool try_read = true) {
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
    peer_file& peer = peers_[static_cast<std::size_t>(p)];
    peer.fd = fd;
    peer.pid = pid;
    std::uint64_t word = 0;
    peer.readable = try_read && f.probe_at != 0 &&
                    cross_memory_read(pid, reinterpret_cast<const std::byte*>(static_cast<std::uintptr_t>(f.probe_at)),
                              reinterpret_cast<std::byte*>(&word), sizeof word) == 0 &&
                    word == probe_value(f.ino);
    return true;
#else
    (void)p;
    (void)pid;
    (void)f;
    (void)try_read;
    return false;
#endif
  }

  /// Words of a row of `n` ranks (`row`, `agree`): a bit per rank for the
  /// stages held, then a bit per rank for the memory read (`read`).
  static std::size_t row_words(int n) noexcept { return 2 * bits_words(n); }
  /// Which stages this rank holds (a bit per rank): its own (when created)
  /// and each peer's that `open_peer` opened; then whose memory it could
  /// read (its own when it has a stage, each peer's that `open_peer` read).
  std::vector<std::uint64_t> row(int me, int n) const {
    const std::size_t half = bits_words(n);
    std::vector<std::uint64_t> r(row_words(n), 0);
    for (int p = 0; p < n; ++p) {
      const bool open = p == me ? fd_ >= 0 : static_cast<std::size_t>(p) < peers_.size() && peers_[static_cast<std::size_t>(p)].fd >= 0;
      const bool reads = open && (p == me || peers_[static_cast<std::size_t>(p)].readable);
      const std::uint64_t bit = std::uint64_t{1} << (p % 64);
      if (open) r[static_cast<std::size_t>(p) / 64] |= bit;
      if (reads) r[half + static_cast<std::size_t>(p) / 64] |= bit;
    }
    return r;
  }
  /// Whether every rank reads every other's memory (`read`; `agree`).
  bool readable() const noexcept { return readable_; }
  /// Whether the ranks `base + i * stride` (i < `size`) all read each
  /// other's memory and share stages (`agree`): the same answer on every rank.
  bool readable_among(int base, int stride, int size) const noexcept {
    return readable_ || pairs_among(base, stride, size, true);
  }

  /// Copies `bytes` from address `at` of rank `p`'s process into `dst`:
  /// one copy, by the kernel. 0, or the `errno` of the failure (a peer
  /// whose memory this rank could not read at `agree` is `EPERM`).
  int read(int p, const std::byte* at, std::byte* dst, std::size_t bytes) const noexcept {
    if (!some_ || p < 0 || static_cast<std::size_t>(p) >= peers_.size() || !peers_[static_cast<std::size_t>(p)].readable)
      return EPERM;
    return cross_memory_read(peers_[static_cast<std::size_t>(p)].pid, at, dst, bytes);
  }
  /// Copies `bytes` from `src` to address `at` of rank `p`'s process: one
  /// copy, by the kernel. 0, or the `errno` of the failure (as `read`).
  int write(int p, const std::byte* src, std::byte* at, std::size_t bytes) const noexcept {
    if (!some_ || p < 0 || static_cast<std::size_t>(p) >= peers_.size() || !peers_[static_cast<std::size_t>(p)].readable)
      return EPERM;
    return cross_memory_copy(peers_[static_cast<std::size_t>(p)].pid, const_cast<std::byte*>(src), at, bytes, true);
  }
  /// Every rank's `row`, rank q's at `rows[q * row_words(n)]`, the same on
  /// every rank: two ranks share when each holds the other's stage. Keeps
  /// the peers this rank shares with and closes the rest (all of it when
  /// it shares with none, which still answers `shared_among` for others).
  void agree(std::vector<std::uint64_t> rows, int me, int n) {
    rows_ = std::move(rows);
    ranks_ = n;
    bool all = true, any = false, reads = true;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        all = all && mutual(p, q);
        reads = reads && mutual(p, q, bits_words(n));
      }
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      const bool keep = mutual(me, p);
      any = any || keep;
      if (!keep && static_cast<std::size_t>(p) < peers_.size()) close_peer(peers_[static_cast<std::size_t>(p)]);
    }
    if (n == 1) any = all = fd_ >= 0;  // alone: its stage is all there is to share
    if (!any) {  // nothing of its own to share; what the others share still holds
      std::vector<std::uint64_t> keep = std::move(rows_);
      close();
      rows_ = std::move(keep);
      return;
    }
    shared_ = all;
    readable_ = all && reads;
    some_ = true;
    // Every doorbell mapped now (`ring` looks at the peers' headers).
    own(0, "shared stages: rank " + std::to_string(me));
    for (int p = 0; p < n && static_cast<std::size_t>(p) < peers_.size(); ++p)
      if (p != me && peers_[static_cast<std::size_t>(p)].fd >= 0)
        peer(p, 0, "shared stages: rank " + std::to_string(me) + ", rank " + std::to_string(p));
  }

  /// This rank (`me`) has raised a counter in its stage: wakes the peers
  /// asleep on it (`sleep_on`), if one is. A fence and a look at each
  /// sharing peer's header when none is.
  void ring(int me) noexcept {
    if (!some_ || !own_.at) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (std::size_t p = 0; p < peers_.size(); ++p) {
      const std::byte* h = peers_[p].map.at;
      if (!h || word(h, asleep_at).load(std::memory_order_relaxed) != static_cast<std::uint32_t>(me) + 1) continue;
      std::atomic<std::uint32_t>& bell = word(own_.at, bell_at);
      bell.fetch_add(1, std::memory_order_release);
#if defined(__linux__)
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#endif
      return;
    }
  }

  /// Sleeps until rank `p` rings (`ring`), `ready()` holds (looked at
  /// after this rank noted that it sleeps, so a ring after the condition
  /// was made true is not missed), or `until`. Where no doorbell is
  /// mapped, sleeps 20 us.
  template <class Ready>
  void sleep_on(int p, Ready&& ready, std::chrono::steady_clock::time_point until) {
    const std::byte* h = p >= 0 && static_cast<std::size_t>(p) < peers_.size() ? peers_[static_cast<std::size_t>(p)].map.at
                                                                               : nullptr;
#if defined(__linux__)
    if (h && own_.at) {
      std::atomic<std::uint32_t>& asleep = word(own_.at, asleep_at);
      asleep.store(static_cast<std::uint32_t>(p) + 1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      std::atomic<std::uint32_t>& bell = word(h, bell_at);
      const std::uint32_t rung = bell.load(std::memory_order_acquire);
      const auto left = until - std::chrono::steady_clock::now();
      if (left > std::chrono::steady_clock::duration::zero() && !ready()) {
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        struct timespec ts {};
        ts.tv_sec = static_cast<time_t>(ns / 1000000000);
        ts.tv_nsec = static_cast<long>(ns % 1000000000);
        ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&bell), FUTEX_WAIT, rung, &ts, nullptr, 0);
      }
      asleep.store(0, std::memory_order_relaxed);
      return;
    }
#endif
    (void)h;
    (void)ready;
    (void)until;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

  /// This process's stage, at least `bytes` long (at least doubled when it
  /// grows, in whole pages). `who` prefixes error texts.
  std::byte* own(std::size_t bytes, const std::string& who) {
    if (!some_) throw invalid_argument(who + ": no shared stages here (stages_shared() is false)");
    if (std::byte* s = own_mapped(bytes)) return s;
#if defined(__linux__)
    std::size_t len = header + std::max<std::size_t>((bytes + page - 1) / page * page, page);
    if (len < 2 * own_.len) len = 2 * own_.len;
    if (::ftruncate(fd_, static_cast<off_t>(len)) != 0)
      throw transport_error(who + ": cannot grow its shared stage to " + std::to_string(len) +
                            " bytes: " + std::strerror(errno));
    void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED)
      throw transport_error(who + ": cannot map its shared stage of " + std::to_string(len) +
                            " bytes: " + std::strerror(errno));
    unmap(own_);
    own_ = mapping{static_cast<std::byte*>(m), len};
    warm(own_);
    return own_.at + header;
#else
    throw invalid_argument(who + ": shared stages need Linux");
#endif
  }

  /// This process's stage when it is mapped and at least `bytes` long,
  /// else null (then `own` grows it): the fast path, no error text built.
  std::byte* own_mapped(std::size_t bytes) const noexcept {
    return some_ && own_.at && bytes <= own_.len - header ? own_.at + header : nullptr;
  }
  /// Rank `p`'s stage when it is mapped here for at least `bytes`, else null
  /// (then `peer` maps it): the fast path.
  const std::byte* peer_mapped(int p, std::size_t bytes) const noexcept {
    if (!some_ || p < 0 || static_cast<std::size_t>(p) >= peers_.size()) return nullptr;
    const mapping& m = peers_[static_cast<std::size_t>(p)].map;
    return m.at && bytes <= m.len - header ? m.at + header : nullptr;
  }

  /// Rank `p`'s stage as mapped here, at least its first `bytes`. `who`
  /// (naming the peer) prefixes error texts.
  const std::byte* peer(int p, std::size_t bytes, const std::string& who) {
    if (!some_ || p < 0 || static_cast<std::size_t>(p) >= peers_.size() || peers_[static_cast<std::size_t>(p)].fd < 0)
      throw invalid_argument(who + ": its stage is not shared with this rank (stages_shared() is false)");
    if (const std::byte* s = peer_mapped(p, bytes)) return s;
    peer_file& f = peers_[static_cast<std::size_t>(p)];
#if defined(__linux__)
    struct stat st {};
    if (::fstat(f.fd, &st) != 0)
      throw transport_error(who + ": its shared stage cannot be looked at: " + std::strerror(errno));
    const auto len = static_cast<std::size_t>(st.st_size);  // all of it: fewer maps later
    if (len < header + bytes || len <= header)
      throw transport_error(who + ": its shared stage holds " + std::to_string(len > header ? len - header : 0) +
                            " bytes, fewer than the " +
                            std::to_string(bytes) + " this call reads (did every rank pass the same count?)");
    void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, f.fd, 0);
    if (m == MAP_FAILED)
      throw transport_error(who + ": cannot map its shared stage of " + std::to_string(len) +
                            " bytes: " + std::strerror(errno));
    unmap(f.map);
    f.map = mapping{static_cast<std::byte*>(m), len};
    warm(f.map);
    return f.map.at + header;
#else
    throw invalid_argument(who + ": shared stages need Linux");
#endif
  }

  /// Region `r` of rank `p`'s `shared_buffer` (process `pid`) when this
  /// rank has it mapped, else null (then `peer_buffer` maps it): the fast path.
  const std::byte* peer_buffer_mapped(int p, const shared_region& r) noexcept {
    if (!some_ || p < 0 || static_cast<std::size_t>(p) >= peers_.size()) return nullptr;
    auto& maps = peers_[static_cast<std::size_t>(p)].buffers;
    for (std::size_t i = 0; i < maps.size(); ++i)
      if (maps[i].serial == r.serial && maps[i].map.len == r.length) {
        if (i > 0) std::swap(maps[i], maps[0]);  // the buffer a trainer reduces every step stays first
        return maps[0].map.at + r.offset;
      }
    return nullptr;
  }

  /// Region `r` of rank `p`'s `shared_buffer` (process `pid`), mapped here
  /// for reading: the whole buffer, once, kept for later calls (up to
  /// `buffers_kept` per peer, the least recently used unmapped first). Only
  /// between ranks that share stages. `who` (naming the peer) prefixes
  /// error texts.
  const std::byte* peer_buffer(int p, std::int64_t pid, const shared_region& r, const std::string& who) {
    if (const std::byte* at = peer_buffer_mapped(p, r)) return at;
    if (!some_ || p < 0 || static_cast<std::size_t>(p) >= peers_.size() || peers_[static_cast<std::size_t>(p)].fd < 0)
      throw invalid_argument(who + ": its buffers are not shared with this rank (stages_shared() is false)");
#if defined(__linux__)
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%lld/fd/%d", static_cast<long long>(pid), static_cast<int>(r.fd));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw transport_error(who + ": cannot open its shared buffer (" + path + "): " + std::strerror(errno));
    struct stat st {};
    const bool same = ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == r.dev &&
                      static_cast<std::uint64_t>(st.st_ino) == r.ino &&
                      static_cast<std::uint64_t>(st.st_size) >= r.length && r.offset <= r.length;
    void* m = same ? ::mmap(nullptr, r.length, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    const int err = errno;
    ::close(fd);  // the mapping holds the file
    if (!same)
      throw transport_error(who + ": its shared buffer " + path + " is not the file it named (freed mid-call?)");
    if (m == MAP_FAILED)
      throw transport_error(who + ": cannot map its shared buffer of " + std::to_string(r.length) +
                            " bytes: " + std::strerror(err));
    auto& maps = peers_[static_cast<std::size_t>(p)].buffers;
    if (maps.size() >= buffers_kept) {
      unmap(maps.back().map);
      maps.pop_back();
    }
    maps.insert(maps.begin(), buffer_map{r.serial, mapping{static_cast<std::byte*>(m), r.length}});
    return maps[0].map.at + r.offset;
#else
    (void)pid;
    throw invalid_argument(who + ": shared buffers need Linux");
#endif
  }
  /// Peers' shared buffers kept mapped, per peer.
  static constexpr std::size_t buffers_kept = 16;

  /// Unmaps and closes everything; nothing is shared afterwards.
  void close() noexcept {
    shared_ = some_ = readable_ = false;
    rows_.clear();
    for (peer_file& f : peers_) close_peer(f);
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
  /// Faults in the header and the first `warm_bytes` of a stage's new
  /// mapping. Read faults suffice: on shared memory they allocate the page
  /// and map it writable where the mapping is. One system call where the
  /// kernel has MADV_POPULATE_READ (5.14), else a read of every page.
  static void warm(const mapping& m) noexcept {
#if defined(__linux__)
    const std::size_t n = std::min(m.len, header + warm_bytes);
#if defined(MADV_POPULATE_READ)
    if (::madvise(m.at, n, MADV_POPULATE_READ) == 0) return;
#endif
    for (std::size_t i = 0; i < n; i += 4096) (void)*reinterpret_cast<volatile const unsigned char*>(m.at + i);
#else
    (void)m;
#endif
  }
  struct buffer_map {
    std::uint64_t serial = 0;
    mapping map;
  };
  struct peer_file {
    int fd = -1;
    std::int64_t pid = 0;
    bool readable = false;  // `read` worked on its probe word at `open_peer`
    mapping map;
    std::vector<buffer_map> buffers;  // its shared buffers mapped here, the most recently used first
  };
  static std::size_t bits_words(int n) noexcept { return (static_cast<std::size_t>(n) + 63) / 64; }
  // Whether every pair of the ranks `base + i * stride` (i < `size`) shares
  // stages (`mutual`) and, with `reads`, reads each other's memory.
  bool pairs_among(int base, int stride, int size, bool reads) const noexcept {
    if (rows_.empty() || base < 0 || stride < 1 || size < 1 || base + (size - 1) * stride >= ranks_) return false;
    for (int i = 0; i < size; ++i)
      for (int j = i + 1; j < size; ++j) {
        const int p = base + i * stride, q = base + j * stride;
        if (!mutual(p, q) || (reads && !mutual(p, q, bits_words(ranks_)))) return false;
      }
    return true;
  }
  // Whether p and q each set the other's bit in their rows, in the bits
  // from word `at` on (0: stages held; `bits_words`: memory read).
  bool mutual(int p, int q, std::size_t at = 0) const noexcept {
    const std::size_t w = row_words(ranks_);
    auto holds = [&](int a, int b) {
      return (rows_[static_cast<std::size_t>(a) * w + at + static_cast<std::size_t>(b) / 64] >> (b % 64)) & 1u;
    };
    return p == q || (holds(p, q) && holds(q, p));
  }
  static void close_peer(peer_file& f) noexcept {
    unmap(f.map);
    for (buffer_map& b : f.buffers) unmap(b.map);
    f.buffers.clear();
#if defined(__linux__)
    if (f.fd >= 0) ::close(f.fd);
#endif
    f.fd = -1;
  }
  // The doorbell's words in a file's header (`ring`, `sleep_on`): the
  // owner's bell (a futex word it bumps to wake its sleepers) and, a cache
  // line on, the rank the owner sleeps on (+ 1; 0: none).
  static constexpr std::size_t bell_at = 0, asleep_at = 64;
  static std::atomic<std::uint32_t>& word(const std::byte* file, std::size_t at) noexcept {
    return *reinterpret_cast<std::atomic<std::uint32_t>*>(const_cast<std::byte*>(file + at));
  }
  static void unmap(mapping& m) noexcept {
#if defined(__linux__)
    if (m.at) ::munmap(m.at, m.len);
#endif
    m = mapping{};
  }
  int fd_ = -1;  // this process's stage file
  mapping own_;
  std::vector<peer_file> peers_;  // per rank (this rank's entry unused)
  std::vector<std::uint64_t> rows_;  // every rank's `row` (see `agree`); empty: nothing shared
  int ranks_ = 0;
  bool shared_ = false;  // every pair shares
  bool readable_ = false;  // every pair shares and reads each other's memory
  bool some_ = false;    // this rank shares with at least one peer
  std::uint64_t probe_ = 0;  // `probe_value` of its file (`file::probe_at`)
};

}  // namespace detail
}  // namespace ddl
