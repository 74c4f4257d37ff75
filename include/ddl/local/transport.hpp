#pragma once
/// \file
/// `local_transport`: ranks are threads of one process sharing memory.
///
/// This is the single-node CPU back-end, not a test double. A send posts a
/// descriptor (pointer, size, tag) into a fixed-size mailbox owned by the
/// (sender, receiver) pair; the receiver, when it progresses, copies or
/// reduces straight out of the sender's memory and marks the descriptor
/// done. So a message crosses memory once, and a reduction step reads the
/// peer's slice, reads its own, and writes the result in one pass. Nothing is
/// allocated per message: mailboxes and receive tables are fixed arrays
/// created with the fabric (a pair's mailbox on its first message).
///
/// Messages of at most `eager_bytes` (addresses, barrier tokens) are copied
/// into the mailbox at the send, which then completes at once (while the
/// mailbox is at most half full): a round of
/// small messages to every peer waits for the peers' sends only, not also for
/// each peer to come and take ours.
///
/// Waiting ranks spin briefly, then yield, then sleep on their doorbell, so
/// more ranks than cores still make progress. Every wait has a deadline.
///
/// Each rank also has a stage (the Transport concept's optional stages and
/// `wait_until`), where the direct strategies' small calls meet through
/// counters instead of messages.
///
/// Example:
/// \code
///   ddl::local_fabric::run(4, [](ddl::local_transport& t) {
///     ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
///     std::vector<float> g(1000, 1.0f);
///     comm.all_reduce(ddl::host_view(g), ddl::op::sum);  // every g[i] == 4
///   });
/// \endcode
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

namespace ddl {

class local_fabric;

/// One rank's handle on a `local_fabric`. Use it from one thread at a time.
class local_transport {
 public:
  /// Sends (per peer) and receives a rank may have in flight at once.
  static constexpr int max_in_flight = 32;
  /// Sends of at most this many bytes are copied at once and complete at the
  /// send (their request is returned already complete), while fewer than
  /// half of the `max_in_flight` mailbox slots to that peer are taken.
  static constexpr std::size_t eager_bytes = 32;
  /// Link costs the planner assumes for in-process ranks unless
  /// `DDL_TOPOLOGY` says otherwise: per-flow bandwidth of a fused
  /// receive-and-reduce on these machines, and one hand-off between threads.
  static constexpr double default_bandwidth = 4e9;
  static constexpr double default_latency = 8e-6;
  /// A step that only copies what it receives moves 2 bytes of memory
  /// traffic per byte where the fused receive-and-reduce above moves 3
  /// (`cost::copy_step_factor`), and the direct strategies' reads, priced
  /// beside it, stream at 2.25 B (`cost::direct_read_factor`): fitted to the
  /// medians of 2, 4 and 8 threads, 4 KiB-64 MiB, in place and out
  /// (bench/results/shared-memory.md).
  static constexpr double copy_step_factor = 1.5;
  static constexpr double direct_read_factor = 2.25;
  /// Ranks are threads of one process: a peer's buffer can be read in place
  /// (`ddl::one_shot`, `ddl::two_shot`).
  static constexpr bool peer_memory = true;

  /// What a request refers to (`transport/request.hpp`).
  struct request_fields {
    enum class kind : std::uint8_t { none, send, recv };
    local_transport* owner_ = nullptr;
    kind kind_ = kind::none;
    int peer_ = -1;
    int index_ = -1;
    bool active() const noexcept { return kind_ != kind::none; }
    void withdraw() noexcept {
      if (owner_) owner_->cancel(*this);
    }
  };
  /// A send or receive in flight; move-only, withdrawn if dropped unfinished.
  class request : public detail::request_handle<request_fields> {
   public:
    int peer() const noexcept { return peer_; }

   private:
    friend class local_transport;
  };

  local_transport() = default;

