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
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/reduce/host.hpp"
#include "ddl/sim/fibers.hpp"
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
  class request : public detail::request_handle<request_fields> {
   public:
    int peer() const noexcept { return peer_; }

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
  int rank() const noexcept { return rank_; }
  inline int size() const noexcept;
  /// This rank gives the group up (the concept's `abort`).
  inline void abort(const std::string& why);
  /// The network being simulated (`auto_strategy` plans on it).
  inline const ddl::topology& topology() const noexcept;
  /// Virtual seconds since the start of the run.
  inline double now() const noexcept;

  inline request isend(int peer, const_bytes data, tag t);
  inline request irecv(int peer, mutable_bytes data, tag t);
  inline request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t);
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

/// The simulated cluster: a topology, its network, the ranks' fibers, and
/// the operations they post.
class sim_fabric {
 public:
  explicit sim_fabric(const ddl::topology& topo, sim_options o = {})
      : topo_(checked(topo)), opts_(o), n_(topo.size()), net_(topo_, clock_), fibers_(o.stack_bytes) {
    if (o.shared_levels < 0 || static_cast<std::size_t>(o.shared_levels) > topo_.count())
      throw invalid_argument("sim_options.shared_levels is " + std::to_string(o.shared_levels) + "; the topology has " +
                             std::to_string(topo_.count()) + " levels");
    for (int l = 0; l < o.shared_levels; ++l) shared_unit_ *= topo_[static_cast<std::size_t>(l)].extent;
    stages_.assign(static_cast<std::size_t>(n_), stage_rec{});
  }
  sim_fabric(const sim_fabric&) = delete;
  sim_fabric& operator=(const sim_fabric&) = delete;
  ~sim_fabric() {
    for (auto& [at, size] : phantom_) munmap(const_cast<std::byte*>(at), size);
  }

  int size() const noexcept { return n_; }
  const ddl::topology& topology() const noexcept { return topo_; }
  const sim_options& options() const noexcept { return opts_; }

  /// Runs `f(sim_transport&)` once per rank, each in its own fiber, to the
  /// end in virtual time. Rethrows the first rank's exception (after every
  /// rank has stopped). Callable again: virtual time restarts at zero.
  template <class F>
  sim_report run(F&& f) {
    reset();
    std::function<void(sim_transport&)> body(std::forward<F>(f));
    transports_.assign(static_cast<std::size_t>(n_), sim_transport{});
    rank_end_.assign(static_cast<std::size_t>(n_), 0.0);
    for (int r = 0; r < n_; ++r) {
      transports_[static_cast<std::size_t>(r)].fab_ = this;
      transports_[static_cast<std::size_t>(r)].rank_ = r;
      fibers_.spawn([this, r, &body] {  // fiber r is rank r's own
        guarded([&] { body(transports_[static_cast<std::size_t>(r)]); });
        rank_end_[static_cast<std::size_t>(r)] = clock_.now();
      });
    }
    schedule();
    sim_report rep = report();
    fibers_.clear();  // fibers left suspended (idle progress fibers) are abandoned with their stacks
    if (first_error_) std::rethrow_exception(std::exchange(first_error_, nullptr));
    return rep;
  }

 private:
  friend class sim_transport;

  static const ddl::topology& checked(const ddl::topology& topo) {
    if (topo.count() == 0) throw invalid_argument("sim_fabric: the topology has no levels");
    return topo;
  }

  // --- ranks as fibers ------------------------------------------------------
  // Fibers 0..n-1 are the ranks' own; later ones are spawned by a rank
  // (`cooperative()`) and do not keep the run alive.

  /// `cooperative_scheduler` over this fabric's fibers.
  class fiber_scheduler final : public cooperative_scheduler {
   public:
    explicit fiber_scheduler(sim_fabric* f) : f_(f) {}
    int spawn(std::function<void()> body) override { return f_->spawn(std::move(body)); }
    int current() const override { return f_->fibers_.running(); }
    void suspend() override { f_->fibers_.block(); }
    void resume(int id) override { f_->fibers_.wake(id); }
    void yield() override { f_->fibers_.yield(); }

   private:
    sim_fabric* f_;
  };

  /// Runs `body`; a throw fails the run: every blocked fiber wakes to learn it.
  template <class Body>
  void guarded(Body&& body) {
    try {
      body();
    } catch (...) {
      if (!first_error_) first_error_ = std::current_exception();
      fail("a rank failed");
    }
  }

