#pragma once
/// \file
/// What a `ddl::communicator` is made of below its collectives
/// (`detail::communicator_core`): the transport, strategy, options and
/// reusable workspace; the progress engine that runs calls in issue order
/// (blocking calls queue behind asynchronous ones); call numbers and
/// stamps, so messages of different calls never mix; the call check
/// (`DDL_CHECK`); and calls that bounce through host memory on a staged
/// transport.
#include <array>
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ddl/core/buffer.hpp"
#include "ddl/core/config.hpp"
#include "ddl/core/error.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/comm/arguments.hpp"
#include "ddl/comm/call_check.hpp"
#include "ddl/comm/progress.hpp"
#include "ddl/comm/workspace.hpp"
#include "ddl/strategy/all_to_all.hpp"
#include "ddl/strategy/broadcast.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/rooted.hpp"
#include "ddl/strategy/concept.hpp"
#include "ddl/strategy/direct.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/strategy/tuning.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/stamp.hpp"


namespace ddl {
namespace detail {

/// What a `ddl::communicator` is made of, below its collectives: the
/// transport, strategy, options and workspace; the progress engine that runs
/// calls in issue order (`run_now`, `submit`); call numbers, stamps and
/// contexts; the call check (`DDL_CHECK`); and calls that bounce through
/// host memory on a staged transport. `collective_jobs` builds the
/// collectives' bodies on it, `communicator` their public calls.
template <class Strategy, class Transport>
class communicator_core {
  static_assert(check_transport<Transport>(), "ddl: communicator needs a Transport (see transport/concept.hpp)");
  static_assert(check_strategy<Strategy, Transport>(), "ddl: communicator needs a Strategy (see strategy/concept.hpp)");

 public:
  using strategy_type = Strategy;
  using transport_type = Transport;
  /// Called when an asynchronous collective has finished (see `all_reduce_async`).
  using completion = std::function<void(std::exception_ptr)>;

  /// \param t the transport; must outlive the communicator.
  /// \param s the strategy (its box, order or topology, where it has one);
  ///        throws `topology_error` on every rank if it does not fit the group.
  /// \param o settings; defaults read `DDL_TIMEOUT`, `DDL_CHUNK_BYTES`, ...
  communicator_core(Transport& t, Strategy s, options o)
      : transport_(&t), strategy_(std::move(s)), opts_(o), stamps_(stamps_in_tags_of(t)) {
    opts_.validate();
    check_options(opts_);
    validate_strategy(strategy_, t, 0);
    if constexpr (bounce::on) {
      host_ = std::make_unique<bounce>(strategy_);
      validate_strategy(host_->strategy, t.host(), 0);
    }
  }
  communicator_core(const communicator_core&) = delete;
  communicator_core& operator=(const communicator_core&) = delete;
  /// Moving finishes the source's pending collectives first.
  communicator_core(communicator_core&& o) noexcept : transport_(o.transport_), strategy_(std::move(o.strategy_)) {
    o.finish_pending();
    take(o);
  }
  communicator_core& operator=(communicator_core&& o) noexcept {
    if (this != &o) {
      finish_pending();
      o.finish_pending();
      transport_ = o.transport_;
      strategy_ = std::move(o.strategy_);
      take(o);
    }
    return *this;
  }
  /// Finishes every pending collective, then releases the workspace.
  ~communicator_core() { finish_pending(); }

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }
  Transport& transport() noexcept { return *transport_; }
  const Strategy& strategy() const noexcept { return strategy_; }

  /// Every candidate the strategy's planner weighed for `bytes` per rank,
  /// best first, with predicted times per phase (strategies with a planner only).
  template <class S = Strategy>
  auto explain(std::size_t bytes) const -> decltype(std::declval<const S&>().explain(bytes)) {
    return strategy_.explain(bytes);
  }
  const options& opts() const noexcept { return opts_; }
  /// Changes settings (after finishing pending collectives); every rank must
  /// use the same chunk size.
  void set_options(const options& o) {
    o.validate();
    check_options(o);
    wait_all();
    opts_ = o;
    if (engine_ && engine_->mode() != progress_mode()) engine_.reset();
  }
  /// Bytes of workspace held now (grown on demand, never shrunk, reused).
  std::size_t workspace_bytes() const noexcept { return work_.size(); }
  /// Grows the workspace up front (in the memory of buffers at `where`), so
  /// no call allocates later.
  void reserve_workspace(std::size_t bytes, const location& where = {}) {
    wait_all();
    work_.use(memory_for(*transport_, where));
    work_.get(bytes);
  }

