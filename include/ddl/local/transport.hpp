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
/// The fabric (`local_fabric`: mailboxes, receive tables, doorbells, stages)
/// is in `local/fabric.hpp`, messages in `local/messages.hpp`; including
/// any of the three includes them all.
///
/// Example:
/// \code
///   ddl::local_fabric::run(4, [](ddl::local_transport& t) {
///     ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
///     std::vector<float> g(1000, 1.0f);
///     comm.all_reduce(ddl::host_view(g), ddl::op::sum);  // every g[i] == 4
///   });
/// \endcode
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ddl/core/error.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/request.hpp"

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
  static constexpr double default_latency = 8e-6;  ///< one hand-off between threads
  /// A step that only copies what it receives moves 2 bytes of memory
  /// traffic per byte where the fused receive-and-reduce above moves 3
  /// (`cost::copy_step_factor`), and the direct strategies' reads, priced
  /// beside it, stream at 2.25 B (`cost::direct_read_factor`): fitted to the
  /// medians of 2, 4 and 8 threads, 4 KiB-64 MiB, in place and out.
  static constexpr double copy_step_factor = 1.5;
  static constexpr double direct_read_factor = 2.25;  ///< the direct strategies' reads, as a multiple of the link
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
    int peer() const noexcept { return peer_; }  ///< the request's peer (an `irecv_any`'s sender once complete)

   private:
    friend class local_transport;
  };

  local_transport() = default;

  int rank() const noexcept { return rank_; }  ///< this rank: 0 to size() - 1
  int size() const noexcept;  ///< the group's ranks
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
  bool stages_shared() const noexcept { return true; }  ///< every rank reads every stage
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

}  // namespace ddl

// The fabric, then the definitions of the transport's members (they need it).
#include "ddl/local/fabric.hpp"
