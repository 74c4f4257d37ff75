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
///    common level L (levels of extent 1 have no links), the egress of a's
///    unit and the ingress of b's unit. It starts alpha_max after both sides
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
#include <ucontext.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/reduce/host.hpp"
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
};

/// One direction of one unit's links at one level.
struct sim_link {
  int level = 0;
  int unit = 0;
  bool egress = true;
  double capacity = 0;      ///< links x bandwidth, bytes/s
  double bytes = 0;         ///< bytes carried
  double busy_seconds = 0;  ///< time with at least one connection active
  std::string str() const {
    return "level " + std::to_string(level + 1) + " unit " + std::to_string(unit) + (egress ? " out" : " in");
  }
};

/// What a simulation measured.
struct sim_report {
  double seconds = 0;                 ///< virtual time when the last rank finished
  std::vector<double> rank_seconds;   ///< per rank
  std::size_t messages = 0;           ///< point-to-point messages
  double bytes = 0;                   ///< bytes sent in all
  /// Per level, innermost first.
  struct level_stats {
    double bytes = 0;           ///< bytes that left a unit over this level's links
    double busiest = 0;         ///< largest busy fraction of one of its links
    double top_seconds = 0;     ///< time with a message in flight whose highest level is this one
  };
  std::vector<level_stats> levels;
  /// The level that took the most time as the highest level messages crossed
  /// (what bounds the collective), and that level's link busy longest.
  int bound_level = 0;
  sim_link busiest;
  std::vector<sim_link> links;        ///< every link, levels innermost first
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
    bool active() const noexcept { return fab_ != nullptr; }
    inline void withdraw() noexcept;
  };
  class request : public detail::request_handle<request_fields> {
    friend class sim_transport;
    friend class sim_fabric;
  };

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
  /// The network being simulated (`auto_strategy` plans on it).
  inline const ddl::topology& topology() const noexcept;
  /// Virtual seconds since the start of the run.
  inline double now() const noexcept;

  inline request isend(int peer, const_bytes data, tag t);
  inline request irecv(int peer, mutable_bytes data, tag t);
  inline request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t);
  /// Blocks this rank's fiber until `r` completes in virtual time. The
  /// deadline is not used: virtual time cannot stall, a deadlock is detected.
  inline void wait(request& r, deadline);
  /// Host operations on real buffers; no-ops (and phantom workspace) when phantom.
  inline memory_ops memory(const location& where);
  /// `bytes` of phantom memory (phantom runs only): an address range no
  /// one may touch. Slots 0..3 are distinct ranges (e.g. input and output),
  /// shared by every rank.
  inline void* phantom_buffer(std::size_t bytes, int slot = 0);

 private:
  friend class sim_fabric;
  sim_fabric* fab_ = nullptr;
  int rank_ = 0;
};

/// The simulated cluster: a topology, its links, the scheduler, the ranks.
class sim_fabric {
 public:
  explicit sim_fabric(const ddl::topology& topo, sim_options o = {}) : topo_(topo), opts_(o) {
    if (topo.count() == 0) throw invalid_argument("sim_fabric: the topology has no levels");
    n_ = topo.size();
    build_links();
  }
  sim_fabric(const sim_fabric&) = delete;
  sim_fabric& operator=(const sim_fabric&) = delete;
  ~sim_fabric() {
    for (auto& r : phantom_) munmap(r.first, r.second);
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
    body_ = &body;
    fibers_.clear();
    transports_.assign(static_cast<std::size_t>(n_), sim_transport{});
    for (int r = 0; r < n_; ++r) {
      transports_[r].fab_ = this;
      transports_[r].rank_ = r;
      fibers_.emplace_back();
      fibers_.back().rank = r;
      start_fiber(r);
    }
    schedule();
    sim_report rep = report();
    for (auto& fs : fibers_) munmap(fs.stack, fs.stack_size);
    fibers_.clear();  // fibers left suspended (idle progress fibers) are abandoned with their stacks
    body_ = nullptr;
    if (first_error_) std::rethrow_exception(std::exchange(first_error_, nullptr));
    return rep;
  }

 private:
  friend class sim_transport;

