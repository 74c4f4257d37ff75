#pragma once
// A "device" for the staging pipeline on the CPU (`staged_transport`'s
// Device): its memory is host memory, and its copies and reductions run
// late, in stream order, one per poll, so every ordering mistake in the
// pipeline shows as wrong data. Counts its copies, slots and pins.
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>

#include <ddl/core/buffer.hpp>
#include <ddl/core/memory.hpp>
#include <ddl/reduce/host.hpp>

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
    return queue([=] { std::memmove(dst, src, n); });
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
  ddl::memory_ops memory(const ddl::location&) {
    ddl::memory_ops m = ddl::host_memory_ops();
    m.ctx = this;
    m.copy = [](void* c, std::byte* d, const std::byte* s, std::size_t n) {
      static_cast<slow_device*>(c)->flush();
      std::memmove(d, s, n);
    };
    m.reduce = [](void* c, std::byte* d, const std::byte* a, const std::byte* b, std::size_t n, ddl::reduction r) {
      static_cast<slow_device*>(c)->flush();
      ddl::host::reduce(d, a, b, n, r);
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

}  // namespace ddl_test
