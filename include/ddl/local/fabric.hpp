#pragma once
/// \file
/// `local_fabric`: the shared state of a `local_transport` group (threads of
/// one process): the pairs' mailboxes, the ranks' receive tables, doorbells
/// and stages, and how a wait gives up (abort, deadline). Then the
/// transport's members over stages and waits; messages are in
/// `local/messages.hpp`.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

#include "ddl/core/error.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/reduce/host.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/request.hpp"
#include "ddl/transport/threads.hpp"

// A test may define DDL_LOCAL_TEST_HOOK(point, arg) before including ddl to
// run code of its own at named points of the mailbox (test_interleave.cpp
// forces the orders that load alone finds rarely); otherwise nothing.
#ifdef DDL_LOCAL_TEST_HOOK
#define DDL_LOCAL_TEST_POINT(point, arg) DDL_LOCAL_TEST_HOOK(#point, arg)
#else
#define DDL_LOCAL_TEST_POINT(point, arg) ((void)0)
#endif
#include "ddl/local/transport.hpp"

namespace ddl {


/// The shared state of `size` in-process ranks: mailboxes, receive tables
/// and doorbells. Create one per group of threads; hand each thread
/// `transport(rank)`, or let `run` do it.
class local_fabric {
 public:
  explicit local_fabric(int size) : size_(size) {
    if (size < 1) throw invalid_argument("local_fabric needs at least one rank, got " + std::to_string(size));
    channels_.reset(new std::atomic<channel*>[static_cast<std::size_t>(size) * size]);
    for (std::size_t i = 0; i < static_cast<std::size_t>(size) * size; ++i) channels_[i].store(nullptr);
    ranks_.reset(new rank_state[static_cast<std::size_t>(size)]);
    timed_out_at_.reset(new std::atomic<double>[static_cast<std::size_t>(size)]);
    for (int r = 0; r < size; ++r) timed_out_at_[r].store(-1e300);
    stages_.reset(new std::atomic<std::byte*>[static_cast<std::size_t>(size)]);
    for (int r = 0; r < size; ++r) stages_[r].store(nullptr);
    crowded_ = size > process_cores();
  }

  /// Rank `r` timed out: records when, waits `grace` for the others'
  /// timeouts, and returns the ranks that reported none since `grace` before
  /// its own (`timeout_error::silent`).
  std::vector<int> report_timeout(int r, double grace) {
    const double at = detail::steady_seconds();
    timed_out_at_[r].store(at, std::memory_order_release);
    std::this_thread::sleep_for(std::chrono::duration<double>(grace));
    return detail::silent_ranks([&](int q) { return timed_out_at_[q].load(std::memory_order_acquire); }, size_, r,
                                at, grace);
  }
  ~local_fabric() {
    for (std::size_t i = 0; i < static_cast<std::size_t>(size_) * size_; ++i) delete channels_[i].load();
    for (int r = 0; r < size_; ++r) std::free(stages_[r].load());
  }
  local_fabric(const local_fabric&) = delete;
  local_fabric& operator=(const local_fabric&) = delete;

  int size() const noexcept { return size_; }

  /// Handle of rank `r`.
  local_transport transport(int r) {
    if (r < 0 || r >= size_)
      throw invalid_argument("rank " + std::to_string(r) + " out of range [0, " + std::to_string(size_) + ")");
    return local_transport(this, r);
  }

  /// Marks the fabric failed: every rank's pending and future waits throw
  /// `transport_error` naming `rank` and `why`. `run` calls it when a rank throws,
  /// so the others fail fast instead of waiting for their deadline.
  void abort(int rank, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(abort_mutex_);
      if (aborted_.load()) return;
      abort_reason_ = "rank " + std::to_string(rank) + " failed: " + why;
      aborted_.store(true, std::memory_order_release);
    }
    for (int r = 0; r < size_; ++r) ranks_[r].bell.notify();
    stage_bell_.notify();
  }
  bool aborted() const noexcept { return aborted_.load(std::memory_order_acquire); }

  /// Runs `f(local_transport&)` on `size` threads, one per rank, and joins
  /// them (`detail::run_rank_threads`): the first rank to throw aborts the
  /// fabric, so the others' waits throw "rank k failed: ...", and its own
  /// exception is rethrown here, not the aborts it caused.
  template <class F>
  static void run(int size, F&& f) {
    local_fabric fabric(size);
    fabric.run_on(std::forward<F>(f));
  }