  // --- ranks as fibers ------------------------------------------------------
  // Fibers 0..n-1 are the ranks' own; later ones are spawned by a rank
  // (`cooperative()`) and do not keep the run alive.
  enum class fstate : std::uint8_t { ready, blocked, done };
  struct fiber_state {
    ucontext_t ctx{};
    void* stack = nullptr;
    std::size_t stack_size = 0;
    fstate state = fstate::ready;
    bool woken = false;        ///< queued to run
    bool timer_fired = false;  ///< `compute`'s time has passed
    int rank = 0;
    double end = 0;
    std::function<void()> body;  ///< spawned fibers; empty: the rank's own
    std::exception_ptr error;
  };
  /// `cooperative_scheduler` over this fabric's fibers.
  class fiber_scheduler final : public cooperative_scheduler {
   public:
    explicit fiber_scheduler(sim_fabric* f) : f_(f) {}
    int spawn(std::function<void()> body) override { return f_->spawn(std::move(body)); }
    int current() const override { return f_->running_; }
    void suspend() override { f_->block(f_->running_); }
    void resume(int id) override { f_->wake(id); }
    void yield() override {
      f_->yielders_.push_back(f_->running_);
      f_->block(f_->running_);
    }

   private:
    sim_fabric* f_;
  };

  static sim_fabric*& current_fabric() {
    static thread_local sim_fabric* f = nullptr;
    return f;
  }
  static void fiber_entry() {
    sim_fabric* f = current_fabric();
    const int r = f->running_;
    fiber_state& fs = f->fibers_[static_cast<std::size_t>(r)];  // a deque: stays put as fibers are added
    try {
      if (fs.body) fs.body();
      else (*f->body_)(f->transports_[static_cast<std::size_t>(fs.rank)]);
    } catch (...) {
      fs.error = std::current_exception();
      if (!f->first_error_) f->first_error_ = fs.error;
      f->failed_ = true;
      f->wake_all_blocked();
    }
    fs.state = fstate::done;
    fs.end = f->now_;
    // returning resumes the scheduler (uc_link)
  }

  int spawn(std::function<void()> body) {
    if (running_ < 0) throw invalid_argument("sim_transport: fibers are spawned from a rank's fiber");
    const int rank = fibers_[static_cast<std::size_t>(running_)].rank;
    fibers_.emplace_back();
    fibers_.back().rank = rank;
    fibers_.back().body = std::move(body);
    const int id = static_cast<int>(fibers_.size()) - 1;
    start_fiber(id);
    return id;
  }

