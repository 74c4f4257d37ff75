#pragma once
// ddl-bench's measurement: each implementation (a ddl strategy, or a
// baseline) behind two calls, and one rank's sweep over all of them on
// buffers allocated and touched once, with every result checked.
#include <ddl.hpp>
#include <ddl/testing.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "options.hpp"

namespace ddl_bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct result {
  double t_oop = 0, t_ip = 0;  // < 0: not measured
  long wrong_oop = 0, wrong_ip = 0;
  std::string note;
  std::string measured;  // what auto measured at this size (its explain's "measured at" lines), if anything
};
struct row {
  std::size_t bytes = 0, count = 0;
  double floor_s = 0;
  std::vector<result> impls;
};

// One implementation as seen by a rank: a communicator (or a baseline)
// behind two calls, both given the whole vector (`count` elements, S bytes).
// `oop` may be empty (no out-of-place form: Gloo, broadcast); `prepare` runs
// untimed before each size (baselines that bind buffers). An in-place
// reduce-scatter leaves the rank's block where `ip_block_at_own_offset` says:
// at the block's own offset (ddl) or at the start (MPI_IN_PLACE).
struct impl {
  std::string label;
  std::function<void(const std::byte*, std::byte*, std::size_t)> oop;
  std::function<void(std::byte*, std::size_t)> ip;
  std::function<std::string(std::size_t)> note = [](std::size_t) { return std::string(); };
  /// The trials' figures at a size (`--explain` prints them after the table).
  std::function<std::string(std::size_t)> measured = [](std::size_t) { return std::string(); };
  std::function<void(std::byte*, std::size_t)> prepare;
  bool ip_block_at_own_offset = true;
  /// Whether `auto`'s trials may run (under `DDL_TUNE`, and `DDL_TUNE_COPIES` for all-gathers,
  /// broadcasts and the forms that give the same bits): each size then warms up for as many calls
  /// as its class measures on top of `-w`, so the timed calls run the choice.
  bool measures = false;
};

// The rank's block of `count` elements: equal blocks (counts are multiples of n).
inline ddl::block own_block(std::size_t count, int n, int r) { return ddl::block_of(count, n, r); }