  /// Where asynchronous collectives progress: `opts().async_progress`, or
  /// `progress::deferred` when the transport must stay on the caller's thread
  /// and has no fibers to offer (`transport/cooperative.hpp`; on the
  /// simulator `progress::thread` means a progress fiber per rank). On a
  /// stream-ordered transport (CUDA) always deferred, and each asynchronous
  /// call is issued at once on the caller's thread (`submit`): it only
  /// queues work on the buffers' stream, so asynchronous is stream order.
  progress progress_mode() const noexcept {
    if constexpr (is_stream_ordered_v<Transport>) return progress::deferred;
    const bool background = progress_thread_allowed(*transport_) || cooperative_of(*transport_) != nullptr;
    return opts_.async_progress == progress::thread && background ? progress::thread : progress::deferred;
  }
  /// Collectives issued and not yet finished: false once every request's
  /// `wait` has returned (or `wait_all`).
  bool pending() const noexcept { return engine_ && engine_->unfinished(); }
  /// Waits until every collective issued so far has finished. Errors stay
  /// with the requests (their `wait` re-throws them).
  void wait_all() noexcept { finish_pending(); }

  /// The levels and link costs collectives outside the strategy (broadcast)
  /// are priced on: the strategy's (`auto_strategy`: `DDL_TOPOLOGY`,
  /// `DDL_PROBE=1`, a cluster's probe), else the transport's (the
  /// simulator), else one level of the transport's default link costs.
  /// (A reference where the strategy or transport keeps one: a broadcast
  /// prices its plan on it every call.)
  decltype(auto) link_topology() const {
    if constexpr (has_topo_v<Strategy>) {
      return strategy_.topo();
    } else if constexpr (has_topology_v<Transport>) {
      return transport_->topology();
    } else {
      return topology::uniform(size(), default_link<Transport>::bandwidth, default_link<Transport>::latency);
    }
  }

 protected:
  // --- argument checks (comm/arguments.hpp), for this group ---------------
  detail::call_arguments args() const { return {rank(), size(), accepts_device_memory_v<Transport>}; }


  // --- the call check (options::check_calls, DDL_CHECK=1) --------------------

  static void check_options(const options& o) {
    if (o.check_calls && accepts_device_memory_v<Transport> && !bounce::on)
      throw invalid_argument("options.check_calls (DDL_CHECK=1) is not available on device transports yet");
  }
  // Whether every call is checked by a round of fingerprints first: asked
  // for (`DDL_CHECK=1`), or the transport's tags cannot carry the call
  // stamps (`stamps_in_tags_of`), so a mismatch is still caught. (A device
  // transport's round runs on its host transport: `verify`.)
  bool checks_calls() const noexcept { return opts_.check_calls || !stamps_; }

  using fingerprint = detail::fingerprint;
  static fingerprint print(const char* collective, std::size_t in, std::size_t out, dtype t, op o, int root = -1) {
    return detail::fingerprint_of(collective, Strategy::name, in, out, t, o, root);
  }

  // Runs `check` (the argument checks). With check_calls, a rejection is
  // traded with the peers in the call's place, so they fail too (naming this
  // rank) and every rank's call sequence stays in step; then it is rethrown.
  template <class Check>
  void checked(fingerprint f, Check&& check) {
    try {
      check();
    } catch (const invalid_argument& e) {
      if (size() > 1) {
        const char* why = without_prefix(e.what());
        if (checks_calls()) {
          f.rejected = 1;
          std::snprintf(f.reason, sizeof f.reason, "%s", why);
        }
        try {
          if (checks_calls()) run_now([this, f] { verify(f); });
          // Without the check the peers would wait for this rank's messages
          // until their deadline: tell them (the group is given up everywhere).
          else run_now([this, reason = std::string(why)] { give_up(reason); });
        } catch (const error&) {
          // a peer's rejection or a mismatch: this rank's own error is the one to report
        }
      }
      throw;
    }
  }