  /// As `run`, on this fabric (reusable across calls).
  template <class F>
  void run_on(F&& f) {
    detail::run_rank_threads(
        size_,
        [&](int r) {
          local_transport t = transport(r);
          f(t);
        },
        [&](int r, const std::string& why) { abort(r, why); });
  }

 private:
  friend class local_transport;
  static constexpr int K = local_transport::max_in_flight;
  // Mailbox slots per (sender, receiver): the sender's own requests (at most
  // K) plus eager messages not yet taken (at most K / 2: a message goes eager
  // only while fewer than K / 2 slots are taken).
  static constexpr int slots_per_channel = K + K / 2;

  // Slot state word: generation << 3 | state. The generation makes a stale
  // compare-and-swap fail after the sender cancelled and reposted.
  enum : std::uint64_t { s_free = 0, s_posted = 1, s_claimed = 2, s_done = 3, s_mask = 7 };

  // `t` and `seq` are read by the receiver before it claims the slot, so
  // they are atomics (relaxed: the generation in `state` decides whether
  // what was read still belongs to the message claimed). `data` and `size`
  // are read only after a successful claim.
  // An eager send's bytes live in `inline_data` (`data` points there); the
  // receiver frees the slot instead of marking it done.
  struct send_slot {
    std::atomic<std::uint64_t> state{s_free};
    std::atomic<tag> t{0};
    std::atomic<std::uint64_t> seq{0};
    const std::byte* data = nullptr;
    std::size_t size = 0;
    bool eager = false;
    alignas(8) std::byte inline_data[local_transport::eager_bytes];
  };
  // Sender -> receiver. `published` is the number of messages ever posted,
  // stored after each post: a receiver that reads it first sees every
  // message with a smaller sequence number in the slots, so picking the
  // smallest one below it is FIFO-correct even though the slot scan is not
  // atomic (without it, a scan could pass an empty slot that an older
  // message then fills, and match a newer one first).
  struct alignas(64) channel {
    std::array<send_slot, slots_per_channel> slots;
    std::atomic<std::uint64_t> published{0};
    std::uint64_t next_seq = 0;     // sender only
    std::uint64_t generation = 0;   // sender only
  };
  struct recv_entry {
    bool done = false;
    bool fused = false;
    int peer = -1;  // -1: from any rank (`irecv_any`)
    int from = -1;  // the sender, once matched
    tag t = 0;
    mutable_bytes dst{};
    const_bytes local{};
    reduction red{};
  };
  struct alignas(64) rank_state {
    detail::event_count bell;              // rung when a send to us is posted or ours completes
    std::array<recv_entry, K> recvs{};
    std::array<int, K> order{};            // active receive indices, in posting order
    int active = 0;
    std::array<bool, K> used{};
  };

  channel* channel_of(int src, int dst) const noexcept {
    return channels_[static_cast<std::size_t>(src) * size_ + dst].load(std::memory_order_acquire);
  }
  channel& make_channel(int src, int dst) {
    auto& p = channels_[static_cast<std::size_t>(src) * size_ + dst];
    channel* c = p.load(std::memory_order_acquire);
    if (!c) {  // only `src`'s thread creates its outgoing channels
      c = new channel();
      p.store(c, std::memory_order_release);
    }
    return *c;
  }

  std::string abort_reason() const {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    return abort_reason_;
  }

  // The CPUs this process may run on (its affinity mask), else the machine's.
  static int process_cores() {
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }

  // Rank `r`'s stage, made by whichever rank asks first.
  std::byte* stage_of(int r) {
    auto& p = stages_[static_cast<std::size_t>(r)];
    std::byte* s = p.load(std::memory_order_acquire);
    if (s) return s;
    auto* fresh = static_cast<std::byte*>(std::calloc(1, local_transport::stage_capacity));
    if (!fresh) throw std::bad_alloc();
    // Every page written once now, not by the first small calls that reach
    // it (a first touch costs more than such a call: shared_stages::warm).
    for (std::size_t i = 0; i < local_transport::stage_capacity; i += 4096)
      *static_cast<volatile std::byte*>(fresh + i) = std::byte{0};
    if (p.compare_exchange_strong(s, fresh, std::memory_order_acq_rel)) return fresh;
    std::free(fresh);  // another rank made it first
    return s;
  }