template <class Strategy, class Transport>
impl make_impl(std::string label, Transport& t, Strategy st, const ddl::options& o, const settings& s) {
  auto comm = std::make_shared<ddl::communicator<Strategy, Transport>>(t, std::move(st), o);
  const ddl::dtype dt = s.type;
  const ddl::op op = s.oper;
  const std::size_t es = ddl::size_of(dt);
  const int n = t.size(), r = t.rank();
  impl m;
  m.label = std::move(label);
  switch (s.coll) {
    case collective::all_reduce:
      m.oop = [comm, dt, op](const std::byte* in, std::byte* out, std::size_t c) {
        comm->all_reduce(ddl::const_buffer_view{in, c, dt, {}}, ddl::buffer_view{out, c, dt, {}}, op);
      };
      m.ip = [comm, dt, op](std::byte* buf, std::size_t c) { comm->all_reduce(ddl::buffer_view{buf, c, dt, {}}, op); };
      break;
    case collective::reduce_scatter:
      m.oop = [comm, dt, op, n, r](const std::byte* in, std::byte* out, std::size_t c) {
        comm->reduce_scatter(ddl::const_buffer_view{in, c, dt, {}}, ddl::buffer_view{out, own_block(c, n, r).size, dt, {}}, op);
      };
      m.ip = [comm, dt, op, n, r, es](std::byte* buf, std::size_t c) {
        const ddl::block b = own_block(c, n, r);
        comm->reduce_scatter(ddl::const_buffer_view{buf, c, dt, {}}, ddl::buffer_view{buf + b.offset * es, b.size, dt, {}}, op);
      };
      break;
    case collective::all_gather:
      m.oop = [comm, dt, n, r, es](const std::byte* in, std::byte* out, std::size_t c) {
        const ddl::block b = own_block(c, n, r);
        comm->all_gather(ddl::const_buffer_view{in + b.offset * es, b.size, dt, {}}, ddl::buffer_view{out, c, dt, {}});
      };
      m.ip = [comm, dt, n, r, es](std::byte* buf, std::size_t c) {
        const ddl::block b = own_block(c, n, r);
        comm->all_gather(ddl::const_buffer_view{buf + b.offset * es, b.size, dt, {}}, ddl::buffer_view{buf, c, dt, {}});
      };
      break;
    case collective::broadcast:
      m.ip = [comm, dt](std::byte* buf, std::size_t c) { comm->broadcast(ddl::buffer_view{buf, c, dt, {}}, 0); };
      m.note = [comm, dt](std::size_t bytes) { return comm->broadcast_plan_for(bytes, dt).describe(); };
      if (o.tune_copies_bytes > 0 && o.broadcast == ddl::broadcast_algorithm::automatic)
        m.measures = true;
      break;
    case collective::all_to_all:
      m.oop = [comm, dt](const std::byte* in, std::byte* out, std::size_t c) {
        comm->all_to_all(ddl::const_buffer_view{in, c, dt, {}}, ddl::buffer_view{out, c, dt, {}});
      };
      m.ip = [comm, dt](std::byte* buf, std::size_t c) {
        comm->all_to_all(ddl::const_buffer_view{buf, c, dt, {}}, ddl::buffer_view{buf, c, dt, {}});
      };
      m.note = [comm](std::size_t bytes) {  // the schedule, out of place and in place
        const std::string a = comm->all_to_all_plan_for(bytes), b = comm->all_to_all_plan_for(bytes, true);
        return a == b ? a : a + "; in place " + b;
      };
      break;
    // Root 0; the ranks' blocks at their own offsets in `in` (gather, out
    // of place) or in the one buffer (in place: the root's own block where
    // it lies); a scatter lands at the start of `out` out of place.
    case collective::gather:
      m.oop = [comm, dt, n, r, es](const std::byte* in, std::byte* out, std::size_t c) {
        const ddl::block b = own_block(c, n, r);
        comm->gather(ddl::const_buffer_view{in + b.offset * es, b.size, dt, {}},
                     r == 0 ? ddl::buffer_view{out, c, dt, {}} : ddl::buffer_view{}, 0);
      };
      m.ip = [comm, dt, n, r, es](std::byte* buf, std::size_t c) {
        const ddl::block b = own_block(c, n, r);
        comm->gather(ddl::const_buffer_view{buf + b.offset * es, b.size, dt, {}},
                     r == 0 ? ddl::buffer_view{buf, c, dt, {}} : ddl::buffer_view{}, 0);
      };
      break;
    case collective::reduce:  // root 0; the other ranks' input left as it was
      m.oop = [comm, dt, op, r](const std::byte* in, std::byte* out, std::size_t c) {
        comm->reduce(ddl::const_buffer_view{in, c, dt, {}}, r == 0 ? ddl::buffer_view{out, c, dt, {}} : ddl::buffer_view{},
                     op, 0);
      };
      m.ip = [comm, dt, op, r](std::byte* buf, std::size_t c) {
        comm->reduce(ddl::const_buffer_view{buf, c, dt, {}}, r == 0 ? ddl::buffer_view{buf, c, dt, {}} : ddl::buffer_view{},
                     op, 0);
      };
      break;
    // A ring shift (`sendrecv`): the whole buffer to rank r + 1, rank r - 1's into `out`;
    // in place into a buffer of the call's size (grown and touched before
    // each size, untimed), then copied back, as MPI_Sendrecv_replace does.
    case collective::sendrecv: {
      if (n < 2) throw ddl::invalid_argument("--collective sendrecv needs 2 ranks or more");
      const ring_peers peers(r, n);
      const int next = peers.next, prev = peers.prev;
      m.oop = [comm, dt, next, prev](const std::byte* in, std::byte* out, std::size_t c) {
        comm->sendrecv(ddl::const_buffer_view{in, c, dt, {}}, next, ddl::buffer_view{out, c, dt, {}}, prev, 0);
      };
      auto spare = std::make_shared<std::vector<std::byte>>();
      m.prepare = [spare, es](std::byte*, std::size_t c) {
        if (spare->size() < c * es) spare->resize(c * es);
      };
      m.ip = [comm, dt, next, prev, spare, es](std::byte* buf, std::size_t c) {
        comm->sendrecv(ddl::const_buffer_view{buf, c, dt, {}}, next, ddl::buffer_view{spare->data(), c, dt, {}}, prev, 0);
        std::memcpy(buf, spare->data(), c * es);
      };
      break;
    }
    case collective::scatter:
      m.oop = [comm, dt, n, r](const std::byte* in, std::byte* out, std::size_t c) {
        comm->scatter(r == 0 ? ddl::const_buffer_view{in, c, dt, {}} : ddl::const_buffer_view{},
                      ddl::buffer_view{out, own_block(c, n, r).size, dt, {}}, 0);
      };
      m.ip = [comm, dt, n, r, es](std::byte* buf, std::size_t c) {
        const ddl::block b = own_block(c, n, r);
        comm->scatter(r == 0 ? ddl::const_buffer_view{buf, c, dt, {}} : ddl::const_buffer_view{},
                      ddl::buffer_view{buf + b.offset * es, b.size, dt, {}}, 0);
      };
      break;
  }
  if constexpr (std::is_same_v<Strategy, ddl::auto_strategy>) {
    // The lines of auto's explain that give the trials at `bytes` (any collective).
    m.measured = [comm](std::size_t bytes) {
      const std::string e = comm->strategy().explain(bytes), at = "measured at " + std::to_string(bytes) + " bytes";
      std::string lines;
      for (std::size_t b = 0, nl; b < e.size(); b = nl + 1) {
        nl = e.find('\n', b);
        if (nl == std::string::npos) nl = e.size();
        const std::string line = e.substr(b, nl - b);
        if (line.find(at) != std::string::npos) lines += line + "\n";
      }
      return lines;
    };
    if ((s.coll == collective::all_gather || s.coll == collective::reduce_scatter) && o.tune_copies_bytes > 0) {
      m.measures = true;
      const bool gather = s.coll == collective::all_gather;
      m.note = [comm, gather](std::size_t bytes) {  // the plan the timed calls ran (measured, else the model's)
        const auto& strat = comm->strategy();
        auto running = [&](bool in_place) {
          return gather ? strat.running_all_gather(bytes, in_place) : strat.running_reduce_scatter(bytes, in_place);
        };
        const ddl::plan p = running(false), ip = running(true);
        const std::string a = ddl::describe(strat.topo(), p), b = ddl::describe(strat.topo(), ip);
        return a == b ? a : a + "; in place " + b;
      };
    }
    if (s.coll == collective::all_reduce) {
      // The trials: under DDL_TUNE, and under DDL_TUNE_COPIES for two_shot
      // through the stages or reading the peers (`plan::reads`).
      if (o.tune_bytes > 0 || o.tune_copies_bytes > 0) m.measures = true;
      // The plans the timed calls ran (measured, else the model's) and the
      // model's prediction for its own choice.
      const ddl::reduction red{s.type, s.oper};
      m.note = [comm, red](std::size_t bytes) {
        const auto& strat = comm->strategy();
        const ddl::plan model = strat.choose(bytes), model_ip = strat.choose(bytes, ddl::candidates::all, true);
        const ddl::plan p = strat.running(bytes, false, red), ip = strat.running(bytes, true, red);
        auto same = [](const ddl::plan& a, const ddl::plan& b) { return a.algo == b.algo && a.dims == b.dims && a.reads == b.reads &&
                                                                     a.streams == b.streams; };
        char pred[48];
        std::snprintf(pred, sizeof pred, " [model %.1f us]", model.seconds * 1e6);
        std::string note = ddl::describe(strat.topo(), p);
        if (!same(ip, p)) note += "; in place " + ddl::describe(strat.topo(), ip);
        if (!same(p, model) || !same(ip, model_ip)) {
          note += " (measured; model " + ddl::describe(strat.topo(), model);
          if (!same(model_ip, model)) note += ", in place " + ddl::describe(strat.topo(), model_ip);
          note += ")";
        }
        return note + pred;
      };
    }
  }
  return m;
}

