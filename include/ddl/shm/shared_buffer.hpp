#pragma once
/// \file
/// Host memory the processes of one machine can read from each other:
/// `ddl::shared_buffer`. A collective whose buffers lie in one runs over
/// MPI ranks of one machine the way it runs over threads: its peers read
/// the buffer where it lies, instead of a copy the rank first makes in its
/// stage (`shm/shared_stages.hpp`). For the direct strategies
/// (`ddl::two_shot`, `ddl::one_shot`, the direct reduce-scatter and
/// all-gather, `multi_ring::direct_first`) that copy is most of the cost at
/// large sizes: 2 MPI ranks, 16 MiB in place, two_shot moves 4.5 S bytes
/// per rank through a stage and 2.5 S from a shared buffer. NCCL's
/// registered user buffers (`ncclMemAlloc`, `ncclCommRegister`) serve the
/// same end on GPUs.
///
/// A buffer is an anonymous shared-memory file (Linux `memfd_create`),
/// mapped here for reading and writing. It is known to every transport of
/// the process through a registry (`detail::shared_registry`): a call hands
/// its peers the file, its serial number and the offset of its buffer, and
/// a peer that shares stages with this rank opens the file through
/// `/proc/<pid>/fd/<fd>` (the same rules as the stages: the same user,
/// ptrace not forbidden), maps it once for reading and keeps the mapping
/// for later calls (`shared_stages::peer_buffer`). A peer's mapping keeps
/// the memory alive after the owner frees the buffer, so no read ever
/// touches freed memory; the serial is never used again in the process, so
/// a freed buffer's mapping is never taken for a new one.
///
/// Buffers elsewhere work as before (staged); a transport without shared
/// stages (threads: they read each other's memory anyway; ranks on several
/// machines) simply never looks. Where `memfd_create` is missing or fails,
/// a `shared_buffer` is ordinary memory (`shared()` false).
///
/// Example:
/// \code
///   ddl::shared_buffer grads(n * sizeof(float));      // allocated once, reused every step
///   float* g = grads.as<float>();
///   ...                                               // the backward pass writes g
///   comm.all_reduce(ddl::host_view(g, n), ddl::op::avg);  // peers read g in place
/// \endcode
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <utility>
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

/// Where a range lies in a `shared_buffer`: what a peer needs to map it.
/// `fd` -1: not in one.
struct shared_region {
  std::int32_t fd = -1;
  std::uint32_t pad = 0;
  std::uint64_t dev = 0, ino = 0;  // checked after opening it through /proc: the same file
  std::uint64_t serial = 0;        // the buffer's number in its process, never reused
  std::uint64_t length = 0;        // the whole file
  std::uint64_t offset = 0;        // of the range, from the file's start
  explicit operator bool() const noexcept { return fd >= 0; }
};

/// The process's live shared buffers, for looking up where a range lies.
class shared_registry {
 public:
  static void add(const std::byte* base, const shared_region& r) {
    auto& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.live.push_back(entry{base, r});
  }
  static void remove(const std::byte* base) noexcept {
    auto& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.live.erase(std::remove_if(s.live.begin(), s.live.end(), [&](const entry& e) { return e.base == base; }),
                 s.live.end());
  }
  /// The region of `[p, p + bytes)` when it lies wholly in one live buffer
  /// (`bytes` > 0), else none.
  static shared_region find(const void* p, std::size_t bytes) noexcept {
    if (!p || bytes == 0) return {};
    auto& s = state();
    const auto* b = static_cast<const std::byte*>(p);
    std::lock_guard<std::mutex> lock(s.mutex);
    for (const entry& e : s.live)
      if (b >= e.base && bytes <= e.region.length && static_cast<std::size_t>(b - e.base) <= e.region.length - bytes) {
        shared_region r = e.region;
        r.offset = static_cast<std::uint64_t>(b - e.base);
        return r;
      }
    return {};
  }
  static std::uint64_t next_serial() noexcept {
    auto& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return ++s.serial;
  }

 private:
  struct entry {
    const std::byte* base;
    shared_region region;
  };
  struct registry_state {
    std::mutex mutex;
    std::vector<entry> live;
    std::uint64_t serial = 0;
  };
  static registry_state& state() {
    static registry_state s;  // one per process (an inline function's static)
    return s;
  }
};