  int rank() const noexcept { return rank_; }
  int size() const noexcept;
  /// This rank gives the group up (the concept's `abort`): every rank's
  /// pending and later waits throw, naming this rank and `why`.
  inline void abort(const std::string& why);

  /// Posts `data` for `peer`. The bytes must stay valid and unchanged until
  /// the request completes.
  inline request isend(int peer, const_bytes data, tag t);
  /// Receives exactly `data.size` bytes from `peer` with tag `t`.
  inline request irecv(int peer, mutable_bytes data, tag t);
  /// Receives from `peer` and stores `local (op) received` (or `received (op)
  /// local` with `r.received_first`) into `dst`, reading the peer's memory
  /// directly. `dst` may equal `local`.
  /// \pre `local` is ready and `dst` unused until the request completes.
  inline request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t);
  /// Receives exactly `data.size` bytes with tag `t` from whichever rank's
  /// message reaches it first (the concept's `irecv_any`); once complete,
  /// the request's `peer()` is the sender. Receives match in posting
  /// order: a message goes to the oldest receive it fits.
  inline request irecv_any(mutable_bytes data, tag t);
  /// Completes `req`, progressing this rank's receives meanwhile.
  /// Throws `timeout_error` after `until`, `transport_error` if the fabric was aborted.
  inline void wait(request& req, deadline until);
  /// Progresses; returns true (and retires `req`) if it has completed.
  inline bool test(request& req);
  /// Sleeps until a peer posts to or takes from this rank (at most 2 ms):
  /// how a caller polling several requests with `test` waits.
  inline void await_progress();

  /// Stages (the Transport concept's optional `stage`, `peer_stage`,
  /// `stages_shared`, `wait_until`): each rank has one of `stage_capacity`
  /// bytes, zeroed, made on its first use (by any rank) and kept for the
  /// fabric's life; it never moves, so a peer's pointer stays good. The
  /// direct strategies synchronise their small calls through counters there
  /// (`detail::direct_base::flagged_round`) instead of trading addresses;
  /// their larger calls read the buffers in place (`peer_memory`).
  static constexpr std::size_t stage_capacity = std::size_t{256} << 10;
  /// This rank's stage; `invalid_argument` past `stage_capacity`.
  inline std::byte* stage(std::size_t bytes);
  /// Rank `peer`'s stage.
  inline const std::byte* peer_stage(int peer, std::size_t bytes);
  bool stages_shared() const noexcept { return true; }
  /// Polls `ready()` (a look at `peer`'s stage) until it returns true:
  /// spins, yields, then sleeps until a rank raises a counter in its stage
  /// (`stage_raised`; 2 ms at most at a time); `timeout_error` naming
  /// `peer` after `until`, `transport_error` once the fabric was aborted,
  /// `mismatch_error` when `peer` posted this rank a message of the call
  /// `awaited` under another stamp (it runs another collective or plan).
  template <class Ready>
  void wait_until(int peer, Ready&& ready, deadline until, tag awaited);
  /// Wakes the ranks asleep in `wait_until` (a counter in this rank's stage
  /// was raised).
  inline void stage_raised();

 private:
  friend class local_fabric;
  local_transport(local_fabric* f, int r) : fabric_(f), rank_(r) {}
  inline bool progress();
  inline request post_recv(int peer, mutable_bytes dst, const_bytes local, reduction red, tag t);
  inline bool take(int entry, int src, bool look_for_stamps);
  inline void refuse_if_aborted() const;
  inline bool complete(const request_fields& req) const;
  inline void check_send_stamp(request_fields& req);
  inline tag posted_against(int peer, tag mine) const;
  // A wait on `peer` ends: the fabric was aborted (`transport_error`), or
  // its deadline passed at `now` (`timeout_error`, the silent ranks found).
  [[noreturn]] inline void gave_up(int peer) const;
  [[noreturn]] inline void timed_out(int peer, std::chrono::steady_clock::time_point start,
                                     std::chrono::steady_clock::time_point now) const;
  inline void retire(request_fields& req) noexcept;
  inline void cancel(request_fields& req) noexcept;

