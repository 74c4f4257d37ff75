#pragma once
// A "device" for the staging pipeline on the CPU (`staged_transport`'s
// Device): its memory is host memory, and its copies and reductions run
// late, in stream order, one per poll, so every ordering mistake in the
// pipeline shows as wrong data. Counts its copies, slots and pins.
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <ddl/core/buffer.hpp>
#include <ddl/core/memory.hpp>
#include <ddl/reduce/host.hpp>
#include <ddl/core/error.hpp>
#include <ddl/staged/device_region.hpp>

namespace ddl_test {

// Views of host memory that say they are device memory (for the fake device).
inline const ddl::location on_device{ddl::memory_space::cuda, 0, nullptr};

template <bool Direct = false>
class slow_device {
 public:
  static constexpr bool direct = Direct;
  struct event {
    std::uint64_t seq = 0;
  };

  std::byte* allocate_slot(std::size_t n) {
    ++slots_alive;
    auto* p = new std::byte[n];
    std::memset(p, 0x5A, n);
    return p;
  }
  void release_slot(std::byte* p, std::size_t) {
    --slots_alive;
    delete[] p;
  }
  event copy(std::byte* dst, const std::byte* src, std::size_t n) {
    ++copies;
    return queue([=] {
      if (n) std::memmove(dst, src, n);  // an empty message's buffers may be null
    });
  }
  // The bounce buffer's page-locking: counted, so tests see it balanced.
  bool pin(std::byte*, std::size_t) {
    ++pins;
    ++pinned;
    return true;
  }
  void unpin(std::byte*) { --pinned; }
  event reduce(std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, ddl::reduction r) {
    return queue([=] { ddl::host::reduce(dst, a, b, count, r); });
  }
  event mark() { return queue([] {}); }
  // One queued operation completes per poll, in order: a slow, in-order stream.
  bool ready(event& e) {
    if (done_ < e.seq && !work_.empty()) {
      work_.front()();
      work_.pop_front();
      ++done_;
    }
    return done_ >= e.seq;
  }
  // Local operations join the same stream: everything queued runs first.
  // Named for the memory the call says it is in, as a real device's are.
  ddl::memory_ops memory(const ddl::location& where) {
    ddl::memory_ops m = ddl::host_memory_ops();
    m.name = where.space == ddl::memory_space::host ? "host" : "fake device";
    m.ctx = this;
    m.copy = [](void* c, std::byte* d, const std::byte* s, std::size_t n) {
      static_cast<slow_device*>(c)->flush();
      if (n) std::memmove(d, s, n);
    };
    m.reduce = [](void* c, std::byte* d, const std::byte* a, const std::byte* b, std::size_t n, ddl::reduction r) {
      static_cast<slow_device*>(c)->flush();
      ddl::host::reduce(d, a, b, n, r);
    };
    m.reduce_many = [](void* c, std::byte* d, const std::byte* const* src, int k, std::size_t n, ddl::reduction r) {
      static_cast<slow_device*>(c)->flush();
      ddl::host::reduce_many(d, reinterpret_cast<const void* const*>(src), k, n, r);
    };
    m.finalize = [](void* c, std::byte* p, std::size_t n, ddl::reduction r, int ranks) {
      static_cast<slow_device*>(c)->flush();
      ddl::host::finalize(p, n, r, ranks);
    };
    return m;
  }
  void flush() {
    while (!work_.empty()) {
      work_.front()();
      work_.pop_front();
      ++done_;
    }
  }
  int slots_alive = 0;
  int copies = 0, pins = 0, pinned = 0;

 private:
  event queue(std::function<void()> f) {
    work_.push_back(std::move(f));
    return {++queued_};
  }
  std::deque<std::function<void()>> work_;
  std::uint64_t queued_ = 0, done_ = 0;
};

// The slow device that also shares its memory with its peers, as CUDA IPC
// between processes does (`staged/device_region.hpp`: `Device::share`, `open`,
// `probe`). Its "device allocations" are the ones it made (`allocate`:
// anonymous shared-memory files, which a peer process opens through
// /proc/<pid>/fd and maps, as the stages are) or was handed (`adopt`); with
// `share_all`, any other memory is shared too, as an allocation of its own
// per message (ranks that are threads of one process only). `allocate_pool`
// makes device memory it will not share, as a `cudaMallocAsync` pool's.
// Counts what it shared and opened, and the allocations `share` accepts
// that `staged/near.hpp` asked for (`scratch_allocs`); refuses to open the
// peers listed in `refuse` (a device that cannot map them).
class sharing_device : public slow_device<false> {
 public:
  std::byte* allocate(std::size_t n) {
    const std::size_t size = n ? n : 1;
    int fd = -1;
    void* p = nullptr;
#if defined(__linux__)
    fd = ::memfd_create("ddl-test-device", MFD_CLOEXEC);
    if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(size)) == 0)
      p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) p = nullptr;
