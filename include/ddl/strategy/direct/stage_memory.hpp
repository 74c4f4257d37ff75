#pragma once
/// \file
/// one_shot's own stage for ranks of one process (`stage_memory`).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"

namespace ddl {
namespace detail {


/// one_shot's stage (host memory, ranks of one process): two slots, used by
/// a rank's staged calls in turn, each behind a counter its peers bump when
/// they have read it. Allocated once and grown when a larger call comes. The
/// stage outlives a rank's last call until every peer has read that call's
/// slot (the destructor waits for the count, microseconds in a healthy
/// group: a rank's peers may still be reducing when it returns; at most 5 s,
/// 1 s for a stage set aside after an error, then it is left allocated
/// rather than freed under a reader). A stage that may still be read after
/// an error is never written again: it is set aside and released the same
/// way. A copy of the strategy starts without a stage.
class stage_memory {
 public:
  using counter = std::atomic<std::uint64_t>;
  stage_memory() = default;
  stage_memory(const stage_memory&) noexcept {}
  stage_memory& operator=(const stage_memory& o) noexcept {
    if (this != &o) release_all();
    return *this;
  }
  ~stage_memory() { release_all(); }

  /// Whether slots of `bytes` are there.
  bool fits(std::size_t bytes) const noexcept { return cur_.base && cur_.slot >= bytes; }
  std::byte* slot(std::size_t i) const noexcept { return cur_.base + 2 * header + i * cur_.slot; }
  counter* done(std::size_t i) const noexcept { return reinterpret_cast<counter*>(cur_.base + i * header); }

  /// Slots of at least `bytes`: as they are if they hold it, else new ones,
  /// twice the old size up to `cap` (so a sweep of sizes allocates a few
  /// times, not once per size). The old stage is kept until `reads_over`
  /// (its last slot may be read until every peer has entered the next call).
  void reserve(std::size_t bytes, std::size_t cap) {
    if (fits(bytes)) return;
    const std::size_t grown = std::min(cap, std::max<std::size_t>(2048, 2 * cur_.slot));
    replace(std::max((bytes + 63) / 64 * 64, grown));
  }

 private:
  void replace(std::size_t bytes) {
    piece fresh;
    fresh.base = static_cast<std::byte*>(::operator new(2 * header + 2 * bytes, std::align_val_t{header}));
    fresh.slot = bytes;
    for (std::size_t i = 0; i < 2; ++i) new (fresh.base + i * header) counter(0);
    if (cur_.base) retired_.push_back(cur_);
    cur_ = fresh;
  }

 public:
  /// The peers have all entered a later call: every read of an earlier one
  /// is over (and the stage `replace` set aside may go).
  void reads_over() noexcept {
    cur_.expect = 0;
    for (piece& x : retired_)
      if (!x.failed) x.expect = 0;
    release_retired(false);
  }
  /// A staged call: `peers` peers read slot `i` and then count once each.
  void expect_reads(std::size_t i, std::uint64_t peers) noexcept {
    cur_.last = i;
    cur_.expect = peers;
  }
  /// A call failed: a peer may still read the stage, so it is set aside.
  void retire() noexcept {
    if (!cur_.base) return;
    cur_.failed = true;
    try {
      retired_.push_back(cur_);
    } catch (...) {  // no room to remember it: leaked rather than reused
    }
    cur_ = piece{};
  }

 private:
  static constexpr std::size_t header = 64;  // a counter per slot, a cache line each
  struct piece {
    std::byte* base = nullptr;
    std::size_t slot = 0;
    std::size_t last = 0;      // the slot the last staged call used
    std::uint64_t expect = 0;  // reads of it still to count (0: none pending)
    bool failed = false;       // set aside after an error: its reads may never come
  };
  // Frees `x` once its pending reads are counted; waits at most `patience`
  // seconds, then leaves it allocated (a peer that never read it may still).
  static bool release(piece& x, double patience) noexcept {
    if (!x.base) return true;
    if (x.expect > 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(patience);
      auto* c = reinterpret_cast<counter*>(x.base + x.last * header);
      while (c->load(std::memory_order_acquire) < x.expect) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::yield();
      }
    }
    ::operator delete(x.base, std::align_val_t{header});
    x.base = nullptr;
    return true;
  }
  void release_retired(bool all) noexcept {
    std::size_t w = 0;
    for (std::size_t i = 0; i < retired_.size(); ++i) {
      piece& x = retired_[i];
      const bool freed = (all || (!x.failed && x.expect == 0)) && release(x, x.failed ? 1.0 : 5.0);
      if (!freed) retired_[w++] = x;
    }
    retired_.resize(w);
  }
  void release_all() noexcept {
    release(cur_, 5.0);
    cur_ = piece{};
    release_retired(true);
    retired_.clear();  // what could not be freed in time is left allocated
  }
  piece cur_;
  std::vector<piece> retired_;
};


}  // namespace detail
}  // namespace ddl