  local_fabric* fabric_ = nullptr;
  int rank_ = -1;
  unsigned send_polls_ = 0;  // `check_send_stamp` looks every 16th poll of a waiting send
};

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

// ---------------------------------------------------------------------------

inline int local_transport::size() const noexcept { return fabric_ ? fabric_->size() : 0; }
inline void local_transport::abort(const std::string& why) { fabric_->abort(rank_, why); }

inline local_transport::request local_transport::isend(int peer, const_bytes data, tag t) {
  if (peer < 0 || peer >= size())
    throw invalid_argument("isend: peer " + std::to_string(peer) + " out of range");
  if (!data.data && data.size) throw invalid_argument("isend: null data with non-zero size");
  refuse_if_aborted();
  auto& ch = fabric_->make_channel(rank_, peer);
  int free_slot = -1, busy = 0, owned = 0;  // owned: slots held by this rank's requests (not eager)
  for (int i = 0; i < local_fabric::slots_per_channel; ++i) {
    if ((ch.slots[i].state.load(std::memory_order_acquire) & local_fabric::s_mask) != local_fabric::s_free) {
      ++busy;
      owned += !ch.slots[i].eager;
    } else if (free_slot < 0) {
      free_slot = i;
    }
  }
  if (free_slot >= 0 && owned < local_fabric::K) {
    const int i = free_slot;
    auto& s = ch.slots[i];
    s.t.store(t, std::memory_order_relaxed);
    s.seq.store(ch.next_seq++, std::memory_order_relaxed);
    // Eager only while the mailbox is at most half full: a sender far ahead
    // of its receiver gets ordinary requests again (complete when taken),
    // so it waits instead of filling the mailbox.
    s.eager = data.size <= eager_bytes && busy < local_fabric::K / 2;
    if (s.eager) {
      if (data.size) std::memcpy(s.inline_data, data.data, data.size);
      s.data = s.inline_data;
    } else {
      s.data = data.data;
    }
    s.size = data.size;
    const std::uint64_t gen = ++ch.generation;
    s.state.store((gen << 3) | local_fabric::s_posted, std::memory_order_release);
    ch.published.store(ch.next_seq, std::memory_order_release);
    fabric_->ranks_[peer].bell.notify();
    request r;
    if (s.eager) return r;  // complete already: the receiver frees the slot
    r.owner_ = this;
    r.kind_ = request_fields::kind::send;
    r.peer_ = peer;
    r.index_ = i;
    return r;
  }
  throw transport_error("isend: more than " + std::to_string(local_fabric::K) +
                        " sends in flight from rank " + std::to_string(rank_) + " to rank " +
                        std::to_string(peer));
}

inline local_transport::request local_transport::irecv(int peer, mutable_bytes data, tag t) {
  return irecv_reduce(peer, data, const_bytes{}, reduction{}, t);
}

inline local_transport::request local_transport::irecv_reduce(int peer, mutable_bytes dst, const_bytes local,
                                                               reduction red, tag t) {
  if (peer < 0 || peer >= size())
    throw invalid_argument("irecv: peer " + std::to_string(peer) + " out of range");
  return post_recv(peer, dst, local, red, t);
}

inline local_transport::request local_transport::irecv_any(mutable_bytes data, tag t) {
  return post_recv(-1, data, const_bytes{}, reduction{}, t);
}