#endif
    if (!p) {
      if (fd >= 0) ::close(fd);
      fd = -1;
      p = new std::byte[size];
    }
    auto* b = static_cast<std::byte*>(p);
    allocs_.push_back({b, size, ++next_id_, fd});
    return b;
  }
  void release(std::byte* p) {
    for (auto it = allocs_.begin(); it != allocs_.end(); ++it)
      if (it->base == p) {
        if (shared_ids_.count(it->id)) freed_.push_back({it->base, it->size});
        free_alloc(*it);
        allocs_.erase(it);
        return;
      }
  }
  void adopt(std::byte* p, std::size_t n) { allocs_.push_back({p, n, ++next_id_, -2}); }
  // Device memory `share` refuses (a pool's); freed with the device.
  std::byte* allocate_pool(std::size_t n) {
    pool_.emplace_back(n ? n : 1);
    return pool_.back().data();
  }
  bool on_device(const std::byte* p) const {
    for (const auto& a : allocs_)
      if (p >= a.base && p < a.base + a.size) return true;
    for (const auto& b : pool_)
      if (p >= b.data() && p < b.data() + b.size()) return true;
    return false;
  }
  std::byte* allocate_shared(std::size_t n) {
    ++scratch_allocs;
    return allocate(n);
  }
  void release_shared(std::byte* p, std::size_t) { release(p); }
  // Workspace comes from the device's allocations, as `cudaMalloc`'s does.
  ddl::memory_ops memory(const ddl::location& where) {
    ddl::memory_ops m = slow_device<false>::memory(where);
    m.allocate = [](void* c, std::size_t n) { return self(c)->allocate(n); };
    m.release = [](void* c, std::byte* p, std::size_t) { self(c)->release(p); };
    return m;
  }
  ~sharing_device() {
    for (auto& a : allocs_) free_alloc(a);
    for (auto& o : opened_)
      if (o.second.mapped) ::munmap(const_cast<std::byte*>(o.second.base), o.second.size);
  }

  bool share(const std::byte* p, std::size_t n, ddl::device_region& r) {
    for (const auto& a : allocs_)
      if (p >= a.base && p + n <= a.base + a.size) {
        r = region(a);
        r.offset = static_cast<std::uint64_t>(p - a.base);
        if (shared_ids_.insert(a.id).second) ++shares;
        return true;
      }
    for (const auto& f : freed_)  // as cuda/ipc.hpp: a buffer in a shared allocation freed since
      if (p >= f.first && p < f.first + f.second)
        throw ddl::invalid_argument("a buffer lies in a device allocation freed since it was shared (test)");
    if (!share_all) return false;
    r = region({const_cast<std::byte*>(p), n, ++next_id_, -2});
    return true;
  }
  const std::byte* open(int peer, const ddl::device_region& r) {
    for (int q : refuse)
      if (q == peer) throw ddl::transport_error("no peer access to rank " + std::to_string(peer) + " (test)");
    const auto key = std::make_pair(peer, r.id);
    auto it = opened_.find(key);
    if (it != opened_.end()) return it->second.base;
    handle h;
    std::memcpy(&h, r.handle, sizeof h);
    mapping m{h.base, r.size, false};
    if (h.pid != static_cast<std::int64_t>(::getpid())) {  // another process: open its file
#if defined(__linux__)
      if (h.fd < 0) throw ddl::transport_error("rank " + std::to_string(peer) + "'s memory is no shared file");
      const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw ddl::transport_error("cannot open " + path + ": " + std::strerror(errno));
      void* p = ::mmap(nullptr, r.size, PROT_READ, MAP_SHARED, fd, 0);
      ::close(fd);
      if (p == MAP_FAILED) throw ddl::transport_error("cannot map " + path);
      m = mapping{static_cast<const std::byte*>(p), r.size, true};
#else
      throw ddl::transport_error("no shared files here");
#endif
    }
    ++opens;
    opened_.emplace(key, m);
    return m.base;
  }
  ddl::device_region probe() {
    if (!probe_) probe_ = allocate(64);
    ddl::device_region r;
    share(probe_, 64, r);
    return r;
  }

  bool share_all = false;
  std::vector<int> refuse;
  int shares = 0, opens = 0, scratch_allocs = 0;

 private:
  struct alloc {
    std::byte* base;
    std::size_t size;
    std::uint64_t id;
    int fd;  // its shared file; -1: allocated with new[]; -2: adopted (not ours)
  };
  struct handle {
    const std::byte* base;
    std::int64_t pid;
    std::int32_t fd;
  };
  struct mapping {
    const std::byte* base;
    std::size_t size;
    bool mapped;
  };
  static sharing_device* self(void* c) { return static_cast<sharing_device*>(static_cast<slow_device<false>*>(c)); }
  static ddl::device_region region(const alloc& a) {
    ddl::device_region r;
    r.id = a.id;
    r.size = a.size;
    const handle h{a.base, static_cast<std::int64_t>(::getpid()), a.fd};
    std::memcpy(r.handle, &h, sizeof h);
    return r;
  }
  static void free_alloc(alloc& a) {
    if (a.fd >= 0) {
      ::munmap(a.base, a.size);
      ::close(a.fd);
    } else if (a.fd == -1) {
      delete[] a.base;
    }
  }
  std::vector<alloc> allocs_;
  std::deque<std::vector<std::byte>> pool_;  // never moved: a deque keeps its elements in place
  std::set<std::uint64_t> shared_ids_;
  std::vector<std::pair<const std::byte*, std::size_t>> freed_;  // shared allocations released
  std::map<std::pair<int, std::uint64_t>, mapping> opened_;
  std::byte* probe_ = nullptr;
  static inline std::atomic<std::uint64_t> next_id_{0};  // unique across the ranks' devices of a process
};

}  // namespace ddl_test