  /// The run is failed: every blocked fiber wakes, and every wait throws `why`.
  void fail(const std::string& why) {
    if (failed_) return;
    failed_ = true;
    failed_why_ = "sim_transport: " + why + "; abandoning the collective";
    fibers_.wake_all_blocked();
  }

  int spawn(std::function<void()> body) {
    if (fibers_.running() < 0) throw invalid_argument("sim_transport: fibers are spawned from a rank's fiber");
    return fibers_.spawn([this, b = std::move(body)] { guarded(b); });
  }

  /// From a fiber: let `seconds` of virtual time pass for it.
  void compute(double seconds) {
    if (!(seconds >= 0) || seconds > 1e9)
      throw invalid_argument("sim_transport::compute: " + std::to_string(seconds) +
                             " s is not a duration (0 to 1e9 seconds)");
    const int f = fibers_.running();
    if (timer_fired_.size() <= static_cast<std::size_t>(f)) timer_fired_.resize(static_cast<std::size_t>(f) + 1);
    timer_fired_[static_cast<std::size_t>(f)] = false;
    clock_.push(detail::sim_clock::event::timer, clock_.now() + seconds, static_cast<std::uint32_t>(f));
    while (!timer_fired_[static_cast<std::size_t>(f)]) fibers_.block();
  }

  void schedule() {
    for (;;) {
      fibers_.run_ready();
      if (clock_.empty()) {
        // Fibers polling with nothing in flight: let them look again (what
        // they poll may have finished without a message), a few times.
        if (fibers_.has_yielders() && idle_rounds_++ < 3) {
          fibers_.wake_yielders();
          continue;
        }
        bool any = false;
        for (int r = 0; r < n_; ++r)
          if (!fibers_.done(r)) any = true;
        if (!any) break;
        deadlocked_ = true;  // every live rank waits on something that cannot come
        mismatch_why_ = find_stamp_disagreement();
        fibers_.wake_all_blocked();
        fibers_.wake_yielders();
        continue;
      }
      const detail::sim_clock::event e = clock_.pop();
      idle_rounds_ = 0;
      if (e.kind == detail::sim_clock::event::timer) {
        timer_fired_[e.id] = true;
        fibers_.wake(static_cast<int>(e.id));
      } else if (const auto m = net_.handle(e)) {
        arrived(*m);
      }
      fibers_.wake_yielders();
    }
  }

  // --- operations and matching -----------------------------------------------
  struct op_rec {
    std::uint32_t gen = 0;
    bool used = false, send = false, fused = false, done = false, cancelled = false;
    int rank = 0, peer = 0;  // peer -1: a receive from any rank, the sender once matched
    int fiber = 0;  // the fiber that posted it (woken when it completes)
    std::uint64_t seq = 0;  // posting order (a send meets the older of two receives)
    tag tg = 0;
    std::size_t bytes = 0;
    const std::byte* src = nullptr;  // send: data
    std::byte* dst = nullptr;        // recv: destination
    const std::byte* local = nullptr;
    reduction red{};
    bool matched = false;
    std::string error;
  };
  struct match_key {
    std::uint64_t pair, tg;
    bool operator==(const match_key& o) const { return pair == o.pair && tg == o.tg; }
  };
  struct match_hash {
    std::size_t operator()(const match_key& k) const noexcept {
      return static_cast<std::size_t>(k.pair * 0x9E3779B97F4A7C15ull ^ (k.tg + 0x632BE59BD9B4E019ull + (k.pair << 6)));
    }
  };
  struct match_queues {
    std::deque<std::uint32_t> sends, recvs;
  };

  void reset() {
    ops_.clear();
    free_ops_.clear();
    match_.clear();
    msg_ops_.clear();
    clock_.reset();
    net_.reset();
    fibers_.clear();
    timer_fired_.clear();
    idle_rounds_ = 0;
    failed_ = deadlocked_ = false;
    failed_why_.clear();
    mismatch_why_.clear();
  }

