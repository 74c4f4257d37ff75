#pragma once
/// \file
/// `sim_transport`: the Transport concept in virtual time, over a network
/// described by a `ddl::topology`. It answers "what would this cluster do?"
/// by running the very strategy code the other transports run, one
/// cooperative fiber per rank, under a discrete-event scheduler.
///
/// Network model (the same as the cost model's, see `cost_model.hpp`, but
/// played out message by message rather than summed):
///  * Ranks are numbered innermost level first. A unit of level l is a group
///    of g_l = extent_0 ... extent_(l-1) ranks (a unit of level 0 is a rank);
///    it has `links_l` links (default g_l) of bandwidth B_l, out and in.
///  * A message from a to b crosses, for every level l up to their lowest
///    common level L (levels of extent 1 have no links; a level with
///    `private_links` only when it is L), the egress of a's unit and the
///    ingress of b's unit. It starts alpha_max after both sides
///    have posted it (rendezvous; alpha_max = the largest latency on its path),
///    then moves at the rate of its connection (the ordered pair a -> b).
///  * A connection uses one link per level: on each resource (a unit's
///    egress or ingress at one level) the F connections active there get
///    min(B_l, links_l B_l / F) each; a connection's rate is the smallest of
///    its shares; messages of one connection split its rate evenly. Rates
///    change whenever a connection starts or stops. This is proportional
///    sharing per resource, not max-min fairness: a connection throttled
///    elsewhere does not give its unused share away.
///  * Local copies and reductions take no virtual time (the network bounds
///    every algorithm here; the cost model makes the same assumption).
///    Computation is what a rank says it is: `sim_transport::compute(s)`
///    lets `s` virtual seconds pass for the calling fiber.
///  * Shared memory (`sim_options::shared_levels` = k): the ranks of one unit
///    of level k-1 read each other's memory, as a node's GPUs do over NVLink
///    or a machine's processes through shared stages. The transport then has
///    stages (`stage`, `peer_stage`, `stages_shared_among`; the Transport
///    concept), so the direct strategies run inside such units (`one_shot`,
///    `two_shot`, a multi-ring's `direct_first` dimension; `auto` weighs
///    them there). A local operation that reads a peer's stage is a flow of
///    those bytes from the peer to the reader over the links between them,
///    exactly as a message of that size would be, started when the reader
///    reads (several at once for an n-way reduction) and finished before the
///    operation's data moves. The reader's own memory costs nothing.
///
/// Each rank may own more fibers than its own (`cooperative()`, see
/// `transport/cooperative.hpp`): a communicator's asynchronous collectives
/// progress in a fiber of their own, so a rank that computes while its
/// gradients are reduced overlaps the two in virtual time, as a trainer does.
///
/// Buffers are real or phantom. Real: messages move and reduce data at
/// their completion, so results can be checked bit for bit. Phantom
/// (`sim_options::phantom`): only sizes exist; `phantom_buffer` hands out
/// addresses in a reserved, inaccessible region, copies and reductions do
/// nothing, and any stray access faults. That is how 4096 ranks x 350 MB fit.
///
/// Nothing hangs: when every unfinished rank waits and no message is in
/// flight, the waits throw `timeout_error` naming the peer (a deadlock in
/// virtual time). A rank that throws makes the others' waits throw.
///
/// Example:
/// \code
///   ddl::sim_fabric f(ddl::topology::parse("4:20GB/s:3us,16:10GB/s:5us,4:9.5GB/s:8us"), {true});
///   auto rep = f.run([](ddl::sim_transport& t) {
///     ddl::communicator<ddl::auto_strategy, ddl::sim_transport> comm(t);
///     auto* g = static_cast<float*>(t.phantom_buffer(350'000'000));
///     comm.all_reduce(ddl::buffer_view{g, 350'000'000 / 4, ddl::dtype::float32}, ddl::op::sum);
///   });
///   std::printf("%.2f ms\n", rep.seconds * 1e3);
/// \endcode

#include <cstddef>
#include <cstdint>
#include <string>

#include "ddl/core/memory.hpp"
#include "ddl/sim/network.hpp"
#include "ddl/topology/topology.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/cooperative.hpp"
#include "ddl/transport/request.hpp"