// The detected topology with --dims' extents (the detected levels' costs,
// the last one's for further dimensions); the detected one without --dims.
inline ddl::topology shaped(const ddl::topology& base, const std::vector<int>& dims, int n) {
  if (dims.empty()) return base;
  ddl::topology out;
  std::size_t l = 0;
  for (int e : dims) {
    ddl::level lv = base[std::min(l++, base.count() - 1)];
    lv.extent = e;
    out.add(lv);
  }
  out.check(n);
  return out;
}

template <class Transport>
inline std::vector<impl> ddl_impls(Transport& t, const settings& s, const ddl::topology& topo, const ddl::options& opts) {
  std::vector<impl> impls;
  // Broadcast is the communicator's own, whatever the strategy: the chosen
  // algorithm (priced on the run's topology, as under `auto`), and with
  // `--strategy all` each algorithm forced beside it.
  if (s.coll == collective::broadcast) {
    impls.push_back(make_impl("ddl:broadcast", t, ddl::auto_strategy(topo), opts, s));
    if (s.all_strategies) {
      const std::pair<const char*, ddl::broadcast_algorithm> forced[] = {
          {"ddl:bcast_binomial", ddl::broadcast_algorithm::binomial},
          {"ddl:bcast_chain", ddl::broadcast_algorithm::chain},
          {"ddl:bcast_scatter_ag", ddl::broadcast_algorithm::scatter_allgather}};
      for (const auto& [label, algo] : forced) {
        ddl::options o = opts;
        o.broadcast = algo;
        impls.push_back(make_impl(label, t, ddl::auto_strategy(topo), o, s));
      }
      if constexpr (ddl::has_wait_until_v<Transport>) {
        if (ddl::peers_reachable(t)) {  // through the stages: threads, MPI ranks of one machine
          ddl::options o = opts;
          o.broadcast = ddl::broadcast_algorithm::direct;
          impls.push_back(make_impl("ddl:bcast_direct", t, ddl::auto_strategy(topo), o, s));
        }
      }
    }
    return impls;
  }
  // So are the all-to-all, gather, scatter and reduce (one algorithm each;
  // the reduce on auto's reduce-scatter above the stages' sizes), and the
  // point-to-point ring shift.
  if (s.coll == collective::all_to_all || s.coll == collective::gather || s.coll == collective::scatter ||
      s.coll == collective::reduce || s.coll == collective::sendrecv) {
    impls.push_back(make_impl(std::string("ddl:") + s.coll_name(), t, ddl::auto_strategy(topo), opts, s));
    return impls;
  }
  for (const auto& name : s.strategies) {
    if (name == "ring") impls.push_back(make_impl("ddl:ring", t, ddl::ring{}, opts, s));
    else if (name == "recursive_doubling") impls.push_back(make_impl("ddl:rec_doubling", t, ddl::recursive_doubling{}, opts, s));
    else if (name == "halving_doubling") impls.push_back(make_impl("ddl:halv_doubling", t, ddl::halving_doubling{}, opts, s));
    else if (name == "two_shot_read") {  // two_shot reading the peers' plain buffers (mpi, where the kernel lets it)
      if constexpr (ddl::has_read_peer_v<Transport>) {
        if (t.memory_readable())
          impls.push_back(make_impl("ddl:two_shot_read", t, ddl::two_shot{}.reading_peers(), opts, s));
        else if (!s.all_strategies)
          usage("two_shot_read copies from the peers' memory: over MPI every rank on one machine, the kernel "
                "letting them attach to each other (not DDL_MPI_CMA=0)");
      } else if (!s.all_strategies) {
        usage("two_shot_read copies from the peers' memory: it runs on --transport mpi only");
      }
    } else if (name == "two_shot_stream") {  // two_shot writing with streaming stores what its peers read next
      if constexpr (ddl::has_peer_stage_v<Transport>) {
        if (ddl::peers_reachable(t))
          impls.push_back(make_impl("ddl:two_shot_stream", t, ddl::two_shot{}.streaming_stages(), opts, s));
        else if (!s.all_strategies)
          usage("two_shot_stream writes the stages its peers read: over MPI every rank must be on one machine, "
                "sharing memory");
      } else if (!s.all_strategies) {
        usage("two_shot_stream writes memory its peers read: it runs on ranks that share it (mpi, local)");
      }
    } else if (name == "one_shot" || name == "two_shot") {
      if constexpr (ddl::reaches_peers_v<Transport>) {
        if (ddl::peers_reachable(t)) {
          if (name == "one_shot") impls.push_back(make_impl("ddl:one_shot", t, ddl::one_shot{}, opts, s));
          else impls.push_back(make_impl("ddl:two_shot", t, ddl::two_shot{}, opts, s));
        } else if (!s.all_strategies) {
          usage(name + " reads peers' memory: over MPI every rank must be on one machine, sharing memory "
                "(not DDL_MPI_SHM=0)");
        }
      } else if (!s.all_strategies) {
        usage(name + " reads peers' buffers: it runs on --transport local or mpi only");
      }
    } else if (name == "auto") impls.push_back(make_impl("ddl:auto", t, ddl::auto_strategy(topo), opts, s));
    else {  // the run's box: multi_ring, pipelined, or direct_first
      ddl::multi_ring<ddl::dynamic_extents> mr(bench_box(topo));
      if (name == "pipelined") mr.pipelined(s.segments);
      if (name == "direct_first") {
        // Its first level (the topology's innermost, a machine) through
        // shared memory: where that level's ranks share it.
        if (ddl::shared_levels(t, topo) < 1) {
          if (!s.all_strategies)
            usage("direct_first reads the memory of the ranks of the topology's first level: they must share it "
                  "(threads; MPI ranks of one machine, not DDL_MPI_SHM=0)");
          continue;
        }
        mr.direct_first();
      }
      impls.push_back(make_impl("ddl:" + name, t, mr, opts, s));
      impls.back().note = [d = mr.describe()](std::size_t) { return d.substr(d.find(' ') + 1); };
    }
  }
  return impls;
}