inline local_transport::request local_transport::post_recv(int peer, mutable_bytes dst, const_bytes local,
                                                           reduction red, tag t) {
  if (!dst.data && dst.size) throw invalid_argument("irecv: null buffer with non-zero size");
  refuse_if_aborted();
  auto& me = fabric_->ranks_[rank_];
  for (int i = 0; i < local_fabric::K; ++i) {
    if (me.used[i]) continue;
    me.used[i] = true;
    auto& e = me.recvs[i];
    e.done = false;
    e.fused = local.data != nullptr;
    e.peer = peer;
    e.from = -1;
    e.t = t;
    e.dst = dst;
    e.local = local;
    e.red = red;
    me.order[me.active++] = i;
    request r;
    r.owner_ = this;
    r.kind_ = request_fields::kind::recv;
    r.peer_ = peer;
    r.index_ = i;
    return r;
  }
  throw transport_error("irecv: more than " + std::to_string(local_fabric::K) +
                        " receives in flight on rank " + std::to_string(rank_));
}

// Pulls every posted receive that has a matching send. Receives from one peer
// with one tag match sends in posting order (as MPI's non-overtaking rule);
// a receive from any rank (`irecv_any`) takes its place in that order: it
// looks at the senders no older pending receive under its tag waits on (so
// an older receive from rank p, or from any rank, gets p's message first),
// from the rank after this one round, and takes the oldest message it finds.
inline bool local_transport::progress() {
  auto& me = fabric_->ranks_[rank_];
  bool any = false;
  for (int k = 0; k < me.active; ++k) {
    auto& e = me.recvs[me.order[k]];
    if (e.done) continue;
    // An older pending receive under the same tag that would take a message of `src`.
    const auto earlier_takes = [&](int src) {
      for (int j = 0; j < k; ++j) {
        const auto& o = me.recvs[me.order[j]];
        if (!o.done && o.t == e.t && (o.peer == src || o.peer < 0)) return true;
      }
      return false;
    };
    if (e.peer >= 0) {
      if (!earlier_takes(e.peer) && take(me.order[k], e.peer, true)) any = true;
      continue;
    }
    const int n = size();
    for (int d = 1; d <= n && !e.done; ++d) {
      const int src = (rank_ + d) % n;
      if (!earlier_takes(src) && take(me.order[k], src, false)) any = true;
    }
  }
  return any;
}

// Receive `entry` takes the oldest message of `src` under its tag, if one is
// posted: true when it did (the entry is done). `look_for_stamps`: the awaited
// peer's message of this very call under another stamp, and none that
// matches, is a mismatch (a receive from any rank awaits no one peer).
inline bool local_transport::take(int entry, int src, bool look_for_stamps) {
  auto& e = fabric_->ranks_[rank_].recvs[entry];
  local_fabric::channel* ch = fabric_->channel_of(src, rank_);
  if (!ch) return false;
  for (;;) {
    int best = -1;
    std::uint64_t best_word = 0, best_seq = 0;
    tag other = 0;  // a message of this call under another stamp, if no match is found
    const std::uint64_t published = ch->published.load(std::memory_order_acquire);
    for (int i = 0; i < local_fabric::slots_per_channel; ++i) {
      DDL_LOCAL_TEST_POINT(scan_slot, i);
      const std::uint64_t w = ch->slots[i].state.load(std::memory_order_acquire);
      if ((w & local_fabric::s_mask) != local_fabric::s_posted) continue;
      const tag st = ch->slots[i].t.load(std::memory_order_relaxed);
      const std::uint64_t seq = ch->slots[i].seq.load(std::memory_order_relaxed);
      if (seq >= published) continue;  // newer than the snapshot: an older one may not be visible yet
      if (st != e.t) {
        if (DDL_UNLIKELY(look_for_stamps && detail::stamps_disagree(e.t, st)) &&
            ch->slots[i].state.load(std::memory_order_acquire) == w)  // still that message
          other = st;
        continue;
      }
      if (best < 0 || seq < best_seq) {
        best = i;
        best_word = w;
        best_seq = seq;
      }
    }
    // The awaited peer's message of this very call under another stamp,
    // and none that matches: the ranks called different collectives
    // (transport/stamp.hpp). Not a false alarm when communicators share
    // this transport: a peer already in the same-numbered call of another
    // communicator has finished this one, so everything this call awaits
    // from it is here (and matched first). Only the awaited peer's
    // messages are looked at: any other rank's could be such a newer call
    // while the awaited one is late.
    if (DDL_UNLIKELY(best < 0 && other != 0)) throw mismatch_error(detail::stamp_mismatch(rank_, e.t, src, other));
    if (best < 0) return false;
    auto& s = ch->slots[best];
    DDL_LOCAL_TEST_POINT(before_claim, best);
    std::uint64_t expect = best_word;
    const std::uint64_t claimed = (best_word & ~local_fabric::s_mask) | local_fabric::s_claimed;
    if (!s.state.compare_exchange_strong(expect, claimed, std::memory_order_acq_rel)) continue;
    const bool size_ok = s.size == e.dst.size;
    if (size_ok && e.dst.size) {
      if (e.fused && e.red.received_first)
        host::reduce(e.dst.data, s.data, e.local.data, e.dst.size / size_of(e.red.type), e.red);
      else if (e.fused)
        host::reduce(e.dst.data, e.local.data, s.data, e.dst.size / size_of(e.red.type), e.red);
      else
        host::copy(e.dst.data, s.data, e.dst.size);
    }
    const std::size_t sent = s.size;
    s.state.store((best_word & ~local_fabric::s_mask) | (s.eager ? local_fabric::s_free : local_fabric::s_done),
                  std::memory_order_release);
    fabric_->ranks_[src].bell.notify();
    e.done = true;
    e.from = src;
    if (!size_ok) throw transport_error(detail::size_mismatch("local_transport", src, sent, rank_, e.dst.size, e.t));
    return true;
  }
}

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
  // waited for may need it to raise its counter (4 threads on 2 cores, 8 B:
  // 5.0 us a call against 6.6 spinning first; 8 threads 11 against 16).
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

