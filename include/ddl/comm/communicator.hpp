#pragma once
/// \file
/// `ddl::communicator<Strategy, Transport>`: the user-facing collectives,
/// blocking and asynchronous. It checks arguments on the caller's thread
/// (clear `ddl::invalid_argument` on misuse, thrown by the call itself), owns
/// the reusable workspace, numbers calls so their messages never mix, and
/// hands the strategy raw, validated pointers. Asynchronous calls run on the
/// communicator's progress engine (`comm/progress.hpp`) in issue order;
/// blocking calls issued meanwhile queue behind them.
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

/// Collectives over the ranks of a transport, with the algorithm chosen by
/// `Strategy` at compile time.
/// \tparam Strategy e.g. `ddl::ring`
/// \tparam Transport a model of the Transport concept, e.g. `ddl::local_transport`
/// \pre every rank calls the same collectives in the same order with the
///      same count, dtype and op (as with MPI). One thread at a time calls a
///      communicator. Several communicators may share one transport (each
///      call's stamp keeps their messages apart) while their calls never
///      run at once: each communicator's progress engine drives the
///      transport on its own thread, so asynchronous calls of one must have
///      completed before another runs a call (nothing checks this; a
///      transport serves one thread at a time).
/// Example:
/// \code
///   ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
///   comm.all_reduce(ddl::host_view(grads), ddl::op::avg);
///   auto r = comm.all_reduce_async(ddl::host_view(more), ddl::op::avg);
///   ...                      // compute while it runs
///   r.wait();
/// \endcode
template <class Strategy, class Transport>
class communicator {
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
  communicator(Transport& t, Strategy s, options o)
      : transport_(&t), strategy_(std::move(s)), opts_(o), stamps_(stamps_in_tags_of(t)) {
    opts_.validate();
    check_options(opts_);
    validate_strategy(strategy_, t, 0);
    if constexpr (bounce::on) {
      host_ = std::make_unique<bounce>(strategy_);
      validate_strategy(host_->strategy, t.host(), 0);
    }
  }
  template <class S = Strategy, std::enable_if_t<std::is_default_constructible_v<S>, int> = 0>
  explicit communicator(Transport& t, options o = options::from_env()) : communicator(t, Strategy{}, o) {}
  communicator(Transport& t, Strategy s) : communicator(t, std::move(s), options::from_env()) {}
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  /// Moving finishes the source's pending collectives first.
  communicator(communicator&& o) noexcept : transport_(o.transport_), strategy_(std::move(o.strategy_)) {
    o.finish_pending();
    take(o);
  }
  communicator& operator=(communicator&& o) noexcept {
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
  ~communicator() { finish_pending(); }

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

  // --- all-reduce --------------------------------------------------------------

  /// Every rank's `out` = the element-wise `o` of every rank's `in`.
  /// \pre `in.count == out.count`, same dtype; `in` and `out` are the same
  ///      buffer (in-place) or do not overlap.
  void all_reduce(const_buffer_view in, buffer_view out, op o) {
    checked(print("all_reduce", in.count, out.count, in.type, o), [&] { args().check_all_reduce(in, out); });
    run_now(all_reduce_job(in, out, o));
  }
  /// In-place all-reduce.
  void all_reduce(buffer_view inout, op o) { all_reduce(inout, inout, o); }
  /// As `all_reduce`, returning at once; `in` and `out` belong to ddl until
  /// the request completes.
  /// `done`, if given, is called with the collective's error (or null) on the
  /// thread that ran it, as soon as it has finished and before `wait` returns
  /// (a framework completes its own future there); it must not call this
  /// communicator.
  collective_request all_reduce_async(const_buffer_view in, buffer_view out, op o, completion done = {}) {
    checked(print("all_reduce", in.count, out.count, in.type, o), [&] { args().check_all_reduce(in, out); });
    return submit("all_reduce", all_reduce_job(in, out, o), std::move(done));
  }
  collective_request all_reduce_async(buffer_view inout, op o, completion done = {}) {
    return all_reduce_async(inout, inout, o, std::move(done));
  }

  // --- reduce-scatter --------------------------------------------------------

  /// `out` = this rank's block (see `ddl::block_of`) of the reduction of
  /// every rank's `in`. In place when `out` is that block of `in` (then the
  /// rest of `in` is used as scratch and left unspecified).
  void reduce_scatter(const_buffer_view in, buffer_view out, op o) {
    checked(print("reduce_scatter", in.count, 0, in.type, o), [&] { args().check_reduce_scatter(in, out); });
    run_now(reduce_scatter_job(in, out, o));
  }
  collective_request reduce_scatter_async(const_buffer_view in, buffer_view out, op o, completion done = {}) {
    checked(print("reduce_scatter", in.count, 0, in.type, o), [&] { args().check_reduce_scatter(in, out); });
    return submit("reduce_scatter", reduce_scatter_job(in, out, o), std::move(done));
  }

  // --- all-gather ------------------------------------------------------------

  /// `out` (the total count) = every rank's `in` block, in rank order (see
  /// `ddl::block_of`). In place when `in` is this rank's block of `out`.
  void all_gather(const_buffer_view in, buffer_view out) {
    checked(print("all_gather", 0, out.count, in.type, op::sum), [&] { args().check_all_gather(in, out); });
    run_now(all_gather_job(in, out));
  }
  collective_request all_gather_async(const_buffer_view in, buffer_view out, completion done = {}) {
    checked(print("all_gather", 0, out.count, in.type, op::sum), [&] { args().check_all_gather(in, out); });
    return submit("all_gather", all_gather_job(in, out), std::move(done));
  }

  // --- all-to-all ------------------------------------------------------------

  /// Block k of this rank's `in` goes to rank k, where it lands as block
  /// `rank()` of `out` (`MPI_Alltoall`): `in` and `out` in `size()` equal
  /// blocks (`in.count == out.count`, a multiple of `size()`). In place when
  /// `in` and `out` are the same buffer (every rank must pass the same
  /// placement: large calls in place trade parts in pairs). Any dtype:
  /// nothing is reduced. How it runs: `ddl::all_to_all_choice` (strategy/all_to_all.hpp).
  void all_to_all(const_buffer_view in, buffer_view out) {
    std::vector<std::size_t> parts;
    checked(print(all_to_all_name(in, out, true), 0, 0, in.type, op::sum), [&] { parts = args().equal_parts(in, out); });
    run_now(all_to_all_job(in, parts, out, parts, true));
  }
  collective_request all_to_all_async(const_buffer_view in, buffer_view out, completion done = {}) {
    std::vector<std::size_t> parts;
    checked(print(all_to_all_name(in, out, true), 0, 0, in.type, op::sum), [&] { parts = args().equal_parts(in, out); });
    return submit("all_to_all", all_to_all_job(in, parts, out, parts, true), std::move(done));
  }
  /// Parts of any size (`MPI_Alltoallv`): the first `send_counts[0]`
  /// elements of `in` go to rank 0, the next `send_counts[1]` to rank 1, and
  /// so on; `out` receives `recv_counts[j]` elements from rank j, in rank
  /// order. `recv_counts[j]` here must equal `send_counts[rank()]` on rank j:
  /// with `DDL_CHECK=1` the ranks trade their counts first and every rank
  /// fails with `invalid_argument` naming the pair that disagrees (the
  /// communicator stays usable); without it the pair's transfer fails with a
  /// size mismatch. In place when `in` and `out` start at the same address
  /// (with parts that differ both ways, the input is copied aside first).
  void all_to_all(const_buffer_view in, std::vector<std::size_t> send_counts, buffer_view out,
                  std::vector<std::size_t> recv_counts) {
    checked(print("all_to_allv", 0, 0, in.type, op::sum),
            [&] { args().check_all_to_all(in, send_counts, out, recv_counts); });
    run_now(all_to_all_job(in, std::move(send_counts), out, std::move(recv_counts), false));
  }
  collective_request all_to_all_async(const_buffer_view in, std::vector<std::size_t> send_counts, buffer_view out,
                                      std::vector<std::size_t> recv_counts, completion done = {}) {
    checked(print("all_to_allv", 0, 0, in.type, op::sum),
            [&] { args().check_all_to_all(in, send_counts, out, recv_counts); });
    return submit("all_to_all", all_to_all_job(in, std::move(send_counts), out, std::move(recv_counts), false),
                  std::move(done));
  }
  /// How an even `all_to_all` of `bytes` a rank in host memory runs (in
  /// place or not), in words: through the stages (and in how many
  /// meetings), parts traded in pairs, or an exchange with every peer.
  std::string all_to_all_plan_for(std::size_t bytes, bool in_place = false) const {
    switch (all_to_all_schedule_for(bytes, in_place, true, true)) {
      case a2a_schedule::flagged: {
        const std::size_t piece = detail::direct_base::flagged_limit / static_cast<std::size_t>(size());
        const std::size_t part = bytes / static_cast<std::size_t>(size());
        const std::size_t meetings = part == 0 ? 1 : (part + piece - 1) / piece;
        return "through the stages, " + std::to_string(meetings) + (meetings == 1 ? " meeting" : " meetings");
      }
      case a2a_schedule::paired: return "parts traded in pairs, " + std::to_string(size()) + " rounds";
      default: return in_place ? "input set aside, exchange with every peer" : "exchange with every peer";
    }
  }

  // --- gather and scatter ----------------------------------------------------

  /// Every rank's `in` lands as block `rank()` of `root`'s `out`
  /// (`MPI_Gather`): on the root `out` holds `size()` blocks of `in.count`
  /// elements, in rank order; on the other ranks `out` is not used (pass
  /// `{}`). In place on the root when its `in` is its own block of `out`.
  /// Any dtype: nothing is reduced. Small calls between ranks that share
  /// stages go through them, others as one message a rank
  /// (`gather_through_stages`).
  /// \pre the same `in.count`, dtype and root on every rank.
  void gather(const_buffer_view in, buffer_view out, int root) {
    checked(print("gather", in.count, 0, in.type, op::sum, root), [&] { args().check_gather(in, out, root); });
    run_now(gather_job(in, out, root));
  }
  collective_request gather_async(const_buffer_view in, buffer_view out, int root, completion done = {}) {
    checked(print("gather", in.count, 0, in.type, op::sum, root), [&] { args().check_gather(in, out, root); });
    return submit("gather", gather_job(in, out, root), std::move(done));
  }
  /// Block `rank()` of `root`'s `in` lands in every rank's `out`
  /// (`MPI_Scatter`): on the root `in` holds `size()` blocks of `out.count`
  /// elements, in rank order; on the other ranks `in` is not used (pass
  /// `{}`). In place on the root when its `out` is its own block of `in`.
  /// \pre the same `out.count`, dtype and root on every rank.
  void scatter(const_buffer_view in, buffer_view out, int root) {
    checked(print("scatter", 0, out.count, out.type, op::sum, root), [&] { args().check_scatter(in, out, root); });
    run_now(scatter_job(in, out, root));
  }
  collective_request scatter_async(const_buffer_view in, buffer_view out, int root, completion done = {}) {
    checked(print("scatter", 0, out.count, out.type, op::sum, root), [&] { args().check_scatter(in, out, root); });
    return submit("scatter", scatter_job(in, out, root), std::move(done));
  }
  /// `root`'s `out` = every rank's `in` reduced with `o` (`MPI_Reduce`): on
  /// the root `out` holds `in.count` elements (in place when it is `in`);
  /// on the other ranks `out` is not used (pass `{}`) and `in` is left as
  /// it was. Calls of up to 4 MiB between ranks that share stages go
  /// through them (the others leave their input in their slots, the root
  /// reduces all n in rank order: what `one_shot` computes), others as the
  /// strategy's reduce-scatter followed by a gather of the reduced blocks to
  /// the root (`reduce_through_stages`).
  /// \pre the same `in.count`, dtype, op and root on every rank.
  void reduce(const_buffer_view in, buffer_view out, op o, int root) {
    checked(print("reduce", in.count, 0, in.type, o, root), [&] { args().check_reduce(in, out, root); });
    run_now(reduce_job(in, out, o, root));
  }
  collective_request reduce_async(const_buffer_view in, buffer_view out, op o, int root, completion done = {}) {
    checked(print("reduce", in.count, 0, in.type, o, root), [&] { args().check_reduce(in, out, root); });
    return submit("reduce", reduce_job(in, out, o, root), std::move(done));
  }

  // --- broadcast and barrier -------------------------------------------------

  /// Every rank's `data` = `root`'s. Small messages take a binomial tree,
  /// large ones a pipelined chain or a scatter + all-gather, and ranks that
  /// share stages (threads, MPI ranks of one machine; host memory) may meet
  /// through them instead (`direct`), whichever the link costs price
  /// cheaper (`ddl::broadcast_choice`, on `link_topology()`;
  /// `options::broadcast` or `DDL_BROADCAST` forces one). Up to
  /// `options::tune_copies_bytes` (`DDL_TUNE_COPIES`, every size by default; 0:
  /// off) in host memory the first calls of each size class
  /// time the algorithms priced within 3x and every rank keeps the fastest,
  /// as `auto_strategy` does for all-reduces (`strategy/tuning.hpp`;
  /// `explain_broadcast()` lists what was measured).
  /// \pre the same count and dtype on every rank; `0 <= root < size()`.
  void broadcast(buffer_view data, int root) {
    checked(print("broadcast", data.count, 0, data.type, op::sum, root), [&] { args().check_broadcast(data, root); });
    run_now(broadcast_job(data, root));
  }
  collective_request broadcast_async(buffer_view data, int root, completion done = {}) {
    checked(print("broadcast", data.count, 0, data.type, op::sum, root), [&] { args().check_broadcast(data, root); });
    return submit("broadcast", broadcast_job(data, root), std::move(done));
  }
  /// The plan `broadcast` follows for `bytes` in host memory: the measured
  /// choice once its size class is measured (`strategy/tuning.hpp`), else the
  /// model's. (A device buffer that does not bounce never meets through the
  /// stages; the call's stamp names what ran.)
  broadcast_plan broadcast_plan_for(std::size_t bytes, dtype type = dtype::float32) const {
    auto on = [&](const auto& t) {
      return broadcasts_.running(bytes, false, broadcast_model(bytes, size_of(type), broadcast_costs_of(t)));
    };
    // A call that bounces runs on the host transport (`broadcast_job`).
    if constexpr (bounce::on) {
      if (transport_->bounces(bytes)) return on(transport_->host());
    }
    return on(*transport_);
  }
  /// The broadcast size classes measured so far, one line each (empty if none).
  std::string explain_broadcast() const {
    return broadcasts_.report("broadcast ", [](const broadcast_plan& p) { return p.describe(); });
  }
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

  /// Gives the communicator up on every rank (NCCL's `ncclCommAbort`): a
  /// notice naming this rank and `why` ends the peers' pending and later
  /// calls with `transport_error` ("rank k failed: why") within a few polls,
  /// and this rank's later calls too. It runs in issue order, after this
  /// rank's own pending asynchronous calls. A call that fails on this rank
  /// (a transport error, or, without `DDL_CHECK=1`, arguments this rank
  /// rejects) does the same by itself, so peers never wait out their
  /// deadline for a rank that has given up; with `DDL_CHECK=1` a rejected
  /// argument is every rank's `invalid_argument` and the communicator stays
  /// usable.
  void abort(const std::string& why = "aborted by the program (communicator::abort)") {
    static_assert(has_abort_v<Transport>,
                  "ddl: communicator::abort needs a transport with 'void abort(const std::string&)'");
    run_now([this, why] { give_up(why); });
  }

  /// Returns once every rank has entered it.
  void barrier() { run_now(barrier_job()); }
  collective_request barrier_async(completion done = {}) { return submit("barrier", barrier_job(), std::move(done)); }

  // --- point-to-point ----------------------------------------------------------

  /// The largest tag a point-to-point transfer takes (`detail::max_message_tag`).
  static constexpr int max_tag = detail::max_message_tag;

  /// Sends `data` to rank `peer` under `message_tag` (`MPI_Send`); returns once the
  /// transfer has completed (`data` may be reused). Between two ranks,
  /// transfers under one tag match in the order they were issued; the
  /// matching receive must take as many bytes (else both fail with
  /// `transport_error` and the group is given up). A receive that no send
  /// meets fails with `timeout_error` at the deadline (`DDL_TIMEOUT`).
  /// Point-to-point transfers are not collectives: only the two ranks take
  /// part, and their tags never meet the collectives' messages.
  /// \param message_tag in [0, `max_tag`].
  /// \pre `peer` is another rank of the group; host memory.
  /// Example (a pipeline stage hands its activations on):
  /// \code
  ///   if (comm.rank() > 0) comm.recv(ddl::host_view(in), comm.rank() - 1, 0);
  ///   forward(in, out);
  ///   if (comm.rank() + 1 < comm.size()) comm.send(ddl::host_view(out), comm.rank() + 1, 0);
  /// \endcode
  void send(const_buffer_view data, int peer, int message_tag) { send_async(data, peer, message_tag).wait(); }
  /// Starts a send (`MPI_Isend`); `data` belongs to ddl until it completes.
  /// It takes its place among this rank's calls in issue order, but does not
  /// hold them up: calls issued after it run while it waits for its peer.
  collective_request send_async(const_buffer_view data, int peer, int message_tag, completion done = {}) {
    args().check_transfer("send", data, peer, message_tag);
    const const_bytes bytes{data.byte_data(), data.bytes()};
    auto post = [this, bytes, peer, message_tag](auto& req) {
      req[0] = transport_->isend(peer, bytes, tag_of(message_tag));
    };
    return transfer<1>("send", "to", peer, message_tag, std::move(post), std::move(done));
  }
  /// Receives into `data` from rank `peer` under `message_tag` (`MPI_Recv`): exactly
  /// `data.bytes()` bytes, from the matching `send` (see there).
  void recv(buffer_view data, int peer, int message_tag) { recv_async(data, peer, message_tag).wait(); }
  /// Starts a receive (`MPI_Irecv`), as `send_async`.
  collective_request recv_async(buffer_view data, int peer, int message_tag, completion done = {}) {
    args().check_transfer("recv", data, peer, message_tag);
    const mutable_bytes bytes{data.byte_data(), data.bytes()};
    auto post = [this, bytes, peer, message_tag](auto& req) {
      req[0] = transport_->irecv(peer, bytes, tag_of(message_tag));
    };
    return transfer<1>("recv", "from", peer, message_tag, std::move(post), std::move(done));
  }
  /// Sends `out` to rank `dest` and receives `in` from rank `source`, both
  /// under `message_tag`, at once (`MPI_Sendrecv`); returns once both have
  /// completed. The shift of a ring (`dest` the next rank, `source` the
  /// previous) or an exchange between two (`dest == source`) without the
  /// deadlock two blocking calls in the wrong order risk, and one call for
  /// the two: on MPI, half the bookkeeping of `recv_async`, `send`, `wait`.
  /// Each side matches as a `send` and a `recv` issued at this point would
  /// (the peers may use either); the sizes may differ, each matching its own
  /// peer's. A timeout names the half that did not complete.
  /// \pre `dest` and `source` are other ranks of the group; host memory.
  /// Example (a ring shift):
  /// \code
  ///   const int n = comm.size(), r = comm.rank();
  ///   comm.sendrecv(ddl::host_view(mine), (r + 1) % n, ddl::host_view(theirs), (r + n - 1) % n, 0);
  /// \endcode
  void sendrecv(const_buffer_view out, int dest, buffer_view in, int source, int message_tag) {
    sendrecv_async(out, dest, in, source, message_tag).wait();
  }
  /// Starts both halves of `sendrecv`, as `send_async` and `recv_async` issued
  /// together; `out` and `in` belong to ddl until it completes.
  collective_request sendrecv_async(const_buffer_view out, int dest, buffer_view in, int source, int message_tag,
                                    completion done = {}) {
    args().check_transfer("sendrecv", out, dest, message_tag);
    args().check_transfer("sendrecv", in, source, message_tag);
    const const_bytes sent{out.byte_data(), out.bytes()};
    const mutable_bytes got{in.byte_data(), in.bytes()};
    // the receive first: an exchange's two messages both find theirs posted
    auto post = [this, sent, dest, got, source, message_tag](auto& req) {
      req[1] = transport_->irecv(source, got, tag_of(message_tag));
      req[0] = transport_->isend(dest, sent, tag_of(message_tag));
    };
    return transfer<2>("sendrecv", "to", dest, message_tag, std::move(post), std::move(done), source);
  }
  /// Receives into `data`, under `message_tag`, the message of whichever
  /// rank sends one first (`MPI_Recv` with `MPI_ANY_SOURCE`), and returns
  /// that rank. Exactly `data.bytes()` bytes, as `recv`. Receives match in
  /// issue order, from one rank and from any alike: a message goes to the
  /// oldest receive it fits, and one rank's messages arrive in the order it
  /// sent them. Needs a transport with `irecv_any` (threads, MPI, the simulator).
  /// Example (a parameter server takes the workers' updates as they come):
  /// \code
  ///   for (int k = 1; k < comm.size(); ++k) {
  ///     const int worker = comm.recv_any(ddl::host_view(update), 0);
  ///     apply(update, worker);
  ///   }
  /// \endcode
  int recv_any(buffer_view data, int message_tag) {
    auto r = recv_any_async(data, message_tag);
    r.wait();
    return r.peer();
  }
  /// Starts a receive from any rank, as `recv_async`; once it has completed,
  /// the request's `peer()` is the sender (also after `wait`).
  collective_request recv_any_async(buffer_view data, int message_tag, completion done = {}) {
    static_assert(has_irecv_any_v<Transport>,
                  "ddl: recv_any needs a transport with 'request irecv_any(mutable_bytes, tag)' (threads, MPI, the simulator)");
    if (size() < 2)
      throw invalid_argument("recv_any: no other rank to receive from in a group of " + std::to_string(size()));
    args().check_message("recv_any", data, message_tag);
    const mutable_bytes bytes{data.byte_data(), data.bytes()};
    auto post = [this, bytes, message_tag](auto& req) {
      req[0] = transport_->irecv_any(bytes, tag_of(message_tag));
    };
    return transfer<1>("recv_any", "from", -1, message_tag, std::move(post), std::move(done));
  }

 private:
  // --- argument checks (comm/arguments.hpp), for this group ---------------
  detail::call_arguments args() const { return {rank(), size(), accepts_device_memory_v<Transport>}; }


  // --- the collectives' bodies: run on the engine (or inline when idle) ---

  auto all_reduce_job(const_buffer_view in, buffer_view out, op o) {
    return [this, in, out, o] {
      if (checks_calls()) verify(print("all_reduce", in.count, out.count, in.type, o));
      if (in.count == 0) return;
      const auto st = stamp(detail::call_kind::all_reduce, in.count, out.count, in.type, o);
      if constexpr (bounce::on) {
        if (transport_->bounces(in.bytes())) {
          bounced b(*this, in.bytes());
          const std::byte* hin = b.load(in, 0);
          std::byte* hout = b.at(out, 0);
          auto c = bounce_context("all_reduce", in.type, o,
                                  host_->strategy.all_reduce_workspace(in.count, in.type, size()), st);
          host_->strategy.all_reduce(transport_->host(), hin, hout, in.count, c);
          return b.store(out, 0);
        }
      }
      auto c = context("all_reduce", out.where, in.type, o, strategy_.all_reduce_workspace(in.count, in.type, size()),
                       st);
      strategy_.all_reduce(*transport_, in.byte_data(), out.byte_data(), in.count, c);
    };
  }
  auto reduce_scatter_job(const_buffer_view in, buffer_view out, op o) {
    return [this, in, out, o] {
      if (checks_calls()) verify(print("reduce_scatter", in.count, 0, in.type, o));
      if (in.count == 0) return;
      const std::size_t es = size_of(in.type);
      const block mine = block_of(in.count, size(), rank());
      const auto st = stamp(detail::call_kind::reduce_scatter, in.count, 0, in.type, o);
      if constexpr (bounce::on) {
        if (transport_->bounces(in.bytes())) {
          bounced b(*this, in.bytes());
          const std::byte* hin = b.load(in, 0);
          std::byte* hout = b.at(out, mine.offset * es);
          const bool in_place = hout == hin + mine.offset * es;
          const std::size_t extra = in_place ? 0 : host_->strategy.reduce_scatter_workspace(in.count, in.type, size());
          auto c = bounce_context("reduce_scatter", in.type, o, extra, st);
          host_->strategy.reduce_scatter(transport_->host(), hin, in_place ? hout - mine.offset * es : c.work, hout,
                                         in.count, c);
          return b.store(out, mine.offset * es);
        }
      }
      const bool in_place = out.byte_data() == in.byte_data() + mine.offset * es;
      const std::size_t extra = in_place ? 0 : strategy_.reduce_scatter_workspace(in.count, in.type, size());
      auto c = context("reduce_scatter", out.where, in.type, o, extra, st);
      std::byte* work = in_place ? out.byte_data() - mine.offset * es : c.work;
      strategy_.reduce_scatter(*transport_, in.byte_data(), work, out.byte_data(), in.count, c);
    };
  }
  auto all_gather_job(const_buffer_view in, buffer_view out) {
    return [this, in, out] {
      if (checks_calls()) verify(print("all_gather", 0, out.count, in.type, op::sum));
      if (out.count == 0) return;
      const auto st = stamp(detail::call_kind::all_gather, 0, out.count, in.type, op::sum);
      if constexpr (bounce::on) {
        if (transport_->bounces(out.bytes())) {
          bounced b(*this, out.bytes());
          const std::size_t offset = block_of(out.count, size(), rank()).offset * size_of(in.type);
          const std::byte* hin = b.load(in, offset);
          auto c = bounce_context("all_gather", in.type, op::sum, 0, st);
          host_->strategy.all_gather(transport_->host(), hin, b.at(out, 0), out.count, c);
          return b.store(out, 0);
        }
      }
      auto c = context("all_gather", out.where, in.type, op::sum, 0, st);
      strategy_.all_gather(*transport_, in.byte_data(), out.byte_data(), out.count, c);
    };
  }
  auto broadcast_job(buffer_view data, int root) {
    return [this, data, root] {
      if (checks_calls()) verify(print("broadcast", data.count, 0, data.type, op::sum, root));
      if (data.count == 0 || size() == 1) return;
      const auto st = stamp(detail::call_kind::broadcast, data.count, 0, data.type, op::sum, root);
      if constexpr (bounce::on) {
        if (transport_->bounces(data.bytes())) {
          bounced b(*this, data.bytes());
          std::byte* h = rank() == root ? const_cast<std::byte*>(b.load(data, 0)) : b.at(data, 0);
          broadcast_on(transport_->host(), h, data, root, bounce_context("broadcast", data.type, op::sum, 0, st));
          if (rank() != root) b.store(data, 0);
          return;
        }
      }
      broadcast_on(*transport_, data.byte_data(), data, root, context("broadcast", data.where, data.type, op::sum, 0, st));
    };
  }
  // The model's plan for a broadcast of `bytes` priced with `costs` (those of
  // the transport the call runs on: `broadcast_plan_for` and `broadcast_on`).
  broadcast_plan broadcast_model(std::size_t bytes, std::size_t elem, const broadcast_costs& costs) const {
    return broadcast_choice(bytes, link_topology(), elem, opts_.broadcast, costs);
  }
  // The broadcast of `data`'s bytes at `p` over `t` (the call's transport,
  // or its host one when the call bounces).
  template <class T>
  void broadcast_on(T& t, std::byte* p, const buffer_view& data, int root, const call_context& c) {
    const std::size_t bytes = data.bytes(), elem = size_of(data.type);
    const auto& topo = link_topology();
    const broadcast_costs costs = broadcast_costs_of(t, std::strcmp(c.mem->name, "host") == 0);
    if (opts_.broadcast == broadcast_algorithm::direct && !costs.direct)
      throw invalid_argument("broadcast: 'direct' (DDL_BROADCAST or options::broadcast) meets through stages its "
                             "ranks share; this call's cannot (ranks on several machines, a transport without "
                             "stages, or buffers not in host memory): use 'auto'");
    const broadcast_plan model = broadcast_model(bytes, elem, costs);
    auto run = [&](const broadcast_plan& pl, const call_context& cp) {
      const tag tg = cp.base_tag + tag_offset::broadcast;
      switch (pl.algo) {
        case broadcast_algorithm::chain: detail::chain_broadcast(t, p, bytes, root, pl.segments, elem, cp, tg); break;
        case broadcast_algorithm::scatter_allgather:
          detail::scatter_allgather_broadcast(t, p, bytes, root, elem, cp, tg);
          break;
        case broadcast_algorithm::direct:
          // Chosen only where `costs.direct` (a forced one is refused above).
          if constexpr (has_wait_until_v<T>) {
            detail::direct_base::broadcast(t, p, bytes, root, cp);
          } else {
            throw invalid_argument("broadcast: 'direct' meets through stages; this transport has none");
          }
          break;
        default: detail::binomial_broadcast(t, p, bytes, root, cp, tg);
      }
    };
    // Measured like auto's all-reduces (`strategy/tuning.hpp`) unless an
    // algorithm is forced; the plan is folded into the stamp either way.
    if (opts_.broadcast != broadcast_algorithm::automatic || !broadcast_tuner::applies(t, c, bytes, true))
      return run(model, detail::with_plan_stamp(c, model));
    broadcasts_.run(t, bytes, false, model, c, [&] {
      return detail::tuning_candidates(bytes, topo, elem, broadcast_tuner::within, broadcast_tuner::max_candidates,
                                       costs);
    }, run);
  }
  // How an all-to-all runs (`all_to_all_choice`).
  using a2a_schedule = all_to_all_schedule;
  a2a_schedule all_to_all_schedule_for(std::size_t bytes, bool in_place, bool host, bool even) const {
    return all_to_all_choice(bytes, in_place, even, size(), host && shares_stages(location{}));
  }
  a2a_schedule all_to_all_schedule_for(const const_buffer_view& in, const const_buffer_view& out, bool even) const {
    return all_to_all_schedule_for(in.bytes(), in.byte_data() == out.byte_data(),
                                   in.where.space == memory_space::host && out.where.space == memory_space::host, even);
  }
  // The call check names the forms and the paired schedule apart (a rank
  // in place beside one out of place fails the check; without it the
  // stamps differ: a mismatch_error, not a hang).
  const char* all_to_all_name(const const_buffer_view& in, const const_buffer_view& out, bool even) const {
    if (!even) return "all_to_allv";
    return all_to_all_schedule_for(in, out, even) == a2a_schedule::paired ? "all_to_all(ip)" : "all_to_all";
  }
  // Never bounced (`staged_transport`): whether a call bounces follows its
  // size, and an all-to-all's sizes differ between ranks.
  auto all_to_all_job(const_buffer_view in, std::vector<std::size_t> sends, buffer_view out,
                      std::vector<std::size_t> recvs, bool even) {
    return [this, in, out, sends = std::move(sends), recvs = std::move(recvs), even] {
      const a2a_schedule how = all_to_all_schedule_for(in, out, even);
      if (checks_calls()) verify_parts(all_to_all_name(in, out, even), in.type, sends, recvs);
      const bool in_place = in.byte_data() == out.byte_data() && in.count > 0;
      if (in_place && size() == 1) return;
      const std::size_t es = size_of(in.type);
      const int form = !even ? -2 : how == a2a_schedule::paired ? 1 : how == a2a_schedule::flagged ? 2 : -1;
      const auto st = stamp(detail::call_kind::all_to_all, 0, 0, in.type, op::sum, form);
      if (how == a2a_schedule::flagged) {
        if constexpr (has_wait_until_v<Transport>) {
          auto c = context("all_to_all", out.where, in.type, op::sum, 0, st);
          return detail::direct_base::all_to_all(*transport_, in.byte_data(), out.byte_data(), sends[0] * es, c);
        }
      }
      if (how == a2a_schedule::paired) {
        auto c = context("all_to_all", out.where, in.type, op::sum, sends[0] * es, st);
        return detail::pairwise_all_to_all_in_place(*transport_, out.byte_data(), sends, c.work, es, c,
                                                    c.base_tag + tag_offset::all_to_all);
      }
      // In place: the input aside in the workspace first.
      auto c = context("all_to_all", out.where, in.type, op::sum, in_place ? in.bytes() : 0, st);
      const std::byte* from = in.byte_data();
      if (in_place) {
        local_copy(c, c.work, from, in.bytes());
        from = c.work;
      }
      detail::pairwise_all_to_all(*transport_, from, sends, out.byte_data(), recvs, es, c,
                                  c.base_tag + tag_offset::all_to_all);
    };
  }
  // A gather, scatter or reduce goes through the stages or messages:
  // `gather_choice`, `scatter_choice`, `reduce_choice` (strategy/rooted.hpp).
  bool gather_through_stages(std::size_t part_bytes, const location& where) const {
    return gather_choice(part_bytes, shares_stages(where)) == rooted_path::stages;
  }
  bool scatter_through_stages(std::size_t part_bytes, const location& where) const {
    return scatter_choice(part_bytes, size(), shares_stages(where)) == rooted_path::stages;
  }
  bool reduce_through_stages(std::size_t bytes, const location& where) const {
    return reduce_choice(bytes, shares_stages(where)) == rooted_path::stages;
  }
  // Whether this group's ranks share stages for buffers at `where`.
  bool shares_stages(const location& where) const {
    if constexpr (has_wait_until_v<Transport>) {
      return where.space == memory_space::host && size() > 1 && peers_reachable(*transport_);
    } else {
      (void)where;
      return false;
    }
  }
  auto gather_job(const_buffer_view in, buffer_view out, int root) {
    return [this, in, out, root] {
      if (checks_calls()) verify(print("gather", in.count, 0, in.type, op::sum, root));
      if (in.count == 0) return;
      const bool stages = gather_through_stages(in.bytes(), in.where);
      const auto st = stamp(detail::call_kind::gather, in.count, stages, in.type, op::sum, root);  // the schedule, hashed
      auto c = context("gather", in.where, in.type, op::sum, 0, st);
      if constexpr (has_wait_until_v<Transport>) {
        if (stages) return detail::direct_base::gather(*transport_, in.byte_data(), out.byte_data(), in.bytes(), root, c);
      }
      detail::linear_gather(*transport_, in.byte_data(), out.byte_data(), in.bytes(), root, c,
                            c.base_tag + tag_offset::rooted);
    };
  }
  auto scatter_job(const_buffer_view in, buffer_view out, int root) {
    return [this, in, out, root] {
      if (checks_calls()) verify(print("scatter", 0, out.count, out.type, op::sum, root));
      if (out.count == 0) return;
      const bool stages = scatter_through_stages(out.bytes(), out.where);
      const auto st = stamp(detail::call_kind::scatter, stages, out.count, out.type, op::sum, root);
      auto c = context("scatter", out.where, out.type, op::sum, 0, st);
      if constexpr (has_wait_until_v<Transport>) {
        if (stages)
          return detail::direct_base::scatter(*transport_, in.byte_data(), out.byte_data(), out.bytes(), root, c);
      }
      detail::linear_scatter(*transport_, in.byte_data(), out.byte_data(), out.bytes(), root, c,
                             c.base_tag + tag_offset::rooted);
    };
  }
  // A reduce through the stages (`direct_base::reduce`: a one-way meeting
  // per 64 KiB, the root reducing), else the strategy's reduce-scatter and a
  // gather of the reduced blocks to the root (`reduce_on`); on a staged
  // transport a call that bounces runs whole on the host side.
  auto reduce_job(const_buffer_view in, buffer_view out, op o, int root) {
    return [this, in, out, o, root] {
      if (checks_calls()) verify(print("reduce", in.count, 0, in.type, o, root));
      if (in.count == 0) return;
      const bool stages = reduce_through_stages(in.bytes(), in.where);
      const auto st = stamp(detail::call_kind::reduce, in.count, stages, in.type, o, root);  // the schedule, hashed
      const bool mine = rank() == root;
      // this rank's reduced block, first in the workspace (rounded up to 64 bytes)
      const std::size_t lead = (block_of(in.count, size(), rank()).size * size_of(in.type) + 63) / 64 * 64;
      if constexpr (has_wait_until_v<Transport>) {
        if (stages) {
          auto c = context("reduce", in.where, in.type, o, 0, st);
          return detail::direct_base::reduce(*transport_, in.byte_data(), out.byte_data(), in.count, root, c);
        }
      }
      if constexpr (bounce::on) {
        if (transport_->bounces(in.bytes())) {
          bounced b(*this, in.bytes());
          const std::byte* hin = b.load(in, 0);
          std::byte* hout = mine ? b.at(out, 0) : nullptr;
          const std::size_t work = host_->strategy.reduce_scatter_workspace(in.count, in.type, size());
          auto c = bounce_context("reduce", in.type, o, lead + work, st);
          reduce_on(transport_->host(), host_->strategy, hin, hout, in.count, root, lead, c);
          if (mine) b.store(out, 0);
          return;
        }
      }
      const std::size_t work = strategy_.reduce_scatter_workspace(in.count, in.type, size());
      auto c = context("reduce", in.where, in.type, o, lead + work, st);
      reduce_on(*transport_, strategy_, in.byte_data(), out.byte_data(), in.count, root, lead, c);
    };
  }
  // The reduce-scatter of `in` (out of place, whatever the root passed:
  // this rank's reduced block lands at the start of `c.work`, the strategy's
  // workspace starts `lead` bytes on, so the two never look like one
  // in-place buffer), then every block to the root's `out` (one message a
  // rank; the root's own copied there once the reduce-scatter, which may
  // read `in` = `out`, is over).
  template <class T, class S>
  void reduce_on(T& t, S& strategy, const std::byte* in, std::byte* out, std::size_t count, int root,
                 std::size_t lead, const call_context& c) {
    const std::size_t es = size_of(c.red.type);
    const block b = block_of(count, size(), rank());
    std::byte* reduced = c.work;
    strategy.reduce_scatter(t, in, c.work + lead, reduced, count, c);
    if (rank() == root) local_copy(c, out + b.offset * es, reduced, b.size * es);
    call_context g = c;  // the gather: a call number of its own, the same stamp
    g.base_tag = detail::call_tag(++sequence_, detail::stamp_of(c.base_tag));
    detail::linear_rooted(
        t, root, true,
        [&](int p) {
          const block q = block_of(count, size(), p);
          return mutable_bytes{out + q.offset * es, q.size * es};
        },
        mutable_bytes{reduced, b.size * es}, g, g.base_tag + tag_offset::rooted, "reduce: gather");
  }
  auto barrier_job() {
    return [this] {
      if (checks_calls()) verify(print("barrier", 0, 0, dtype::int32, op::sum));
      if (size() == 1) return;
      // Two int32 tokens (one sent, one received) in the call's workspace.
      auto c = context("barrier", location{}, dtype::int32, op::sum, 2 * sizeof(std::int32_t),
                       stamp(detail::call_kind::barrier, 0, 0, dtype::int32, op::sum));
      detail::dissemination_barrier(*transport_, c.work, sizeof(std::int32_t), c, c.base_tag + tag_offset::barrier);
    };
  }

  // --- point-to-point transfers ---------------------------------------------

  // A program's tag as the transport's: bit 63 clear, so never a call's.
  static tag tag_of(int t) { return static_cast<tag>(t); }
  // A transfer in the engine's queue: `post` starts it when its turn comes
  // (so a rank's transfers start in issue order; at once when nothing is
  // queued), then the engine polls it (parked: later calls run meanwhile)
  // until it completes or its deadline, counted from its start, passes. No
  // call number: only two ranks take part. `K` requests: a send or a
  // receive (`req[0]`), or a sendrecv's send (`req[0]`, to `named`) and
  // receive (`req[1]`, from `source`). One allocation a call: the state
  // lives in the operation, whose closures hold only pointers (small enough
  // for `std::function` to keep in place).
  template <class Post, std::size_t K>
  struct transfer_op final : detail::async_op {
    transfer_op(Post p, const char* toward_, int peer_, int tag_, int source_)
        : post(std::move(p)), toward(toward_), named(peer_), source(source_), t(tag_) {}
    Post post;
    const char* toward;
    int named, source, t;  // `named` -1: a receive from any rank
    std::array<typename Transport::request, K> req{};
    std::array<bool, K> complete{};
    std::chrono::steady_clock::time_point started{};  // at the first look that found it unfinished
    unsigned misses = 0;  // looks that found it unfinished
  };
  template <std::size_t K, class Post>
  collective_request transfer(const char* what, const char* toward, int peer, int t, Post post, completion done,
                              int source = -1) {
    static_assert(has_test_v<Transport>, "ddl: send and recv need a transport with 'bool test(request&)'");
    static_assert(!accepts_device_memory_v<Transport>,
                  "ddl: send and recv are offered on host transports only (not on device transports yet)");
    using op_type = transfer_op<Post, K>;
    auto op = std::make_shared<op_type>(std::move(post), toward, peer, t, source);
    op_type* x = op.get();
    op->what = what;
    op->on_complete = std::move(done);
    op->run = [this, x] { guard([x] { x->post(x->req); }); };
    op->poll = [this](detail::async_op& o) { return guard([this, &o] { return polled(static_cast<op_type&>(o)); }); };
    engine().submit(op);
    return collective_request(engine_, std::move(op));
  }
  // One look at a started transfer: true once complete (the request then
  // names its peer: for a receive from any rank, the sender).
  template <class Op>
  bool polled(Op& x) {
    bool all = true;
    for (std::size_t k = 0; k < x.req.size(); ++k)
      if (!x.complete[k] && !(x.complete[k] = transport_->test(x.req[k]))) all = false;
    if (all) {
      if constexpr (has_irecv_any_v<Transport>) x.peer = x.named < 0 ? x.req[0].peer() : x.named;
      else x.peer = x.named;
      return true;
    }
    // The clock is read at the first look that finds it unfinished (right
    // after it was posted; a transfer that completes at once reads none),
    // then every 8th: a deadline of seconds is not missed by 8 looks.
    if (x.misses++ % 8 != 0) return false;
    const auto now = std::chrono::steady_clock::now();
    if (x.misses == 1) x.started = now;
    if (now - x.started < opts_.timeout) return false;
    for (auto& q : x.req) q = typename Transport::request{};  // withdrawn: nothing touches the buffers afterwards
    // The half that did not complete (a sendrecv's send is named first).
    const bool sending = !x.complete[0] || x.req.size() == 1;
    const int whom = sending ? x.named : x.source;
    const std::string what = x.req.size() == 1 ? std::string(x.what) + " " + x.toward
                                               : std::string(x.what) + (sending ? ": the send to" : ": the receive from");
    const std::string peer = whom < 0 ? "any rank" : "rank " + std::to_string(whom);
    throw timeout_error(whom, what + " " + peer + " under tag " + std::to_string(x.t), "",
                        std::chrono::duration<double>(now - x.started).count());
  }

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
  void take(communicator& o) noexcept {
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
    bounced(communicator& c, std::size_t bytes)
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
    communicator& c_;
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

}  // namespace ddl