  int size_;
  std::unique_ptr<std::atomic<channel*>[]> channels_;
  std::unique_ptr<rank_state[]> ranks_;
  std::atomic<bool> aborted_{false};
  std::unique_ptr<std::atomic<double>[]> timed_out_at_;  // per rank: its last timeout (steady seconds)
  std::unique_ptr<std::atomic<std::byte*>[]> stages_;    // per rank: its stage (`stage_of`), or null
  bool crowded_ = false;  // more ranks than cores: a wait on a stage yields at once, and sleeps soon (`wait_until`)
  detail::event_count stage_bell_;  // rung when a rank raised a counter in its stage (`stage_raised`)
  mutable std::mutex abort_mutex_;
  std::string abort_reason_;
};

inline int local_transport::size() const noexcept { return fabric_ ? fabric_->size() : 0; }
inline void local_transport::abort(const std::string& why) { fabric_->abort(rank_, why); }

inline std::byte* local_transport::stage(std::size_t bytes) {
  refuse_if_aborted();
  if (bytes > stage_capacity)
    throw invalid_argument("local_transport: a stage holds " + std::to_string(stage_capacity) + " bytes, not " +
                           std::to_string(bytes));
  return fabric_->stage_of(rank_);
}

inline const std::byte* local_transport::peer_stage(int peer, std::size_t bytes) {
  refuse_if_aborted();
  if (peer < 0 || peer >= size())
    throw invalid_argument("local_transport: no rank " + std::to_string(peer) + " of " + std::to_string(size()));
  if (bytes > stage_capacity)
    throw transport_error("local_transport: rank " + std::to_string(peer) + "'s stage holds " +
                          std::to_string(stage_capacity) + " bytes, fewer than the " + std::to_string(bytes) +
                          " asked");
  return fabric_->stage_of(peer);
}

template <class Ready>
void local_transport::wait_until(int peer, Ready&& ready, deadline until, tag awaited) {
  const auto start = std::chrono::steady_clock::now();
  // Ranks that outnumber the cores give theirs up at once: the peer being
  // waited for may need it to raise its counter (spinning first made small
  // calls slower).
  // Then they yield a few times and sleep until a rank raises a counter
  // (`stage_raised`; `detail::backoff::stage_wait`).
  detail::backoff pause = detail::backoff::stage_wait(fabric_->crowded_);
  for (unsigned polls = 0;; ++polls) {
    if (ready()) return;
    // Every 16th poll: a message of `peer`'s in this call under another
    // stamp (it runs another collective, count or plan) is a mismatch, unless
    // `ready()` now holds (the peer raised its counter, then moved on to the
    // same-numbered call of another communicator sharing this fabric).
    if (polls % 16 == 15 && detail::is_stamped(awaited)) {
      const tag theirs = posted_against(peer, awaited);
      if (theirs != 0 && !ready()) throw mismatch_error(detail::stamp_mismatch(rank_, awaited, peer, theirs));
    }
    if (DDL_UNLIKELY(fabric_->aborted())) gave_up(peer);
    const auto now = std::chrono::steady_clock::now();
    if (DDL_UNLIKELY(now >= until)) timed_out(peer, start, now);
    pause(fabric_->stage_bell_, ready, until);
  }
}

inline void local_transport::stage_raised() { fabric_->stage_bell_.notify_waiters(); }

inline void local_transport::gave_up(int peer) const {
  throw transport_error("rank " + std::to_string(rank_) + " gave up waiting for rank " + std::to_string(peer) + ": " +
                        fabric_->abort_reason());
}

inline void local_transport::timed_out(int peer, std::chrono::steady_clock::time_point start,
                                       std::chrono::steady_clock::time_point now) const {
  const double waited = std::chrono::duration<double>(now - start).count();
  std::vector<int> silent = fabric_->report_timeout(rank_, detail::timeout_grace(waited));
  throw timeout_error(peer, "", "", waited, std::move(silent));
}

// A broken group takes no new messages (a later call fails at once, even
// one whose messages could all go eagerly).
inline void local_transport::refuse_if_aborted() const {
  if (DDL_UNLIKELY(fabric_->aborted()))
    throw transport_error("local_transport: the group is broken (" + fabric_->abort_reason() + ")");
}

}  // namespace ddl

// The transport's messages.
#include "ddl/local/messages.hpp"