  // At a deadlock: a send left unmatched while its receiver waits on
  // anything of the same call under another stamp (`transport/stamp.hpp`)
  // -- a receive from that sender, or a send of its own (a broadcast whose
  // ranks name different roots: each sends down its own tree) -- means the
  // two ranks called different collectives; its text, or "". (Had the
  // receiver gone on to the same-numbered call of another communicator, it
  // would have finished this one and taken the send.)
  std::string find_stamp_disagreement() const {
    std::vector<std::pair<std::uint64_t, tag>> sent;     // (pair, tag) of unmatched sends
    std::unordered_map<int, std::vector<tag>> waiting;   // rank -> tags of its unmatched sends and receives
    for (const auto& [k, q] : match_) {
      if (!detail::is_stamped(k.tg)) continue;
      if (!q.sends.empty()) {
        sent.emplace_back(k.pair, k.tg);
        waiting[static_cast<int>(k.pair >> 32)].push_back(k.tg);
      }
      if (!q.recvs.empty()) waiting[static_cast<int>(k.pair & 0xffffffffu)].push_back(k.tg);
    }
    for (const auto& [pair, theirs] : sent) {
      const int from = static_cast<int>(pair >> 32), to = static_cast<int>(pair & 0xffffffffu);
      const auto it = waiting.find(to);
      if (it == waiting.end()) continue;
      for (tag mine : it->second)
        if (detail::stamps_disagree(mine, theirs)) return detail::stamp_mismatch(to, mine, from, theirs);
    }
    return {};
  }

  std::uint32_t new_op() {
    const std::uint32_t i = detail::take_record(ops_, free_ops_, [](op_rec& o) -> std::uint32_t& { return o.gen; });
    ops_[i].used = true;
    return i;
  }
  void free_op(std::uint32_t i) {
    ops_[i].used = false;
    ++ops_[i].gen;
    free_ops_.push_back(i);
  }

  // A new record holding `proto`, owned by the running fiber.
  std::uint32_t record(op_rec proto) {
    const std::uint32_t i = new_op();
    proto.gen = ops_[i].gen;
    proto.used = true;
    proto.fiber = fibers_.running();
    ops_[i] = std::move(proto);
    return i;
  }
  sim_transport::request post(op_rec proto) {
    const bool from_any = !proto.send && proto.peer == -1;
    if (!from_any && (proto.peer < 0 || proto.peer >= n_ || proto.peer == proto.rank))
      throw invalid_argument("sim_transport: rank " + std::to_string(proto.rank) + " addressed peer " +
                             std::to_string(proto.peer) + " of " + std::to_string(n_));
    if (failed_) throw transport_error(failed_why_);
    proto.seq = ++posted_;
    const std::uint32_t i = record(std::move(proto));
    const op_rec& o = ops_[i];
    if (from_any) {  // the oldest send to this rank under the tag from anyone
      auto best = match_.end();
      for (auto at = match_.begin(); at != match_.end(); ++at)
        if (at->first.tg == o.tg && static_cast<std::uint32_t>(at->first.pair) == static_cast<std::uint32_t>(o.rank) &&
            !at->second.sends.empty() &&
            (best == match_.end() || ops_[at->second.sends.front()].seq < ops_[best->second.sends.front()].seq))
          best = at;
      if (best != match_.end()) {
        const std::uint32_t j = best->second.sends.front();
        best->second.sends.pop_front();
        if (best->second.sends.empty() && best->second.recvs.empty()) match_.erase(best);
        start_message(j, i);
        return make_request(i);
      }
    } else if (o.send) {  // a receive from any rank posted before the receive from this one takes it
      auto any = match_.find(match_key{any_source << 32 | static_cast<std::uint32_t>(o.peer), o.tg});
      if (any != match_.end() && !any->second.recvs.empty()) {
        const auto mine = match_.find(key_of(o));
        const bool older = mine == match_.end() || mine->second.recvs.empty() ||
                           ops_[any->second.recvs.front()].seq < ops_[mine->second.recvs.front()].seq;
        if (older) {
          const std::uint32_t j = any->second.recvs.front();
          any->second.recvs.pop_front();
          if (any->second.recvs.empty()) match_.erase(any);
          start_message(i, j);
          return make_request(i);
        }
      }
    }
    auto it = match_.find(key_of(o));
    if (it != match_.end()) {
      auto& other = o.send ? it->second.recvs : it->second.sends;
      if (!other.empty()) {
        const std::uint32_t j = other.front();
        other.pop_front();
        if (it->second.sends.empty() && it->second.recvs.empty()) match_.erase(it);
        if (o.send) start_message(i, j);
        else start_message(j, i);
        return make_request(i);
      }
    } else {
      it = match_.emplace(key_of(o), match_queues{}).first;
    }
    (o.send ? it->second.sends : it->second.recvs).push_back(i);
    return make_request(i);
  }
  // The queues of (sender, receiver, tag); a receive from any rank waits
  // under (`any_source`, receiver, tag) and never holds sends.
  static constexpr std::uint64_t any_source = 0xffffffffu;
  static match_key key_of(const op_rec& o) {
    const int dst = o.send ? o.peer : o.rank;
    const std::uint64_t src = o.send ? static_cast<std::uint64_t>(o.rank)
                              : o.peer < 0 ? any_source
                                           : static_cast<std::uint64_t>(o.peer);
    return {src << 32 | static_cast<std::uint32_t>(dst), o.tg};
  }
  sim_transport::request make_request(std::uint32_t i) {
    sim_transport::request r;
    r.fab_ = this;
    r.op_ = i;
    r.gen_ = ops_[i].gen;
    r.peer_ = ops_[i].peer;
    return r;
  }