namespace ddl {

/// Settings of a simulation.
struct sim_options {
  /// Sizes only, no data (see `sim_transport::phantom_buffer`).
  bool phantom = false;
  /// Stack of each rank's fiber (virtual memory; only touched pages count).
  std::size_t stack_bytes = std::size_t{256} << 10;
  /// The innermost levels [0, shared_levels) lie inside units whose ranks
  /// read each other's memory (see the file comment); 0: none.
  int shared_levels = 0;
};

class sim_fabric;

/// One rank's handle on a `sim_fabric`; used from that rank's fiber only.
class sim_transport {
 public:
  /// What a request refers to (`transport/request.hpp`): an operation
  /// record, recognised by its generation.
  struct request_fields {
    sim_fabric* fab_ = nullptr;
    std::uint32_t op_ = 0, gen_ = 0;
    int peer_ = -1;  // the peer; an `irecv_any`'s sender once it completed
    bool active() const noexcept { return fab_ != nullptr; }
    inline void withdraw() noexcept;
  };
  /// A send or receive in flight; move-only, withdrawn if dropped unfinished.
  class request : public detail::request_handle<request_fields> {
   public:
    int peer() const noexcept { return peer_; }  ///< the request's peer (an `irecv_any`'s sender once complete)

   private:
    friend class sim_transport;
    friend class sim_fabric;
  };

  /// The direct strategies' reads of a peer are flows over the links and a
  /// rank's own memory is free (see the file comment): the planner prices
  /// them so (`cost::transport_costs::over_links`).
  static constexpr bool direct_reads_over_links = true;

  /// Ranks are fibers of one thread in virtual time: no thread may drive
  /// them, but a fiber of the same rank may (asynchronous collectives
  /// progress in one, see `cooperative()`).
  bool allows_progress_thread() const noexcept { return false; }
  /// This rank's fibers (`transport/cooperative.hpp`).
  inline cooperative_scheduler* cooperative() noexcept;
  /// The calling fiber computes for `seconds` of virtual time (as a GPU
  /// would): the rank's other fibers, its collectives in flight, and the
  /// other ranks go on meanwhile.
  inline void compute(double seconds);
  int rank() const noexcept { return rank_; }  ///< this rank: 0 to size() - 1
  inline int size() const noexcept;  ///< the group's ranks
  /// This rank gives the group up (the concept's `abort`).
  inline void abort(const std::string& why);
  /// The network being simulated (`auto_strategy` plans on it).
  inline const ddl::topology& topology() const noexcept;
  /// Virtual seconds since the start of the run.
  inline double now() const noexcept;

  inline request isend(int peer, const_bytes data, tag t);  ///< sends `data` to `peer`: a flow over the simulated links
  inline request irecv(int peer, mutable_bytes data, tag t);  ///< receives exactly `data.size` bytes from `peer`
  inline request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t);  ///< `dst` = `local` (op) what `peer` sends
  /// Receives from whichever rank's send under `t` meets it first (the
  /// concept's `irecv_any`): a send goes to the older of the receives from
  /// its rank and from any; a receive from any takes the oldest send waiting
  /// for one. The request's `peer()` is the sender once complete.
  inline request irecv_any(mutable_bytes data, tag t);
  /// Blocks this rank's fiber until `r` completes in virtual time. The
  /// deadline is not used: virtual time cannot stall, a deadlock is detected.
  inline void wait(request& r, deadline);
  /// True (and `r` retired) when `r` has completed in virtual time.
  inline bool test(request& r);
  /// Blocks this rank's fiber until one of its requests completes (or the
  /// run deadlocks or fails: the next `test` or `wait` says so).
  inline void await_progress();
  /// Host operations on real buffers; no-ops (and phantom workspace) when phantom.
  inline memory_ops memory(const location& where);
  /// `bytes` of phantom memory (phantom runs only): an address range no
  /// one may touch. Slots 0..3 are distinct ranges (e.g. input and output),
  /// shared by every rank.
  inline void* phantom_buffer(std::size_t bytes, int slot = 0);

  /// Stages (the Transport concept's; `sim_options::shared_levels`): this
  /// rank's, at least `bytes` long (grown when shorter: its address may
  /// change; at least 4 KiB, zeroed; phantom in phantom runs).
  inline std::byte* stage(std::size_t bytes);
  /// Rank `peer`'s stage, for its first `bytes`; `transport_error` when the
  /// two share no unit of the shared levels or the peer's is shorter.
  inline const std::byte* peer_stage(int peer, std::size_t bytes);
  /// Whether every rank reads every other's memory (one shared unit holds them all).
  inline bool stages_shared() const;
  /// Whether ranks `base + i * stride` (i < `size`) lie in one shared unit.
  inline bool stages_shared_among(int base, int stride, int size) const;

 private:
  friend class sim_fabric;
  sim_fabric* fab_ = nullptr;
  int rank_ = 0;
};

}  // namespace ddl

// The fabric, then the definitions of sim_transport's members (they need it).
#include "ddl/sim/fabric.hpp"