  // The transport the check's host-memory messages go through: a device
  // transport's host transport, where it has one.
  auto& check_transport() {
    if constexpr (bounce::on) return transport_->host();
    else return *transport_;
  }
  // The check owns a call number (and its tags) of its own, on every rank.
  call_context check_context(const char* collective) {
    call_context c;
    c.collective = collective;
    c.strategy = Strategy::name;
    c.opts = &opts_;
    c.mem = &work_.ops();
    c.base_tag = detail::call_tag(++sequence_, 0);  // a call of ddl's own: the same stamp everywhere
    return c;
  }

  // An all-to-all's check: the call itself (`verify`), then every pair's
  // counts (each rank tells each peer what it sends it and expects from it),
  // then whether any rank found a pair that disagrees, so every rank fails
  // alike and nothing is sent.
  void verify_parts(const char* name, dtype type, const std::vector<std::size_t>& sends,
                    const std::vector<std::size_t>& recvs) {
    fingerprint f = print(name, 0, 0, type, op::sum);
    verify(f);
    if (size() == 1) return;
    const call_context c = check_context(name);
    const auto n = static_cast<std::size_t>(size()), r = static_cast<std::size_t>(rank());
    std::vector<std::uint64_t> mine(2 * n), theirs(2 * n);
    for (std::size_t p = 0; p < n; ++p) {
      mine[2 * p] = sends[p];
      mine[2 * p + 1] = recvs[p];
    }
    const std::size_t pair = 2 * sizeof(std::uint64_t);
    detail::exchange_parts(
        check_transport(),
        [&](int p) { return const_bytes{reinterpret_cast<const std::byte*>(&mine[2 * static_cast<std::size_t>(p)]), pair}; },
        [&](int p) { return mutable_bytes{reinterpret_cast<std::byte*>(&theirs[2 * static_cast<std::size_t>(p)]), pair}; },
        c, c.base_tag + tag_offset::check, "call check");
    const std::string why = detail::parts_disagreement(sends, recvs, theirs, r);
    if (!why.empty()) {
      f.rejected = 1;
      std::snprintf(f.reason, sizeof f.reason, "%s", why.c_str());
    }
    verify(f);
    if (!why.empty()) throw invalid_argument(std::string(name) + ": " + why + " (DDL_CHECK)");
  }

  // Trades `mine` with every rank and throws the same error on every rank
  // (none on a rank that rejected its own call: it rethrows its own error)
  // when a rank rejected its arguments or two ranks disagree.
  void verify(const fingerprint& mine) {
    const call_context c = check_context(mine.collective);
    if (size() == 1) return;
    fingerprints_.resize(static_cast<std::size_t>(size()));
    fingerprints_[static_cast<std::size_t>(rank())] = mine;
    detail::exchange_with_all(check_transport(), reinterpret_cast<std::byte*>(fingerprints_.data()), sizeof(fingerprint),
                              c, c.base_tag + tag_offset::check, "call check");
    detail::judge_fingerprints(fingerprints_, static_cast<std::size_t>(rank()),
                               std::string(mine.collective) + " call " + std::to_string(sequence_));
  }

  // --- running them ----------------------------------------------------------