  /// A send met its receive: the message enters the network.
  void start_message(std::uint32_t s, std::uint32_t r) {
    op_rec &so = ops_[s], &ro = ops_[r];
    if (so.bytes != ro.bytes) {
      const std::string e = detail::size_mismatch("sim_transport", so.rank, so.bytes, ro.rank, ro.bytes, so.tg);
      so.error = ro.error = e;
      so.done = ro.done = true;
      fibers_.wake(so.fiber);
      fibers_.wake(ro.fiber);
      return;
    }
    so.matched = ro.matched = true;
    ro.peer = so.rank;  // a receive from any rank learns its sender
    const std::uint32_t m = net_.start(so.rank, ro.rank, so.bytes);
    if (msg_ops_.size() <= m) msg_ops_.resize(m + 1);
    msg_ops_[m] = {s, r};
  }

  /// Message `m` arrived: its data moves (real buffers) and both sides complete.
  void arrived(std::uint32_t m) {
    const auto [s, r] = msg_ops_[m];
    if (s == read_flow) {  // a read of a peer's stage: the reader's operation goes on
      ops_[r].done = true;
      finish_op(r);
      return;
    }
    op_rec &so = ops_[s], &ro = ops_[r];
    // Phantom runs move the data of messages between real buffers only (the
    // direct strategies' address tables); phantom buffers hold nothing.
    if (!so.cancelled && !ro.cancelled && so.bytes && (!opts_.phantom || (!phantom_at(so.src) && !phantom_at(ro.dst)))) {
      if (ro.fused) {
        const std::size_t count = so.bytes / size_of(ro.red.type);
        if (ro.red.received_first) host::reduce(ro.dst, so.src, ro.local, count, ro.red);
        else host::reduce(ro.dst, ro.local, so.src, count, ro.red);
      } else {
        std::memcpy(ro.dst, so.src, so.bytes);
      }
    }
    if (so.cancelled && !ro.cancelled) ro.error = "sim_transport: the sender cancelled this message";
    so.done = ro.done = true;
    finish_op(s);
    finish_op(r);
  }
  void finish_op(std::uint32_t i) {
    op_rec& o = ops_[i];
    if (o.cancelled) free_op(i);
    else fibers_.wake(o.fiber);
  }

  // --- cancellation and waiting ----------------------------------------------
  void cancel(std::uint32_t i) {
    op_rec& o = ops_[i];
    if (o.done) {
      free_op(i);
      return;
    }
    if (!o.matched) {
      auto it = match_.find(key_of(o));
      if (it != match_.end()) {
        auto& q = o.send ? it->second.sends : it->second.recvs;
        q.erase(std::find(q.begin(), q.end(), i));
        if (it->second.sends.empty() && it->second.recvs.empty()) match_.erase(it);
      }
      free_op(i);
      return;
    }
    o.cancelled = true;  // the message runs its course in virtual time; no data touches this side
  }

  // The errors a pending request ends with once the run failed or deadlocked.
  void throw_if_stuck(const op_rec& o) const {
    if (failed_) throw transport_error(failed_why_);
    if (deadlocked_ && !mismatch_why_.empty()) throw mismatch_error("sim_transport: " + mismatch_why_);
    if (deadlocked_)
      throw timeout_error(o.peer, "simulated network (deadlock: no message can arrive)", "", clock_.now());
  }
  bool test(sim_transport::request& req) {
    if (!req.fab_) return true;
    op_rec& o = ops_[req.op_];
    if (o.done) {
      std::string err = std::move(o.error);
      req.peer_ = o.peer;
      free_op(req.op_);
      req.fab_ = nullptr;
      if (!err.empty()) throw transport_error(err);
      return true;
    }
    throw_if_stuck(o);
    return false;
  }
  void await_progress() {
    if (!failed_ && !deadlocked_) fibers_.block();
  }

