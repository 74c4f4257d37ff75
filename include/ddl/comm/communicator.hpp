#pragma once
/// \file
/// `ddl::communicator<Strategy, Transport>`: the user-facing collectives,
/// blocking and asynchronous. It checks arguments on the caller's thread
/// (clear `ddl::invalid_argument` on misuse, thrown by the call itself), owns
/// the reusable workspace, numbers calls so their messages never mix, and
/// hands the strategy raw, validated pointers. Asynchronous calls run on the
/// communicator's progress engine (`comm/progress.hpp`) in issue order;
/// blocking calls issued meanwhile queue behind them. The class is the
/// public calls; below it `detail::collective_jobs` (comm/jobs.hpp: what
/// each call runs) and `detail::communicator_core` (comm/core.hpp: state,
/// running, stamps, the call check).
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ddl/comm/jobs.hpp"

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
class communicator : public detail::collective_jobs<Strategy, Transport> {
  using jobs = detail::collective_jobs<Strategy, Transport>;
  using a2a_schedule = typename jobs::a2a_schedule;
  using bounce = typename jobs::bounce;
  using jobs::all_gather_job;
  using jobs::all_reduce_job;
  using jobs::all_to_all_job;
  using jobs::all_to_all_name;
  using jobs::all_to_all_schedule_for;
  using jobs::args;
  using jobs::barrier_job;
  using jobs::broadcast_job;
  using jobs::broadcast_model;
  using jobs::broadcasts_;
  using jobs::checked;
  using jobs::gather_job;
  using jobs::gather_through_stages;
  using jobs::give_up;
  using jobs::print;
  using jobs::reduce_job;
  using jobs::reduce_scatter_job;
  using jobs::reduce_through_stages;
  using jobs::run_now;
  using jobs::scatter_job;
  using jobs::stamp;
  using jobs::submit;
  using jobs::tag_of;
  using jobs::take;
  using jobs::transfer;
  using jobs::transport_;

 public:
  using typename jobs::completion;
  using jobs::link_topology;
  using jobs::pending;
  using jobs::rank;
  using jobs::size;
  using jobs::strategy;
  using jobs::transport;
  /// \param t the transport; must outlive the communicator.
  /// \param s the strategy (its box, order or topology, where it has one);
  ///        throws `topology_error` on every rank if it does not fit the group.
  /// \param o settings; defaults read `DDL_TIMEOUT`, `DDL_CHUNK_BYTES`, ...
  communicator(Transport& t, Strategy s, options o) : jobs(t, std::move(s), o) {}
  /// With a default-constructed strategy.
  template <class S = Strategy, std::enable_if_t<std::is_default_constructible_v<S>, int> = 0>
  explicit communicator(Transport& t, options o = options::from_env()) : communicator(t, Strategy{}, o) {}
  /// With the settings the environment gives (`options::from_env()`).
  communicator(Transport& t, Strategy s) : communicator(t, std::move(s), options::from_env()) {}
  /// Moving finishes the source's pending collectives first.
  communicator(communicator&&) noexcept = default;
  /// As the move constructor.
  communicator& operator=(communicator&&) noexcept = default;

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
  /// In-place `all_reduce_async`.
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
  /// As `reduce_scatter`, returning at once (the buffers and `done` as in `all_reduce_async`).
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
  /// As `all_gather`, returning at once (the buffers and `done` as in `all_reduce_async`).
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
  /// As `all_to_all` (equal parts), returning at once (the buffers and `done` as in `all_reduce_async`).
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
  /// As `all_to_all` with counts per peer, returning at once (the buffers and `done` as in `all_reduce_async`).
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
  /// As `gather`, returning at once (the buffers and `done` as in `all_reduce_async`).
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
  /// As `scatter`, returning at once (the buffers and `done` as in `all_reduce_async`).
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
  /// As `reduce`, returning at once (the buffers and `done` as in `all_reduce_async`).
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
  /// As `broadcast`, returning at once (the buffer and `done` as in `all_reduce_async`).
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
  /// As `barrier`, returning at once (`done` as in `all_reduce_async`).
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
    return this->template transfer<1>("send", "to", peer, message_tag, std::move(post), std::move(done));
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
    return this->template transfer<1>("recv", "from", peer, message_tag, std::move(post), std::move(done));
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
    return this->template transfer<2>("sendrecv", "to", dest, message_tag, std::move(post), std::move(done), source);
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
    return this->template transfer<1>("recv_any", "from", -1, message_tag, std::move(post), std::move(done));
  }

};

}  // namespace ddl