/// `bytes` (> 0) of zeroed memory in a new shared-memory file, registered;
/// ordinary memory (`region` none) where no such file can be made.
inline std::byte* shared_allocate(std::size_t bytes, shared_region& region) {
  region = shared_region{};
#if defined(__linux__)
  const int fd = ::memfd_create("ddl-buffer", MFD_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 && ::fstat(fd, &st) == 0) {
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      auto* at = static_cast<std::byte*>(m);
      region.fd = fd;
      region.dev = static_cast<std::uint64_t>(st.st_dev);
      region.ino = static_cast<std::uint64_t>(st.st_ino);
      region.serial = shared_registry::next_serial();
      region.length = bytes;
      try {
        shared_registry::add(at, region);
      } catch (...) {
        ::munmap(m, bytes);
        ::close(fd);
        throw;
      }
      return at;
    }
  }
  if (fd >= 0) ::close(fd);
#endif
  auto* at = static_cast<std::byte*>(::operator new(bytes));  // ordinary memory: peers copy through stages
  std::memset(at, 0, bytes);
  return at;
}

/// Frees what `shared_allocate` returned (`bytes`, `region` as it said).
inline void shared_release(std::byte* at, std::size_t bytes, const shared_region& region) noexcept {
  if (!at) return;
#if defined(__linux__)
  if (region) {
    shared_registry::remove(at);
    ::munmap(at, bytes);
    ::close(region.fd);
    return;
  }
#endif
  (void)bytes;
  ::operator delete(at);
}

}  // namespace detail

/// Host memory that MPI ranks of one machine read from each other in place
/// (see the file comment). Movable, not copyable; the memory starts zeroed.
/// Allocate once and reuse: its first write to each page is slow, as for
/// any fresh memory.
/// \param bytes its size; 0 holds nothing.
class shared_buffer {
 public:
  shared_buffer() = default;
  /// `bytes` of zeroed shared memory (none for 0).
  explicit shared_buffer(std::size_t bytes) : size_(bytes) {
    if (bytes > 0) data_ = detail::shared_allocate(bytes, region_);
  }
  /// Takes `o`'s memory; `o` then holds none.
  shared_buffer(shared_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
        region_(std::exchange(o.region_, detail::shared_region{})) {}
  /// Releases this buffer's memory and takes `o`'s.
  shared_buffer& operator=(shared_buffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      region_ = std::exchange(o.region_, detail::shared_region{});
    }
    return *this;
  }
  shared_buffer(const shared_buffer&) = delete;
  shared_buffer& operator=(const shared_buffer&) = delete;
  ~shared_buffer() { release(); }

  /// The first byte (null when empty).
  std::byte* data() noexcept { return data_; }
  /// The first byte (null when empty).
  const std::byte* data() const noexcept { return data_; }
  /// Bytes.
  std::size_t size() const noexcept { return size_; }
  /// The memory as elements of `T` (`size() / sizeof(T)` of them).
  template <class T>
  T* as() noexcept {
    return reinterpret_cast<T*>(data_);
  }
  /// Whether peers can map it (false: ordinary memory, see the file comment).
  bool shared() const noexcept { return static_cast<bool>(region_); }

 private:
  void release() noexcept {
    detail::shared_release(data_, size_, region_);
    data_ = nullptr;
    region_ = detail::shared_region{};
  }
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  detail::shared_region region_;
};

/// A standard allocator whose every allocation is a shared buffer (see
/// `shared_buffer`): `std::vector<float, ddl::shared_allocator<float>>`
/// holds gradients that MPI peers of one machine read in place. Each
/// allocation is its own file and mapping (whole pages), so it suits a few
/// large, long-lived containers, not many small ones. Stateless: any two
/// compare equal.
template <class T>
struct shared_allocator {
  using value_type = T;  ///< what it allocates
  shared_allocator() noexcept = default;
  /// From an allocator of another type (stateless: nothing to copy).
  template <class U>
  shared_allocator(const shared_allocator<U>&) noexcept {}
  /// `n` elements of shared memory (a file and mapping of their own).
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    detail::shared_region r;
    return reinterpret_cast<T*>(detail::shared_allocate(n == 0 ? 1 : n * sizeof(T), r));
  }
  /// Releases what `allocate(n)` returned at `p`.
  void deallocate(T* p, std::size_t n) noexcept {
    const auto* at = reinterpret_cast<const std::byte*>(p);
    const detail::shared_region r = detail::shared_registry::find(at, 1);  // none: ordinary memory
    detail::shared_release(reinterpret_cast<std::byte*>(p), n == 0 ? 1 : n * sizeof(T), r);
  }
  /// Always equal (stateless).
  template <class U>
  bool operator==(const shared_allocator<U>&) const noexcept { return true; }
  /// Never unequal.
  template <class U>
  bool operator!=(const shared_allocator<U>&) const noexcept { return false; }
};

}  // namespace ddl