  void wait(sim_transport::request& req) {
    if (!req.fab_) return;
    const std::uint32_t i = req.op_;
    for (;;) {
      op_rec& o = ops_[i];
      if (o.done) {
        std::string err = std::move(o.error);
        req.peer_ = o.peer;
        free_op(i);
        req.fab_ = nullptr;
        if (!err.empty()) throw transport_error(err);
        return;
      }
      throw_if_stuck(o);
      fibers_.block();
    }
  }

  // --- memory ------------------------------------------------------------------
  // Host operations (no-ops on phantom buffers) whose reads of a peer's
  // stage first move those bytes over the network (`read`); `ctx` is the
  // rank's transport. Named "host" in phantom runs too: phantom buffers are
  // host addresses nothing touches.
  memory_ops memory_ops_for(const location& where, sim_transport* t) {
    if (where.space != memory_space::host) throw invalid_argument("sim_transport: buffers are host (or phantom) memory");
    memory_ops m;
    m.name = "host";
    m.ctx = t;
    m.copy = [](void* c, std::byte* dst, const std::byte* src, std::size_t n) {
      if (fabric_of(c).read(c, &src, 1, n) && n && dst != src) std::memmove(dst, src, n);
    };
    m.reduce = [](void* c, std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, reduction r) {
      const std::byte* src[2] = {a, b};
      if (fabric_of(c).read(c, src, 2, count * size_of(r.type))) host::reduce(dst, a, b, count, r);
    };
    m.reduce_many = [](void* c, std::byte* dst, const std::byte* const* src, int n, std::size_t count, reduction r) {
      if (fabric_of(c).read(c, src, n, count * size_of(r.type)))
        host::reduce_many(dst, reinterpret_cast<const void* const*>(src), n, count, r);
    };
    m.finalize = [](void* c, std::byte* p, std::size_t count, reduction r, int ranks) {
      if (!fabric_of(c).opts_.phantom) host::finalize(p, count, r, ranks);
    };
    m.allocate = [](void* c, std::size_t n) {
      sim_fabric& f = fabric_of(c);
      return f.opts_.phantom ? static_cast<std::byte*>(f.phantom(n, 3)) : new std::byte[n];
    };
    m.release = [](void* c, std::byte* p, std::size_t) {
      if (!fabric_of(c).opts_.phantom) delete[] p;
    };
    return m;
  }
  static inline sim_fabric& fabric_of(void* t);

  // The reads of `n` sources of `bytes` each by the calling rank (`t`):
  // those that lie in a peer's stage travel from the peer as flows over the
  // network, all at once, and this fiber waits for them. Returns whether the
  // operation's data should move (false in phantom runs).
  inline bool read(void* t, const std::byte* const* src, int n, std::size_t bytes);

  // --- stages (shared memory) ---------------------------------------------------
  struct stage_rec {
    std::byte* base = nullptr;
    std::size_t size = 0;
  };
  bool same_unit(int a, int b) const noexcept { return opts_.shared_levels > 0 && a / shared_unit_ == b / shared_unit_; }
  std::byte* stage(int r, std::size_t bytes) {
    stage_rec& s = stages_[static_cast<std::size_t>(r)];
    if (bytes <= s.size) return s.base;
    const std::size_t size = std::max<std::size_t>({bytes, s.size * 2, 4096});
    std::byte* at = nullptr;
    if (opts_.phantom) {
      void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw transport_error("sim_transport: cannot reserve a stage of " + std::to_string(size) + " bytes");
      phantom_[static_cast<const std::byte*>(p)] = size;
      at = static_cast<std::byte*>(p);
    } else {
      stage_memory_.emplace_back(new std::byte[size]());  // zeroed; kept: peers may hold the old one until their call ends
      at = stage_memory_.back().get();
    }
    stage_owner_[at] = {size, r};
    s = {at, size};
    return at;
  }
  // Whether `p` lies in a phantom range.
  bool phantom_at(const std::byte* p) const {
    auto it = phantom_.upper_bound(p);
    if (it == phantom_.begin()) return false;
    --it;
    return p < it->first + it->second;
  }
  // The rank whose stage holds [p, p + bytes), or -1.
  int stage_owner(const std::byte* p, std::size_t bytes) const {
    auto it = stage_owner_.upper_bound(p);
    if (it == stage_owner_.begin()) return -1;
    --it;
    if (p >= it->first + it->second.first) return -1;
    if (p + bytes > it->first + it->second.first)
      throw transport_error("sim_transport: a read of " + std::to_string(bytes) + " bytes runs past rank " +
                            std::to_string(it->second.second) + "'s stage");
    return it->second.second;
  }

