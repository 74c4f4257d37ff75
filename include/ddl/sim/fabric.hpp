#pragma once
/// \file
/// `sim_fabric`: the simulated cluster behind `sim_transport` (the model is
/// in `sim/transport.hpp`'s file comment): the ranks' fibers and the
/// discrete-event loop, the operations they post and how sends meet
/// receives, waiting and cancelling, and the host memory operations whose
/// reads of a peer's stage travel over the network. Then the definitions of
/// `sim_transport`'s members.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/reduce/host.hpp"
#include "ddl/sim/fibers.hpp"
#include "ddl/sim/memory.hpp"
#include "ddl/sim/network.hpp"
#include "ddl/sim/operations.hpp"
#include "ddl/sim/transport.hpp"
#include "ddl/topology/topology.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {

/// The simulated cluster: a topology, its network, the ranks' fibers, and
/// the operations they post.
class sim_fabric {
 public:
  explicit sim_fabric(const ddl::topology& topo, sim_options o = {})
      : topo_(checked(topo)), opts_(o), n_(topo.size()), net_(topo_, clock_), fibers_(o.stack_bytes) {
    if (o.shared_levels < 0 || static_cast<std::size_t>(o.shared_levels) > topo_.count())
      throw invalid_argument("sim_options.shared_levels is " + std::to_string(o.shared_levels) + "; the topology has " +
                             std::to_string(topo_.count()) + " levels");
    int unit = 1;
    for (int l = 0; l < o.shared_levels; ++l) unit *= topo_[static_cast<std::size_t>(l)].extent;
    mem_.reset(n_, o.shared_levels > 0 ? unit : 0, o.phantom);
  }
  sim_fabric(const sim_fabric&) = delete;
  sim_fabric& operator=(const sim_fabric&) = delete;

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
        mismatch_why_ = ops_.stamp_disagreement();
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
  using op_rec = detail::sim_op;

  void reset() {
    ops_.clear();
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

  // A new record holding `proto`, owned by the running fiber.
  std::uint32_t record(op_rec proto, bool posted = false) { return ops_.record(std::move(proto), fibers_.running(), posted); }
  void free_op(std::uint32_t i) { ops_.free(i); }
  sim_transport::request post(op_rec proto) {
    const bool from_any = !proto.send && proto.peer == -1;
    if (!from_any && (proto.peer < 0 || proto.peer >= n_ || proto.peer == proto.rank))
      throw invalid_argument("sim_transport: rank " + std::to_string(proto.rank) + " addressed peer " +
                             std::to_string(proto.peer) + " of " + std::to_string(n_));
    if (failed_) throw transport_error(failed_why_);
    const std::uint32_t i = record(std::move(proto), true);
    if (const auto met = ops_.match(i)) start_message(met->first, met->second);
    return make_request(i);
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
    if (!so.cancelled && !ro.cancelled && so.bytes && (!opts_.phantom || (!mem_.phantom_at(so.src) && !mem_.phantom_at(ro.dst)))) {
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
      ops_.unqueue(i);
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
      return f.opts_.phantom ? static_cast<std::byte*>(f.mem_.phantom(n, 3)) : new std::byte[n];
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
  detail::sim_operations ops_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> msg_ops_;  // per network message: its send and receive ops
  static constexpr std::uint32_t read_flow = ~std::uint32_t{0};  // msg_ops_: a read, not a send
  detail::sim_memory mem_;  // phantom ranges and the ranks' stages
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
  if (!mem_.any_stage() || bytes == 0) return !opts_.phantom;
  const int me = static_cast<sim_transport*>(t)->rank_;
  std::vector<std::uint32_t> flows;
  for (int k = 0; k < n; ++k) {
    const int owner = mem_.stage_owner(src[k], bytes);
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

inline std::byte* sim_transport::stage(std::size_t bytes) { return fab_->mem_.stage(rank_, bytes); }
inline const std::byte* sim_transport::peer_stage(int peer, std::size_t bytes) {
  if (peer < 0 || peer >= fab_->n_ || !fab_->mem_.same_unit(rank_, peer))
    throw transport_error("sim_transport: rank " + std::to_string(rank_) + " cannot read rank " + std::to_string(peer) +
                          "'s memory: no unit of the shared levels (sim_options::shared_levels = " +
                          std::to_string(fab_->opts_.shared_levels) + ") holds both");
  const detail::sim_memory::stage_rec& s = fab_->mem_.stage_of(peer);
  if (s.size < bytes)
    throw transport_error("sim_transport: rank " + std::to_string(peer) + "'s stage holds " + std::to_string(s.size) +
                          " bytes; rank " + std::to_string(rank_) + " asked for " + std::to_string(bytes));
  return s.base;
}
inline bool sim_transport::stages_shared() const { return fab_->mem_.one_unit(); }
inline bool sim_transport::stages_shared_among(int base, int stride, int size) const {
  for (int i = 1; i < size; ++i)
    if (!fab_->mem_.same_unit(base, base + i * stride)) return false;
  return fab_->opts_.shared_levels > 0;
}
inline void* sim_transport::phantom_buffer(std::size_t bytes, int slot) { return fab_->mem_.phantom(bytes, slot); }

inline void sim_transport::request_fields::withdraw() noexcept {
  if (fab_->ops_[op_].gen == gen_) fab_->cancel(op_);
}

}  // namespace ddl