inline bool local_transport::complete(const request_fields& req) const {
  if (req.kind_ == request_fields::kind::recv) return fabric_->ranks_[rank_].recvs[req.index_].done;
  const auto* ch = fabric_->channel_of(rank_, req.peer_);
  return (ch->slots[req.index_].state.load(std::memory_order_acquire) & local_fabric::s_mask) ==
         local_fabric::s_done;
}

// A send still untaken while its peer has posted this rank a message of the
// same call under another stamp (`transport/stamp.hpp`): the two called
// different collectives, e.g. a broadcast with different roots, where each
// sends down its own tree to a rank that does not receive from it. Only the
// send's own peer is looked at, and the send is looked at again before the
// throw: a peer already in the same-numbered call of another communicator
// has finished this one, and so taken this send. Every 16th poll of a
// waiting send, as MPI's `look_around`, so the scan stays off the hot path.
inline void local_transport::check_send_stamp(request_fields& req) {
  if (req.kind_ != request_fields::kind::send || ++send_polls_ % 16 != 0) return;
  const tag mine = fabric_->channel_of(rank_, req.peer_)->slots[req.index_].t.load(std::memory_order_relaxed);
  if (!detail::is_stamped(mine)) return;
  const tag theirs = posted_against(req.peer_, mine);
  if (theirs == 0 || complete(req)) return;  // none, or taken after all
  const int peer = req.peer_;
  cancel(req);
  throw mismatch_error(detail::stamp_mismatch(rank_, mine, peer, theirs));
}

// The tag of a message `peer` posted this rank in the call of `mine` under
// another stamp, or 0 if there is none.
inline tag local_transport::posted_against(int peer, tag mine) const {
  const local_fabric::channel* in = fabric_->channel_of(peer, rank_);
  if (!in) return 0;
  for (int i = 0; i < local_fabric::slots_per_channel; ++i) {
    const std::uint64_t w = in->slots[i].state.load(std::memory_order_acquire);
    if ((w & local_fabric::s_mask) != local_fabric::s_posted) continue;
    const tag theirs = in->slots[i].t.load(std::memory_order_relaxed);
    if (detail::stamps_disagree(mine, theirs) && in->slots[i].state.load(std::memory_order_acquire) == w)
      return theirs;  // still that message
  }
  return 0;
}