  void* phantom(std::size_t bytes, int slot) {
    if (!opts_.phantom) throw invalid_argument("sim_transport: phantom_buffer needs sim_options::phantom");
    if (slot < 0 || slot > 3) throw invalid_argument("sim_transport: phantom slots are 0..3");
    auto& s = slots_[slot];
    if (bytes > s.second || !s.first) {
      const std::size_t size = std::max<std::size_t>(bytes, 4096);
      void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw transport_error("sim_transport: cannot reserve " + std::to_string(size) + " phantom bytes");
      phantom_[static_cast<const std::byte*>(p)] = size;  // earlier ranges stay reserved: ranks may still hold them
      s = {p, size};
    }
    return s.first;
  }

  sim_report report() const {
    sim_report r;
    for (double end : rank_end_) {
      r.rank_seconds.push_back(end);
      r.seconds = std::max(r.seconds, end);
    }
    net_.fill(r);
    return r;
  }

  ddl::topology topo_;
  sim_options opts_;
  int n_ = 0;
  detail::sim_clock clock_;
  detail::flow_network net_;      // over topo_ and clock_
  detail::fiber_pool fibers_;
  std::vector<char> timer_fired_;  // per fiber: `compute`'s time has passed
  std::vector<sim_transport> transports_;
  std::vector<double> rank_end_;
  fiber_scheduler scheduler_{this};
  int idle_rounds_ = 0;
  bool failed_ = false, deadlocked_ = false;
  std::string mismatch_why_;  // the stamp disagreement behind a deadlock, if one
  std::string failed_why_;
  std::exception_ptr first_error_;
  std::vector<op_rec> ops_;
  std::vector<std::uint32_t> free_ops_;
  std::unordered_map<match_key, match_queues, match_hash> match_;
  std::uint64_t posted_ = 0;  // operations posted (their `seq`)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> msg_ops_;  // per network message: its send and receive ops
  std::pair<void*, std::size_t> slots_[4]{};
  std::map<const std::byte*, std::size_t> phantom_;  // every phantom range (slots, stages): its size
  static constexpr std::uint32_t read_flow = ~std::uint32_t{0};  // msg_ops_: a read, not a send
  int shared_unit_ = 1;                                          // ranks per shared unit
  std::vector<stage_rec> stages_;                                // per rank: its stage now
  std::map<const std::byte*, std::pair<std::size_t, int>> stage_owner_;  // every stage ever: (size, rank)
  std::vector<std::unique_ptr<std::byte[]>> stage_memory_;       // real runs: the stages' memory
};

// --- sim_transport members ---------------------------------------------------
inline int sim_transport::size() const noexcept { return fab_->n_; }
inline const ddl::topology& sim_transport::topology() const noexcept { return fab_->topo_; }
inline double sim_transport::now() const noexcept { return fab_->clock_.now(); }

