#pragma once
/// \file
/// `cuda_peer_transport`: ranks are threads of one process, one per GPU (or
/// several per GPU: that is how one GPU tests 1-8 ranks), exchanging device
/// buffers with peer copies. Compile with nvcc; link `ddl::cuda`.
///
/// Stream-ordered, like the rest of the CUDA back-end: a rank's transfers,
/// copies and reductions are queued on the stream of the call's buffers
/// (`ddl::device_view(..., stream)`; before any call, the rank's own
/// `stream()`) and a
/// collective returns once everything is queued. Synchronise that stream
/// before reading the result on the host.
///
/// A message: the sender records a "ready" event on its stream and posts a
/// descriptor; the receiver, on its own thread, matches it (per peer and
/// tag, in posting order), makes its stream wait for "ready", then either
/// copies (`cudaMemcpyPeerAsync`) or, for a receive-and-reduce, launches the
/// reduction reading the peer's memory directly when the two devices can
/// access each other (the same device always can; otherwise
/// `cudaDeviceCanAccessPeer` decides and peer access is enabled), else copies
/// into a scratch buffer first. It records "done"; the sender's wait makes
/// its stream wait for "done" before the buffer may change. Host-side waits
/// (for the peer to post) have deadlines like every transport. The events
/// come from a pool per device (`cuda_peer_fabric`), not created per
/// message. A message between two host buffers (the direct strategies'
/// address tables) is copied on the host when it is matched; its events
/// still order the two streams.
///
/// The ranks share an address space and, on one device or on devices with
/// peer access, read each other's buffers (`peer_memory`): `ddl::one_shot`
/// and `ddl::two_shot` run over it, each rank reducing its peers' buffers
/// in one kernel (`cuda::reduce_many`), their phases ordered by the
/// messages' events, so nothing waits on the host. Small one_shot calls
/// and every two_shot all-reduce send no message at all: the ranks' kernels
/// meet through counters in flag regions (`cuda/peer_flagged.hpp`).
///
/// The fabric (`cuda_peer_fabric`, the ranks' devices, events and mailboxes)
/// is in `cuda/peer_fabric.hpp`; messages (`isend`, `irecv`, matching) in
/// `cuda/peer_messages.hpp`. Including any of these includes them all.
#if !defined(__CUDACC__)
#error "ddl/cuda/peer_transport.hpp: compile this translation unit with nvcc (CMake: set its LANGUAGE to CUDA)"
#endif
#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>

#include "ddl/cuda/runtime.hpp"
#include "ddl/topology/topology.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/request.hpp"

namespace ddl {

class cuda_peer_fabric;

/// One rank's handle on a `cuda_peer_fabric`; used from its own thread.
class cuda_peer_transport {
 public:
  static constexpr bool device_memory = true;  ///< the buffers lie in device memory
  /// Each slice goes as one message: the stream orders the work, and chunks
  /// only add API calls, which the ranks' threads issue in turns.
  static constexpr bool stream_ordered = true;
  /// Every rank's buffers are readable by every other rank's kernels where
  /// the devices allow it (`peers_readable`): the direct strategies apply.
  static constexpr bool peer_memory = true;
  /// The planner's link costs (`topology()`): device memory bandwidth shared
  /// by a peer read, a write and a local read; and a step's latency per rank
  /// of the fabric, since the ranks' threads take turns in the driver.
  static constexpr double link_bandwidth = 200e9;
  static constexpr double step_latency_per_rank = 10e-6;  ///< a step's latency per rank of the fabric
  /// A flagged call's meeting costs half a step's latency: a step of
  /// messages takes about twice what the latency per rank says, a flagged
  /// call about one latency per rank (fitted by `ddl-cuda-cost-fit`).
  static constexpr double flagged_latency = 0.5;

  struct message;
  /// What a request refers to (`transport/request.hpp`).
  struct request_fields {
    cuda_peer_transport* owner_ = nullptr;
    std::shared_ptr<message> msg_;
    bool active() const noexcept { return msg_ != nullptr; }
    inline void withdraw() noexcept;
  };
  /// A send or receive in flight; move-only, withdrawn if dropped unfinished.
  class request : public detail::request_handle<request_fields> {
    friend class cuda_peer_transport;
  };

  int rank() const noexcept { return rank_; }  ///< this rank: 0 to size() - 1
  /// This rank gives the group up (the concept's `abort`).
  inline void abort(const std::string& why);
  inline int size() const noexcept;  ///< the group's ranks
  /// The levels `auto_strategy` and the broadcast price on: `DDL_TOPOLOGY`
  /// where set, else one level of `link_bandwidth` whose step latency is
  /// `step_latency_per_rank` times the ranks. A step every rank takes costs
  /// about n times one rank's CUDA calls, since the ranks' threads take
  /// turns in the driver (a flat latency made the planner pick halving
  /// doubling where recursive doubling is faster).
  inline ddl::topology topology() const;
  int device() const noexcept { return ctx_.device; }  ///< this rank's CUDA device
  /// Whether every rank's device reads every other's memory (one device, or
  /// peer access between all of them): `one_shot` and `two_shot` need it.
  inline bool peers_readable() const noexcept;
  /// The stream transfers and local operations go on now.
  cudaStream_t stream() const noexcept { return ctx_.stream; }