inline void local_transport::retire(request_fields& req) noexcept {
  if (req.kind_ == request_fields::kind::recv) {
    auto& me = fabric_->ranks_[rank_];
    me.used[req.index_] = false;
    if (me.recvs[req.index_].done) req.peer_ = me.recvs[req.index_].from;  // `irecv_any`'s sender
    int w = 0;
    for (int k = 0; k < me.active; ++k)
      if (me.order[k] != req.index_) me.order[w++] = me.order[k];
    me.active = w;
  } else if (req.kind_ == request_fields::kind::send) {
    auto& s = fabric_->channel_of(rank_, req.peer_)->slots[req.index_];
    const std::uint64_t w = s.state.load(std::memory_order_acquire);
    s.state.store(w & ~local_fabric::s_mask, std::memory_order_release);  // free, same generation
  }
  req.kind_ = request_fields::kind::none;
}

// Withdraws an incomplete request. A posted send is taken back unless the
// receiver has claimed it, in which case the copy in progress is awaited (it
// is bounded), so no one reads the caller's memory after this returns.
inline void local_transport::cancel(request_fields& req) noexcept {
  if (req.kind_ == request_fields::kind::send) {
    auto& s = fabric_->channel_of(rank_, req.peer_)->slots[req.index_];
    for (;;) {
      std::uint64_t w = s.state.load(std::memory_order_acquire);
      const auto st = w & local_fabric::s_mask;
      if (st == local_fabric::s_posted) {
        if (s.state.compare_exchange_strong(w, w & ~local_fabric::s_mask, std::memory_order_acq_rel)) break;
        continue;
      }
      if (st == local_fabric::s_claimed) {
        std::this_thread::yield();
        continue;
      }
      s.state.store(w & ~local_fabric::s_mask, std::memory_order_release);
      break;
    }
    req.kind_ = request_fields::kind::none;
    return;
  }
  retire(req);
}

inline bool local_transport::test(request& req) {
  if (!req.active()) return true;
  progress();
  if (complete(req)) {
    retire(req);
    return true;
  }
  check_send_stamp(req);
  if (DDL_UNLIKELY(fabric_->aborted())) {  // as `wait`: a broken group ends every pending request
    const int peer = req.peer_;
    cancel(req);
    throw transport_error("rank " + std::to_string(rank_) + " gave up waiting for rank " + std::to_string(peer) + ": " +
                          fabric_->abort_reason());
  }
  return false;
}

inline void local_transport::await_progress() {
  auto& me = fabric_->ranks_[rank_];
  const std::uint64_t ticket = me.bell.prepare();
  if (progress() || fabric_->aborted()) return;
  me.bell.wait(ticket, std::chrono::steady_clock::now() + std::chrono::milliseconds(2));
}

inline void local_transport::wait(request& req, deadline until) {
  if (!req.active()) return;
  auto& me = fabric_->ranks_[rank_];
  const auto start = std::chrono::steady_clock::now();
  detail::backoff pause;
  for (;;) {
    const std::uint64_t ticket = me.bell.prepare();
    if (progress()) pause.reset();
    if (complete(req)) {
      retire(req);
      return;
    }
    check_send_stamp(req);
    if (DDL_UNLIKELY(fabric_->aborted())) {
      const int peer = req.peer_;
      cancel(req);
      gave_up(peer);
    }
    const auto now = std::chrono::steady_clock::now();
    if (DDL_UNLIKELY(now >= until)) {
      const int peer = req.peer_;
      cancel(req);
      timed_out(peer, start, now);
    }
    pause(me.bell, ticket, until);
  }
}

}  // namespace ddl