inline sim_transport::request sim_transport::isend(int peer, const_bytes data, tag t) {
  sim_fabric::op_rec o;
  o.send = true;
  o.rank = rank_;
  o.peer = peer;
  o.tg = t;
  o.bytes = data.size;
  o.src = data.data;
  return fab_->post(std::move(o));
}
inline sim_transport::request sim_transport::irecv(int peer, mutable_bytes data, tag t) {
  return irecv_reduce(peer, data, const_bytes{}, reduction{}, t);
}
inline sim_transport::request sim_transport::irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r,
                                                          tag t) {
  // A receive without local data is a plain copy.
  sim_fabric::op_rec o;
  o.rank = rank_;
  o.peer = peer;
  o.tg = t;
  o.bytes = dst.size;
  o.dst = dst.data;
  o.local = local.data;
  o.red = r;
  o.fused = local.data != nullptr;
  return fab_->post(std::move(o));
}
inline sim_transport::request sim_transport::irecv_any(mutable_bytes data, tag t) {
  sim_fabric::op_rec o;
  o.rank = rank_;
  o.peer = -1;
  o.tg = t;
  o.bytes = data.size;
  o.dst = data.data;
  return fab_->post(std::move(o));
}
inline void sim_transport::wait(request& r, deadline) { fab_->wait(r); }
inline bool sim_transport::test(request& r) { return fab_->test(r); }
inline void sim_transport::await_progress() { fab_->await_progress(); }
inline void sim_transport::abort(const std::string& why) {
  fab_->fail("rank " + std::to_string(rank_) + " failed: " + why);
}
inline cooperative_scheduler* sim_transport::cooperative() noexcept { return &fab_->scheduler_; }
inline void sim_transport::compute(double seconds) { fab_->compute(seconds); }
inline memory_ops sim_transport::memory(const location& where) { return fab_->memory_ops_for(where, this); }
inline sim_fabric& sim_fabric::fabric_of(void* t) { return *static_cast<sim_transport*>(t)->fab_; }

inline bool sim_fabric::read(void* t, const std::byte* const* src, int n, std::size_t bytes) {
  if (stage_owner_.empty() || bytes == 0) return !opts_.phantom;
  const int me = static_cast<sim_transport*>(t)->rank_;
  std::vector<std::uint32_t> flows;
  for (int k = 0; k < n; ++k) {
    const int owner = stage_owner(src[k], bytes);
    if (owner < 0 || owner == me) continue;
    if (failed_) throw transport_error(failed_why_);
    op_rec proto;
    proto.rank = me;
    proto.peer = owner;
    proto.bytes = bytes;
    proto.matched = true;
    const std::uint32_t i = record(std::move(proto));
    const std::uint32_t m = net_.start(owner, me, bytes);
    if (msg_ops_.size() <= m) msg_ops_.resize(m + 1);
    msg_ops_[m] = {read_flow, i};
    flows.push_back(i);
  }
  std::size_t waited = 0;
  try {
    for (; waited < flows.size(); ++waited) {
      for (;;) {
        op_rec& o = ops_[flows[waited]];
        if (o.done) {
          free_op(flows[waited]);
          break;
        }
        throw_if_stuck(o);
        fibers_.block();
      }
    }
  } catch (...) {
    for (std::size_t k = waited; k < flows.size(); ++k) {
      op_rec& o = ops_[flows[k]];
      if (o.done) free_op(flows[k]);
      else o.cancelled = true;  // freed when its flow ends
    }
    throw;
  }
  return !opts_.phantom;
}

inline std::byte* sim_transport::stage(std::size_t bytes) { return fab_->stage(rank_, bytes); }
inline const std::byte* sim_transport::peer_stage(int peer, std::size_t bytes) {
  if (peer < 0 || peer >= fab_->n_ || !fab_->same_unit(rank_, peer))
    throw transport_error("sim_transport: rank " + std::to_string(rank_) + " cannot read rank " + std::to_string(peer) +
                          "'s memory: no unit of the shared levels (sim_options::shared_levels = " +
                          std::to_string(fab_->opts_.shared_levels) + ") holds both");
  if (!fab_->stages_[static_cast<std::size_t>(peer)].base) fab_->stage(peer, 4096);  // every stage starts at 4 KiB
  const sim_fabric::stage_rec& s = fab_->stages_[static_cast<std::size_t>(peer)];
  if (s.size < bytes)
    throw transport_error("sim_transport: rank " + std::to_string(peer) + "'s stage holds " + std::to_string(s.size) +
                          " bytes; rank " + std::to_string(rank_) + " asked for " + std::to_string(bytes));
  return s.base;
}
inline bool sim_transport::stages_shared() const { return fab_->opts_.shared_levels > 0 && fab_->shared_unit_ >= fab_->n_; }
inline bool sim_transport::stages_shared_among(int base, int stride, int size) const {
  for (int i = 1; i < size; ++i)
    if (!fab_->same_unit(base, base + i * stride)) return false;
  return fab_->opts_.shared_levels > 0;
}
inline void* sim_transport::phantom_buffer(std::size_t bytes, int slot) { return fab_->phantom(bytes, slot); }

inline void sim_transport::request_fields::withdraw() noexcept {
  if (fab_->ops_[op_].gen == gen_) fab_->cancel(op_);
}

}  // namespace ddl