  // A blocking call runs here when nothing is queued (no hand-off cost);
  // otherwise it queues behind the pending ones, keeping issue order.
  template <class Job>
  void run_now(Job&& job) {
    auto g = guarded(std::forward<Job>(job));
    if (!engine_) {
      g();
      return;
    }
    if (engine_->idle()) {
      engine_->run_inline(g);
      return;
    }
    auto op = engine().submit("blocking", std::move(g));
    collective_request(engine_, std::move(op)).wait();
  }
  template <class Job>
  collective_request submit(const char* what, Job&& job, completion done) {
    auto op = engine().submit(what, guarded(std::forward<Job>(job)), std::move(done));
    collective_request r(engine_, std::move(op));
    // Stream-ordered: queue the work on the stream now (errors stay with the
    // request); the result is there once the stream gets that far.
    if constexpr (is_stream_ordered_v<Transport>) (void)r.test();
    return r;
  }
  // A call that fails in the transport (a size mismatch, a lost message)
  // gives the group up, so the peers learn it from this rank at once. A
  // timeout does not: every rank has its own deadline and names its own
  // awaited peer (a stalled rank is not a failed one until the deadline).
  template <class Job>
  auto guarded(Job&& job) {
    return [this, job = std::forward<Job>(job)](auto&&... args) mutable {
      return guard([&]() -> decltype(auto) { return job(std::forward<decltype(args)>(args)...); });
    };
  }
  // Runs `f` as `guarded` does.
  template <class F>
  decltype(auto) guard(F&& f) {
    try {
      return f();
    } catch (const mismatch_error& e) {
      // a peer's message of this call under another stamp: the group is
      // out of step (DDL_CHECK's own mismatches leave it usable)
      if (detail::is_mismatch_text(e.what())) give_up(e.what());
      throw;
    } catch (const transport_error& e) {
      give_up(e.what());
      // a peer's notice of a stamp mismatch is this rank's mismatch too
      if (detail::is_mismatch_text(e.what())) throw mismatch_error(without_prefix(e.what()));
      throw;
    }
  }
  static const char* without_prefix(const char* what) { return std::strncmp(what, "ddl: ", 5) == 0 ? what + 5 : what; }
  // The transport's `abort`, where it has one (on the thread that drives it).
  void give_up(const std::string& why) noexcept {
    if constexpr (has_abort_v<Transport>) {
      try {
        transport_->abort(without_prefix(why.c_str()));
      } catch (...) {
      }
    } else {
      (void)why;
    }
  }
  // The engine, made anew while idle when where calls may progress changed
  // (an `mpi_transport` allows a progress thread only while it is the
  // process's only one under `MPI_THREAD_SERIALIZED`).
  detail::progress_engine& engine() {
    if (engine_ && engine_->idle() && engine_->mode() != progress_mode()) engine_.reset();
    if (!engine_) engine_ = std::make_shared<detail::progress_engine>(progress_mode(), cooperative_of(*transport_), nap());
    return *engine_;
  }
  void finish_pending() noexcept {
    if (engine_) engine_->drain_quietly();
  }
  // How the engine waits for a parked transfer to move: the transport's
  // `await_progress` where it has one.
  std::function<void()> nap() {
    if constexpr (has_await_progress_v<Transport>) {
      return [t = transport_] { t->await_progress(); };
    } else {
      return {};
    }
  }
  void take(communicator_core& o) noexcept {
    opts_ = o.opts_;
    stamps_ = o.stamps_;
    sequence_ = o.sequence_;
    work_.take(o.work_);
    host_ = std::move(o.host_);
    engine_.reset();  // the source's engine stays with its requests; ours starts on demand
  }

  // Strategies validate against the group size, or against the transport
  // itself when they need more (auto_strategy takes its default link costs).
  template <class S, class T>
  static auto validate_strategy(S& s, T& t, int) -> decltype(s.validate(t), void()) {
    s.validate(t);
  }
  template <class S, class T>
  static void validate_strategy(S& s, T& t, long) {
    s.validate(t.size());
  }


  template <class T = Transport>
  std::size_t scratch_bytes(dtype t) const {
    if constexpr (has_fused_reduce_v<T>) {
      (void)t;
      return 0;
    } else {
      return opts_.pipeline_depth * detail::chunk_size(size_of(t), opts_);
    }
  }

