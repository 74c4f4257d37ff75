#pragma once
/// \file
/// The collectives' bodies (`collective_jobs`): what each call runs on the
/// progress engine (or inline when idle) once its arguments are checked,
/// choosing the path (through the stages, messages, a bounce through host
/// memory) and handing the strategy validated pointers; and the
/// point-to-point transfers, parked beside later calls while they wait.
#include "ddl/comm/core.hpp"

namespace ddl {
namespace detail {

template <class Strategy, class Transport>
class collective_jobs : public communicator_core<Strategy, Transport> {
  using core = communicator_core<Strategy, Transport>;

 public:
  using core::core;
  using completion = typename core::completion;
  using core::link_topology;
  using core::rank;
  using core::size;

 protected:
  using bounce = typename core::bounce;
  using bounced = typename core::bounced;
  using broadcast_tuner = typename core::broadcast_tuner;
  using core::bounce_context;
  using core::broadcasts_;
  using core::checks_calls;
  using core::context;
  using core::engine;
  using core::engine_;
  using core::guard;
  using core::host_;
  using core::opts_;
  using core::print;
  using core::sequence_;
  using core::stamp;
  using core::strategy_;
  using core::submit;
  using core::take;
  using core::transport_;
  using core::verify;
  using core::verify_parts;
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

};

}  // namespace detail
}  // namespace ddl