  void start_fiber(int r) {
    fiber_state& rs = fibers_[static_cast<std::size_t>(r)];
    const std::size_t page = 4096;
    rs.stack_size = (opts_.stack_bytes + page - 1) / page * page + page;
    rs.stack = mmap(nullptr, rs.stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
    if (rs.stack == MAP_FAILED) throw transport_error("sim_fabric: cannot map a fiber stack");
    mprotect(rs.stack, page, PROT_NONE);  // guard page: an overflow faults
    getcontext(&rs.ctx);
    rs.ctx.uc_stack.ss_sp = rs.stack;
    rs.ctx.uc_stack.ss_size = rs.stack_size;
    rs.ctx.uc_link = &sched_ctx_;
    makecontext(&rs.ctx, &sim_fabric::fiber_entry, 0);
    wake(r);
  }

  void wake(int r) {
    fiber_state& rs = fibers_[static_cast<std::size_t>(r)];
    if (rs.state == fstate::done || rs.woken) return;
    rs.woken = true;
    ready_.push_back(r);
  }
  void wake_all_blocked() {
    for (std::size_t r = 0; r < fibers_.size(); ++r)
      if (fibers_[r].state == fstate::blocked) wake(static_cast<int>(r));
  }
  void wake_yielders() {
    for (int f : yielders_) wake(f);
    yielders_.clear();
  }
  /// From a fiber: give the CPU back to the scheduler until woken.
  void block(int r) {
    fiber_state& fs = fibers_[static_cast<std::size_t>(r)];
    fs.state = fstate::blocked;
    swapcontext(&fs.ctx, &sched_ctx_);
  }
  /// From a fiber: let `seconds` of virtual time pass for it.
  void compute(double seconds) {
    if (!(seconds >= 0) || seconds > 1e9)
      throw invalid_argument("sim_transport::compute: " + std::to_string(seconds) +
                             " s is not a duration (0 to 1e9 seconds)");
    const int f = running_;
    fibers_[static_cast<std::size_t>(f)].timer_fired = false;
    push(event::timer, now_ + seconds, static_cast<std::uint32_t>(f), 0);
    while (!fibers_[static_cast<std::size_t>(f)].timer_fired) block(f);
  }

  void schedule() {
    current_fabric() = this;
    for (;;) {
      while (!ready_.empty()) {
        const int r = ready_.front();
        ready_.pop_front();
        fiber_state& rs = fibers_[static_cast<std::size_t>(r)];
        rs.woken = false;
        if (rs.state == fstate::done) continue;
        rs.state = fstate::ready;
        running_ = r;
        swapcontext(&sched_ctx_, &rs.ctx);
        running_ = -1;
      }
      if (events_.empty()) {
        // Fibers polling with nothing in flight: let them look again (what
        // they poll may have finished without a message), a few times.
        if (!yielders_.empty() && idle_rounds_++ < 3) {
          wake_yielders();
          continue;
        }
        bool any = false;
        for (int r = 0; r < n_; ++r)
          if (fibers_[static_cast<std::size_t>(r)].state != fstate::done) any = true;
        if (!any) break;
        deadlocked_ = true;  // every live rank waits on something that cannot come
        wake_all_blocked();
        wake_yielders();
        continue;
      }
      const event e = events_.top();
      events_.pop();
      now_ = e.time;
      idle_rounds_ = 0;
      if (e.kind == event::timer) {
        fibers_[e.msg].timer_fired = true;
        wake(static_cast<int>(e.msg));
      } else if (e.kind == event::activate) {
        activate(e.msg);
      } else if (msgs_[e.msg].version == e.version && msgs_[e.msg].live) {
        complete(e.msg);
      }
      wake_yielders();
    }
    current_fabric() = nullptr;
  }

  // --- operations, matching, messages ---------------------------------------
  struct op_rec {
    std::uint32_t gen = 0;
    bool used = false, send = false, fused = false, done = false, cancelled = false;
    int rank = 0, peer = 0;
    int fiber = 0;  // the fiber that posted it (woken when it completes)
    tag tg = 0;
    std::size_t bytes = 0;
    const std::byte* src = nullptr;  // send: data
    std::byte* dst = nullptr;        // recv: destination
    const std::byte* local = nullptr;
    reduction red{};
    std::uint32_t msg = 0;
    bool matched = false;
    std::string error;
  };
  struct msg_rec {
    bool live = false;
    std::uint32_t send_op = 0, recv_op = 0, conn = 0, version = 0;
    std::size_t bytes = 0;
    double remaining = 0, rate = 0, last = 0;
    bool active = false;
  };
  struct conn_rec {
    std::vector<std::uint32_t> links;  // resource indices
    std::vector<std::uint32_t> msgs;   // active messages
    int top = 0;                       // highest level crossed
    double latency = 0, rate = 0;
    std::uint64_t stamp = 0;
  };
  struct link_rec {
    sim_link info;
    double per_conn = 0;                // one link's bandwidth
    std::vector<std::uint32_t> conns;   // active connections
    double busy_since = 0;
  };
  struct event {
    enum kind_t : std::uint8_t { activate, finish, timer } kind;  // timer: `msg` is a fiber
    double time;
    std::uint64_t seq;
    std::uint32_t msg, version;
    bool operator>(const event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
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
    msgs_.clear();
    free_msgs_.clear();
    match_.clear();
    conns_.clear();
    conn_index_.clear();
    events_ = decltype(events_)();
    for (auto& l : links_) {
      l.info.bytes = l.info.busy_seconds = 0;
      l.conns.clear();
    }
    ready_.clear();
    yielders_.clear();
    idle_rounds_ = 0;
    top_.assign(topo_.count(), {0, 0.0});
    top_seconds_.assign(topo_.count(), 0.0);
    now_ = 0;
    seq_ = 0;
    stamp_ = 0;
    failed_ = deadlocked_ = false;
    messages_ = 0;
    bytes_ = 0;
  }

  // A fresh record from `pool` (reusing freed ones), its generation bumped
  // so stale handles to the old occupant are recognised.
  template <class Rec, class Bump>
  static std::uint32_t take(std::vector<Rec>& pool, std::vector<std::uint32_t>& free, Bump bump) {
    std::uint32_t i;
    if (!free.empty()) {
      i = free.back();
      free.pop_back();
    } else {
      i = static_cast<std::uint32_t>(pool.size());
      pool.emplace_back();
    }
    const std::uint32_t g = bump(pool[i]) + 1;
    pool[i] = Rec{};
    bump(pool[i]) = g;
    return i;
  }

  std::uint32_t new_op() {
    const std::uint32_t i = take(ops_, free_ops_, [](op_rec& o) -> std::uint32_t& { return o.gen; });
    ops_[i].used = true;
    return i;
  }
  void free_op(std::uint32_t i) {
    ops_[i].used = false;
    ++ops_[i].gen;
    free_ops_.push_back(i);
  }

  sim_transport::request post(op_rec proto) {
    if (proto.peer < 0 || proto.peer >= n_ || proto.peer == proto.rank)
      throw invalid_argument("sim_transport: rank " + std::to_string(proto.rank) + " addressed peer " +
                             std::to_string(proto.peer) + " of " + std::to_string(n_));
    if (failed_) throw transport_error("sim_transport: another rank failed; abandoning the collective");
    const std::uint32_t i = new_op();
    const std::uint32_t gen = ops_[i].gen;
    proto.gen = gen;
    proto.used = true;
    proto.fiber = running_;
    ops_[i] = std::move(proto);
    const op_rec& o = ops_[i];
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
  static match_key key_of(const op_rec& o) {
    const int src = o.send ? o.rank : o.peer, dst = o.send ? o.peer : o.rank;
    return {static_cast<std::uint64_t>(src) << 32 | static_cast<std::uint32_t>(dst), o.tg};
  }
  sim_transport::request make_request(std::uint32_t i) {
    sim_transport::request r;
    r.fab_ = this;
    r.op_ = i;
    r.gen_ = ops_[i].gen;
    return r;
  }

  void start_message(std::uint32_t s, std::uint32_t r) {
    op_rec &so = ops_[s], &ro = ops_[r];
    if (so.bytes != ro.bytes) {
      const std::string e = "sim_transport: rank " + std::to_string(so.rank) + " sent " + std::to_string(so.bytes) +
                            " bytes, rank " + std::to_string(ro.rank) + " expected " + std::to_string(ro.bytes) +
                            " (tag " + std::to_string(so.tg) + ")";
      so.error = ro.error = e;
      so.done = ro.done = true;
      wake(so.fiber);
      wake(ro.fiber);
      return;
    }
    const std::uint32_t m = take(msgs_, free_msgs_, [](msg_rec& rec) -> std::uint32_t& { return rec.version; });
    msg_rec& mr = msgs_[m];
    mr.live = true;
    mr.send_op = s;
    mr.recv_op = r;
    mr.bytes = so.bytes;
    mr.remaining = static_cast<double>(so.bytes);
    mr.conn = connection(so.rank, ro.rank);
    so.matched = ro.matched = true;
    so.msg = ro.msg = m;
    ++messages_;
    bytes_ += static_cast<double>(so.bytes);
    push(event::activate, now_ + conns_[mr.conn].latency, m, mr.version);
  }

  void push(event::kind_t k, double t, std::uint32_t m, std::uint32_t v) { events_.push(event{k, t, seq_++, m, v}); }

  void activate(std::uint32_t m) {
    msg_rec& mr = msgs_[m];
    if (!mr.live) return;
    if (mr.bytes == 0) {
      complete(m);
      return;
    }
    conn_rec& c = conns_[mr.conn];
    mr.active = true;
    mr.last = now_;
    c.msgs.push_back(m);
    if (c.msgs.size() == 1) {
      join(mr.conn);
    } else {
      refresh_conn(mr.conn, false);
    }
  }

  void complete(std::uint32_t m) {
    msg_rec& mr = msgs_[m];
    mr.live = false;
    if (mr.active) {
      conn_rec& c = conns_[mr.conn];
      c.msgs.erase(std::find(c.msgs.begin(), c.msgs.end(), m));
      for (std::uint32_t l : c.links) links_[l].info.bytes += static_cast<double>(mr.bytes);
      if (c.msgs.empty()) leave(mr.conn);
      else refresh_conn(mr.conn, false);
    }
    op_rec &so = ops_[mr.send_op], &ro = ops_[mr.recv_op];
    if (!so.cancelled && !ro.cancelled && !opts_.phantom && mr.bytes) {
      if (ro.fused) {
        const std::size_t count = mr.bytes / size_of(ro.red.type);
        if (ro.red.received_first) host::reduce(ro.dst, so.src, ro.local, count, ro.red);
        else host::reduce(ro.dst, ro.local, so.src, count, ro.red);
      } else {
        std::memcpy(ro.dst, so.src, mr.bytes);
      }
    }
    if (so.cancelled && !ro.cancelled) ro.error = "sim_transport: the sender cancelled this message";
    so.done = ro.done = true;
    finish_op(mr.send_op);
    finish_op(mr.recv_op);
    ++mr.version;
    free_msgs_.push_back(m);
  }
  void finish_op(std::uint32_t i) {
    op_rec& o = ops_[i];
    if (o.cancelled) free_op(i);
    else wake(o.fiber);
  }

  // --- links and rates -------------------------------------------------------
  void build_links() {
    const std::size_t k = topo_.count();
    link_base_.assign(k, 0);
    int g = 1;
    for (std::size_t l = 0; l < k; ++l) {
      const level& lv = topo_[l];
      link_base_[l] = static_cast<std::uint32_t>(links_.size());
      const int units = n_ / g;
      const int nlinks = lv.links ? lv.links : g;
      for (int u = 0; u < units; ++u)
        for (bool out : {true, false}) {
          link_rec lr;
          lr.info.level = static_cast<int>(l);
          lr.info.unit = u;
          lr.info.egress = out;
          lr.info.capacity = lv.bandwidth * nlinks;
          lr.per_conn = lv.bandwidth;
          links_.push_back(lr);
        }
      g *= lv.extent;
    }
  }

  std::uint32_t connection(int a, int b) {
    const std::uint64_t key = static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(n_) + static_cast<std::uint64_t>(b);
    auto it = conn_index_.find(key);
    if (it != conn_index_.end()) return it->second;
    conn_rec c;
    int g = 1, ca = a, cb = b, top = 0;
    for (std::size_t l = 0; l < topo_.count(); ++l) {
      if (ca % topo_[l].extent != cb % topo_[l].extent) top = static_cast<int>(l);
      ca /= topo_[l].extent;
      cb /= topo_[l].extent;
    }
    for (int l = 0; l <= top; ++l) {
      const level& lv = topo_[static_cast<std::size_t>(l)];
      if (lv.extent > 1) {
        const std::uint32_t base = link_base_[static_cast<std::size_t>(l)];
        c.links.push_back(base + static_cast<std::uint32_t>(2 * (a / g)));
        c.links.push_back(base + static_cast<std::uint32_t>(2 * (b / g) + 1));
        c.latency = std::max(c.latency, lv.latency);
      }
      g *= lv.extent;
    }
    c.top = top;
    const auto idx = static_cast<std::uint32_t>(conns_.size());
    conns_.push_back(std::move(c));
    conn_index_.emplace(key, idx);
    return idx;
  }

  double conn_rate(const conn_rec& c) const {
    double r = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : c.links) {
      const link_rec& lr = links_[l];
      const double share = lr.info.capacity / static_cast<double>(lr.conns.size());
      r = std::min(r, std::min(lr.per_conn, share));
    }
    return r;
  }

  /// Brings a connection's messages to `now_` at the old rate, then
  /// reschedules them at the new one.
  void refresh_conn(std::uint32_t ci, bool recompute) {
    conn_rec& c = conns_[ci];
    const double rate = recompute ? conn_rate(c) : c.rate;
    c.rate = rate;
    if (c.msgs.empty()) return;
    const double per = rate / static_cast<double>(c.msgs.size());
    for (std::uint32_t m : c.msgs) {
      msg_rec& mr = msgs_[m];
      mr.remaining = std::max(0.0, mr.remaining - mr.rate * (now_ - mr.last));
      mr.last = now_;
      mr.rate = per;
      ++mr.version;
      push(event::finish, now_ + mr.remaining / per, m, mr.version);
    }
  }
  void refresh_around(std::uint32_t ci) {
    const std::uint64_t st = ++stamp_;
    for (std::uint32_t l : conns_[ci].links)
      for (std::uint32_t other : links_[l].conns)
        if (conns_[other].stamp != st) {
          conns_[other].stamp = st;
          refresh_conn(other, true);
        }
  }
  void join(std::uint32_t ci) {
    auto& tl = top_[static_cast<std::size_t>(conns_[ci].top)];
    if (tl.first++ == 0) tl.second = now_;
    for (std::uint32_t l : conns_[ci].links) {
      link_rec& lr = links_[l];
      if (lr.conns.empty()) lr.busy_since = now_;
      lr.conns.push_back(ci);
    }
    refresh_around(ci);
  }
  void leave(std::uint32_t ci) {
    auto& tl = top_[static_cast<std::size_t>(conns_[ci].top)];
    if (--tl.first == 0) top_seconds_[static_cast<std::size_t>(conns_[ci].top)] += now_ - tl.second;
    for (std::uint32_t l : conns_[ci].links) {
      link_rec& lr = links_[l];
      lr.conns.erase(std::find(lr.conns.begin(), lr.conns.end(), ci));
      if (lr.conns.empty()) lr.info.busy_seconds += now_ - lr.busy_since;
    }
    refresh_around(ci);
    conns_[ci].rate = 0;
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

  void wait(sim_transport::request& req) {
    if (!req.fab_) return;
    const std::uint32_t i = req.op_;
    for (;;) {
      op_rec& o = ops_[i];
      if (o.done) {
        std::string err = std::move(o.error);
        free_op(i);
        req.fab_ = nullptr;
        if (!err.empty()) throw transport_error(err);
        return;
      }
      if (failed_) throw transport_error("sim_transport: another rank failed; abandoning the collective");
      if (deadlocked_)
        throw timeout_error(o.peer, "simulated network (deadlock: no message can arrive)", "", now_);
      block(running_);
    }
  }

  memory_ops memory_ops_for(const location& where) {
    if (where.space != memory_space::host) throw invalid_argument("sim_transport: buffers are host (or phantom) memory");
    if (!opts_.phantom) return host_memory_ops();
    memory_ops m;
    m.name = "phantom";
    m.ctx = this;
    m.copy = [](void*, std::byte*, const std::byte*, std::size_t) {};
    m.reduce = [](void*, std::byte*, const std::byte*, const std::byte*, std::size_t, reduction) {};
    m.finalize = [](void*, std::byte*, std::size_t, reduction, int) {};
    m.allocate = [](void* f, std::size_t n) { return static_cast<std::byte*>(static_cast<sim_fabric*>(f)->phantom(n, 3)); };
    m.release = [](void*, std::byte*, std::size_t) {};
    return m;
  }

  void* phantom(std::size_t bytes, int slot) {
    if (!opts_.phantom) throw invalid_argument("sim_transport: phantom_buffer needs sim_options::phantom");
    if (slot < 0 || slot > 3) throw invalid_argument("sim_transport: phantom slots are 0..3");
    auto& s = slots_[slot];
    if (bytes > s.second || !s.first) {
      const std::size_t size = std::max<std::size_t>(bytes, 4096);
      void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw transport_error("sim_transport: cannot reserve " + std::to_string(size) + " phantom bytes");
      phantom_.emplace_back(p, size);  // earlier ranges stay reserved: ranks may still hold them
      s = {p, size};
    }
    return s.first;
  }

  sim_report report() const {
    sim_report r;
    r.messages = messages_;
    r.bytes = bytes_;
    for (int k = 0; k < n_; ++k) {
      const double end = fibers_[static_cast<std::size_t>(k)].end;
      r.rank_seconds.push_back(end);
      r.seconds = std::max(r.seconds, end);
    }
    r.levels.assign(topo_.count(), sim_report::level_stats{});
    // Levels in flight about as long (within 5%, e.g. all of a flat ring's)
    // are told apart by bandwidth: the slower one bounds.
    for (std::size_t l = 0; l < topo_.count(); ++l) {
      r.levels[l].top_seconds = top_seconds_[l];
      const auto b = static_cast<std::size_t>(r.bound_level);
      const double tb = top_seconds_[b], tl = top_seconds_[l];
      if (tl > 1.05 * tb || (tl >= 0.95 * tb && tl > 0 && topo_[l].bandwidth < topo_[b].bandwidth))
        r.bound_level = static_cast<int>(l);
    }
    r.busiest.level = r.bound_level;
    for (const auto& l : links_) {
      r.links.push_back(l.info);
      auto& pl = r.levels[static_cast<std::size_t>(l.info.level)];
      if (l.info.egress) pl.bytes += l.info.bytes;
      if (r.seconds > 0) pl.busiest = std::max(pl.busiest, l.info.busy_seconds / r.seconds);
      if (l.info.level == r.bound_level && l.info.busy_seconds > r.busiest.busy_seconds) r.busiest = l.info;
    }
    return r;
  }

  ddl::topology topo_;
  sim_options opts_;
  int n_ = 0;
  std::function<void(sim_transport&)>* body_ = nullptr;
  std::deque<fiber_state> fibers_;  // a deque: a suspended fiber's context must not move
  std::vector<sim_transport> transports_;
  fiber_scheduler scheduler_{this};
  ucontext_t sched_ctx_{};
  std::deque<int> ready_;
  std::vector<int> yielders_;  // fibers in `yield`, resumed after the next event
  int idle_rounds_ = 0;
  int running_ = -1;
  double now_ = 0;
  std::uint64_t seq_ = 0, stamp_ = 0;
  bool failed_ = false, deadlocked_ = false;
  std::exception_ptr first_error_;
  std::size_t messages_ = 0;
  double bytes_ = 0;
  std::vector<op_rec> ops_;
  std::vector<std::uint32_t> free_ops_;
  std::vector<msg_rec> msgs_;
  std::vector<std::uint32_t> free_msgs_;
  std::unordered_map<match_key, match_queues, match_hash> match_;
  std::vector<conn_rec> conns_;
  std::unordered_map<std::uint64_t, std::uint32_t> conn_index_;
  std::vector<link_rec> links_;
  std::vector<std::uint32_t> link_base_;
  std::vector<std::pair<int, double>> top_;  // per level: connections active with it as top, since when
  std::vector<double> top_seconds_;
  std::priority_queue<event, std::vector<event>, std::greater<event>> events_;
  std::pair<void*, std::size_t> slots_[4]{};
  std::vector<std::pair<void*, std::size_t>> phantom_;
};

// --- sim_transport members ---------------------------------------------------
inline int sim_transport::size() const noexcept { return fab_->n_; }
inline const ddl::topology& sim_transport::topology() const noexcept { return fab_->topo_; }
inline double sim_transport::now() const noexcept { return fab_->now_; }

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
inline void sim_transport::wait(request& r, deadline) { fab_->wait(r); }
inline cooperative_scheduler* sim_transport::cooperative() noexcept { return &fab_->scheduler_; }
inline void sim_transport::compute(double seconds) { fab_->compute(seconds); }
inline memory_ops sim_transport::memory(const location& where) { return fab_->memory_ops_for(where); }
inline void* sim_transport::phantom_buffer(std::size_t bytes, int slot) { return fab_->phantom(bytes, slot); }

inline void sim_transport::request_fields::withdraw() noexcept {
  if (fab_->ops_[op_].gen == gen_) fab_->cancel(op_);
}

}  // namespace ddl