  // The call's stamp (`transport/stamp.hpp`): its fingerprint, in every tag.
  static std::uint16_t stamp(detail::call_kind k, std::size_t in, std::size_t out, dtype t, op o, int root = -1) {
    return detail::make_stamp(k, t, o, in, out, root, Strategy::name);
  }
  call_context context(const char* collective, const location& where, dtype t, op o, std::size_t extra,
                       std::uint16_t stamp) {
    work_.use(memory_for(*transport_, where));
    const std::size_t scratch = scratch_bytes(t);
    return context_in(work_.ops(), work_.get(scratch + extra), scratch, collective, t, o, stamp);
  }
  call_context context_in(const memory_ops& mem, std::byte* workspace, std::size_t scratch, const char* collective,
                          dtype t, op o, std::uint16_t stamp) {
    call_context c;
    c.mem = &mem;
    c.collective = collective;
    c.strategy = Strategy::name;
    c.red = reduction{t, o};
    c.opts = &opts_;
    c.base_tag = detail::call_tag(++sequence_, stamp);
    c.scratch = workspace;
    c.scratch_bytes = scratch;
    c.work = c.scratch + scratch;
    return c;
  }

  // --- calls that bounce (`has_host_bounce_v`: `staged_transport`) ----------

  using bounce = detail::bounce_side<Strategy, Transport>;
  // A call on the host transport: host memory, the host side's workspace,
  // and a stamp of its own (a rank that bounces never combines messages with
  // one that does not: they disagree on the "strategy").
  call_context bounce_context(const char* collective, dtype t, op o, std::size_t extra, std::uint16_t stamp) {
    const std::size_t scratch = scratch_bytes<typename bounce::host_transport>(t);
    return context_in(host_->work.ops(), host_->work.get(scratch + extra), scratch, collective, t, o,
                      static_cast<std::uint16_t>(stamp ^ detail::bounce_stamp_bit));
  }
  // The host image of a call's buffers: device buffers are copied into the
  // transport's bounce buffer (at the byte offset their place in the call
  // gives them) and back; host buffers are used where they lie.
  class bounced {
   public:
    bounced(communicator_core& c, std::size_t bytes)
        : c_(c),
          bytes_(bytes),
          until_(std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(c.opts_.timeout)) {}
    // Where `v` lies on the host for the call (the bounce buffer is taken
    // only when a buffer is on the device).
    std::byte* at(const const_buffer_view& v, std::size_t offset) {
      if (on_host(v)) return const_cast<std::byte*>(v.byte_data());
      if (!base_) base_ = c_.transport_->bounce_buffer(bytes_);
      return base_ + offset;
    }
    // As `at`, with the device buffer's contents copied there first.
    const std::byte* load(const const_buffer_view& v, std::size_t offset) {
      std::byte* h = at(v, offset);
      if (!on_host(v)) c_.transport_->bounce_copy(h, v.byte_data(), v.bytes(), v.where, until_);
      return h;
    }
    // Copies the call's result back into a device buffer `v`.
    void store(const buffer_view& v, std::size_t offset) {
      if (!on_host(v)) c_.transport_->bounce_copy(v.byte_data(), at(v, offset), v.bytes(), v.where, until_);
    }

   private:
    static bool on_host(const const_buffer_view& v) { return v.where.space == memory_space::host; }
    communicator_core& c_;
    std::size_t bytes_;
    std::byte* base_ = nullptr;
    deadline until_;
  };


  Transport* transport_;
  Strategy strategy_;
  options opts_;
  bool stamps_ = true;  // the transport's tags carry the call stamps (`checks_calls`)
  using broadcast_tuner = detail::measured_choice<broadcast_plan>;
  broadcast_tuner broadcasts_;  // broadcast's measured choices
  std::uint64_t sequence_ = 0;
  std::vector<fingerprint> fingerprints_;  // the call check's table, reused
  // In the memory of the buffers being reduced: a call on another kind of
  // memory (host after device) releases and re-allocates it.
  detail::workspace_memory work_;
  // Created by the first asynchronous call (or a blocking one behind it);
  // shared with the requests so one may outlive the communicator.
  std::shared_ptr<detail::progress_engine> engine_;
  std::unique_ptr<bounce> host_;  // calls that bounce (none on other transports)
};

}  // namespace detail
}  // namespace ddl