// One rank's sweep over every implementation, on buffers allocated once and
// touched once (first touch runs at ~0.4 GB/s here). With `shared_expected`
// the ranks are threads that each fill their block of one expected array;
// otherwise each rank computes every expected value itself. Returns this
// rank's view: its own times and its own wrong counts.
template <class Barrier>
std::vector<row> rank_sweep(int r, int n, const settings& s, std::vector<impl>& impls, Barrier&& barrier,
                            std::byte* shared_expected) {
  const std::size_t es = ddl::size_of(s.type);
  const auto sizes = sweep(s, n);
  const std::size_t cap = sizes.empty() ? es : sizes.back();
  // Zeroed either way (a shared_buffer starts so): every page touched once.
  ddl::shared_buffer shared_in(s.shared_buffers ? cap : 0), shared_out(s.shared_buffers ? cap : 0);
  std::vector<std::byte> in_buf(s.shared_buffers ? 0 : cap), out_buf(s.shared_buffers ? 0 : cap);
  // The inputs, written into `in` (out of place) or `out` (in place) before
  // every sample: each call reads memory its rank has just written, as a
  // trainer's fresh gradients are, in both placements alike.
  std::vector<std::byte> inputs(cap);
  std::unique_ptr<std::byte[]> own_expected;
  std::byte* expected = shared_expected;
  if (!expected) {
    own_expected.reset(new std::byte[cap]);
    expected = own_expected.get();
  }
  std::byte* in = s.shared_buffers ? shared_in.data() : in_buf.data();
  std::byte* out = s.shared_buffers ? shared_out.data() : out_buf.data();
  std::vector<row> rows(sizes.size());

  // A sample: `prepare`, a barrier, `s.batch` calls of `body` back to back,
  // a barrier; its time over the batch. The median of `s.iters` samples.
  // (The barriers are in the time: with one call a sample, a small call
  // reads the barrier's cost too, 6-10 us at 4 MPI ranks on 2 cores.)
  // With `--timed-writes`, `prepare` runs before every call, in the time.
  auto measure = [&](auto&& prepare, auto&& body, int extra_warmup = 0) {
    const int warmup = s.warmup + extra_warmup;
    std::vector<double> ts;
    for (int it = 0; it < warmup + s.iters; ++it) {
      if (!s.timed_writes) prepare();
      barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int b = 0; b < s.batch; ++b) {
        if (s.timed_writes) prepare();
        body();
      }
      barrier();
      const auto t1 = std::chrono::steady_clock::now();
      if (it >= warmup) ts.push_back(std::chrono::duration<double>(t1 - t0).count() / s.batch);
    }
    return median(ts);
  };

  ddl::visit_dtype(s.type, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::size_t bytes = sizes[k], count = bytes / es;
      T* I = reinterpret_cast<T*>(inputs.data());
      T* O = reinterpret_cast<T*>(out);
      T* E = reinterpret_cast<T*>(expected);
      for (std::size_t i = 0; i < count; ++i) I[i] = ddl::testing::to_element<T>(ddl::testing::input_value(s.type, s.oper, r, i));
      // What element i of the whole vector must end as: the reduction
      // (all-reduce, reduce-scatter), its owner's input (all-gather), the
      // root's input (broadcast, scatter), element q of rank j's block for
      // this rank (all-to-all: i = j * per_rank + q; this rank's own
      // expectation), the previous rank's input (sendrecv; its own too).
      const std::size_t per_rank = count / static_cast<std::size_t>(n);
      auto want = [&](std::size_t i) -> T {
        switch (s.coll) {
          case collective::all_gather:
          case collective::gather:
            return ddl::testing::to_element<T>(ddl::testing::input_value(s.type, s.oper, static_cast<int>(i / per_rank), i));
          case collective::all_to_all:
            return ddl::testing::to_element<T>(ddl::testing::input_value(
                s.type, s.oper, static_cast<int>(i / per_rank), static_cast<std::size_t>(r) * per_rank + i % per_rank));
          case collective::broadcast:
          case collective::scatter: return ddl::testing::to_element<T>(ddl::testing::input_value(s.type, s.oper, 0, i));
          case collective::sendrecv:
            return ddl::testing::to_element<T>(ddl::testing::input_value(s.type, s.oper, ring_peers(r, n).prev, i));
          default: return ddl::testing::expected_value<T>(s.oper, n, i);
        }
      };
      const ddl::block fill = shared_expected ? ddl::block_of(count, n, r) : ddl::block{0, count};
      if (s.check)
        for (std::size_t i = fill.offset; i < fill.offset + fill.size; ++i) E[i] = want(i);
      // Wrong elements of this rank's result: its block for reduce-scatter
      // and scatter (at the start of `out`, or at its own offset in place as
      // `ip` says); the root's alone for gather and reduce.
      auto count_wrong = [&](bool in_place, const impl& m) {
        long w = 0;
        if (!s.check || ((s.coll == collective::gather || s.coll == collective::reduce) && r != 0)) return w;
        if (s.coll == collective::reduce_scatter || s.coll == collective::scatter) {
          const ddl::block b = own_block(count, n, r);
          const std::size_t at = in_place && m.ip_block_at_own_offset ? b.offset : 0;
          for (std::size_t i = 0; i < b.size; ++i) w += !ddl::testing::same_bits(O[at + i], E[b.offset + i]);
        } else {
          for (std::size_t i = 0; i < count; ++i) w += !ddl::testing::same_bits(O[i], E[i]);
        }
        return w;
      };
      auto nothing = [] {};
      row& rw = rows[k];
      rw.bytes = bytes;
      rw.count = count;
      rw.impls.resize(impls.size());
      auto fresh_in = [&] { std::memcpy(in, inputs.data(), bytes); };
      auto fresh_out = [&] { std::memcpy(out, inputs.data(), bytes); };
      fresh_in();
      // The floor: a copy of the buffer (with `--timed-writes`, after the write of the input).
      auto copy_out = [&] { std::memcpy(out, in, bytes); };
      rw.floor_s = s.timed_writes ? measure(fresh_in, copy_out) : measure(nothing, copy_out);
      barrier();  // expected[] complete
      for (std::size_t j = 0; j < impls.size(); ++j) {
        result& res = rw.impls[j];
        if (impls[j].prepare) impls[j].prepare(out, count);
        const int trials = impls[j].measures ? ddl::detail::plan_tuner::most_calls_for(bytes) : 0;
        if (impls[j].oop) {
          res.t_oop = measure(fresh_in, [&] { impls[j].oop(in, out, count); }, trials);
          res.wrong_oop = count_wrong(false, impls[j]);
        } else {
          res.t_oop = -1;
        }
        res.t_ip = measure(fresh_out, [&] { impls[j].ip(out, count); }, trials);
        if (s.batch > 1) {  // the batch reduced the result again: check one call of its own
          fresh_out();
          barrier();
          impls[j].ip(out, count);
        }
        res.wrong_ip = count_wrong(true, impls[j]);
        res.note = impls[j].note(bytes);
        res.measured = impls[j].measured(bytes);
      }
      barrier();  // nobody rewrites expected[] while others count
    }
  });
  return rows;
}

// Rows of rank 0 with every rank's wrong counts added in.
inline void add_wrong(std::vector<row>& into, const std::vector<row>& from) {
  for (std::size_t k = 0; k < into.size(); ++k)
    for (std::size_t j = 0; j < into[k].impls.size(); ++j) {
      into[k].impls[j].wrong_oop += from[k].impls[j].wrong_oop;
      into[k].impls[j].wrong_ip += from[k].impls[j].wrong_ip;
    }
}

}  // namespace ddl_bench