  inline request isend(int peer, const_bytes data, tag t);  ///< sends `data` (device memory) to `peer` on this rank's stream
  inline request irecv(int peer, mutable_bytes data, tag t);  ///< receives exactly `data.size` bytes from `peer`: a copy out of its memory
  inline request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t);  ///< `dst` = `local` (op) what `peer` sends, one kernel reading its memory
  inline void wait(request& r, deadline until);  ///< completes `r` (`timeout_error` after `until`)
  inline bool test(request& r);  ///< whether `r` has completed (then retired)
  /// Device operations on the buffers' stream (which transfers then use too).
  inline memory_ops memory(const location& where);

  /// The largest one_shot call `flagged_all_reduce` takes (bytes per rank).
  static constexpr std::size_t flagged_bytes = cuda::kernels::flag_slot;
  /// Whether `flagged_all_reduce` is there (every rank's device reads every
  /// other's, at most `many_max` ranks): the same on every rank.
  inline bool flagged_ready() const noexcept;
  /// One one_shot all-reduce of `count` elements (at most `flagged_bytes`)
  /// through the ranks' flag regions: one kernel on the stream, no message
  /// (`cuda::kernels::flagged_all_reduce`); `avg` divided. The ranks' threads
  /// meet twice on the host (spinning on atomics, no CUDA call): before the
  /// launch, where a peer whose call differs (`stamp`: collective, dtype, op,
  /// count; or its byte count) is a `mismatch_error` on every rank and
  /// nothing is launched, and after it. A peer that does not come within
  /// `timeout` is a `timeout_error` naming it; an abort, a `transport_error`.
  /// What the kernel itself finds (a peer's kernel that never runs, within
  /// `timeout`; an abort) leaves `out` alone and is reported by this rank's
  /// next flagged call and by `cuda_peer_fabric::run` (`check_flagged`).
  inline void flagged_all_reduce(const std::byte* in, std::byte* out, std::size_t count, reduction red, tag stamp,
                                 std::chrono::nanoseconds timeout);
  /// One two_shot all-reduce of `count` elements without a message, at any
  /// size: the ranks' threads meet on the host as for `flagged_all_reduce`
  /// (comparing their calls and exchanging their buffers' addresses), then
  /// one kernel per rank (`cuda::kernels::flagged_two_shot`, as many blocks
  /// on every rank) reduces its block of every rank's input where it lies and
  /// gathers the others' reduced blocks, the kernels meeting through
  /// counters in the flag regions. Errors as `flagged_all_reduce`.
  inline void flagged_two_shot(const std::byte* in, std::byte* out, std::size_t count, reduction red, tag stamp,
                               std::chrono::nanoseconds timeout);
  /// Throws what a flagged call of this rank found, if anything (see above).
  inline void check_flagged() const;

  struct message {
    // set by the sender
    tag tg = 0;
    const std::byte* src = nullptr;
    std::size_t bytes = 0;
    int src_rank = 0, src_device = 0;
    cudaEvent_t ready = nullptr;
    int done_device = 0;  // where `done` was recorded (the receiver's device)
    // set by the receiver when it queues the transfer
    std::atomic<bool> consumed{false};
    cudaEvent_t done = nullptr;
    std::string error;
    // receive side
    bool recv = false, fused = false, matched = false;
    int peer = 0;
    std::byte* dst = nullptr;
    const std::byte* local = nullptr;
    reduction red{};
    std::shared_ptr<message> send;  // the matched send
  };

 private:
  friend class cuda_peer_fabric;
  inline bool try_match();
  inline void meet(std::uint64_t at, std::chrono::steady_clock::time_point until, const char* why);
  // A flagged call as `enter_flagged` opened it: the rank's call number, the
  // host-side deadline, and the kernel's error words and timeout.
  struct flagged_call {
    std::uint64_t k = 0;
    std::chrono::steady_clock::time_point until;
    volatile unsigned long long* err = nullptr;
    unsigned long long ns = 0;
  };
  inline flagged_call enter_flagged(const char* kind, const std::byte* in, std::byte* out, std::size_t bytes,
                                    std::size_t limit, tag stamp, std::chrono::nanoseconds timeout);
  inline void check_stamp(request& req);
  inline void enqueue(message& r, message& s);
  cuda_peer_fabric* fab_ = nullptr;
  int rank_ = 0;
  cudaStream_t own_stream_ = nullptr;
  cuda::stream_context ctx_{};
  std::deque<std::shared_ptr<message>> pending_recvs_;
  std::byte* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  unsigned recv_polls_ = 0;  // `check_stamp` looks every 16th poll of an unmatched receive
};

}  // namespace ddl

// The fabric, then the definitions of the transport's members (they need it).
#include "ddl/cuda/peer_fabric.hpp"
