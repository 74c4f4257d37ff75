// ddl-bench: collective bandwidth in the layout of nccl-tests, every
// strategy side by side with the memory-traffic floor of this machine (and,
// over MPI, the MPI call doing the same job), measured in the same run on the
// same buffers.
//
//   ddl-bench --ranks 8 -b 4K -e 256M -f 2 -n 20 -w 5 [-d float] [-o sum]
//             [--collective all_reduce|reduce_scatter|all_gather|broadcast]
//             [--strategy ring|multi_ring|recursive_doubling|halving_doubling|auto|all]
//             [--dims 2x2x2] [--explain] [--transport local] [--csv] [-c 1]
//
// size is the whole vector S: the all-reduce's buffer, the reduce-scatter's
// input, the all-gather's output, the broadcast's buffer (reduce-scatter and
// all-gather round it down to a multiple of n elements, so MPI's _block and
// Allgather calls apply). Columns follow nccl-tests: algbw = bytes / time,
// busbw = algbw * 2(n-1)/n (all-reduce), (n-1)/n (reduce-scatter,
// all-gather), 1 (broadcast). floor_eff = t_floor / t, where t_floor is the
// time the same n threads take to copy their own S-byte buffer (each reads and
// writes S bytes: the 2 n S bytes of traffic any all-reduce must at least
// cause). A ring all-reduce moves 5 (n-1) S bytes, so its ideal floor_eff is
// 2n / (5(n-1)): 53% at n = 4.
#include <ddl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "support.hpp"

#ifdef DDL_BENCH_MPI
#include <ddl/mpi.hpp>
#endif
#ifdef DDL_BENCH_GLOO
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#endif

#ifdef DDL_BENCH_COMMIT_HEADER
#include "ddl_bench_commit.hpp"  // generated at build time (cmake/ddl_commit.cmake)
#endif
#ifndef DDL_BENCH_COMMIT
#define DDL_BENCH_COMMIT "unknown"
#endif

namespace {

const char* const collective_names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
enum class collective { all_reduce, reduce_scatter, all_gather, broadcast };

const char* const strategy_names[] = {"ring",     "multi_ring", "recursive_doubling", "halving_doubling",
                                      "one_shot", "two_shot",   "auto"};

struct settings {
  std::size_t min_bytes = 4096, max_bytes = 256u << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  bool check = true, csv = false, explain = false;
  int ranks = 4;
  std::string transport = "local", dims;
  std::vector<std::string> strategies{"ring"};
  bool all_strategies = false;  // --strategy all: those the transport cannot run are left out
  ddl::dtype type = ddl::dtype::float32;
  ddl::op oper = ddl::op::sum;
  std::size_t chunk_bytes = 0;  // 0: the library default
  std::vector<std::string> baselines;  // mpi, gloo
  collective coll = collective::all_reduce;
  const char* coll_name() const { return collective_names[static_cast<int>(coll)]; }
};

// nccl-tests' bus-bandwidth factor of the collective over n ranks.
double bus_factor(collective c, int n) {
  if (n < 2) return 0;
  switch (c) {
    case collective::all_reduce: return 2.0 * (n - 1) / n;
    case collective::reduce_scatter:
    case collective::all_gather: return 1.0 * (n - 1) / n;
    case collective::broadcast: return 1;
  }
  return 0;
}

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "ddl-bench: %s\n"
               "usage: ddl-bench [--transport local|mpi] [--ranks N] [--baseline mpi,gloo]\n"
               "                 [--collective all_reduce|reduce_scatter|all_gather|broadcast]\n"
               "                 [--strategy ring|multi_ring|recursive_doubling|halving_doubling|one_shot|two_shot|auto|all[,...]]\n"
               "                 [--dims AxBx...] [--explain]\n"
               "                 [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-c 0|1]\n"
               "                 [-d int32|int64|float|double|half|bfloat16] [-o sum|prod|min|max|avg]\n"
               "                 [--chunk BYTES] [--csv]\n"
               "sizes take K, M, G suffixes (powers of 1024); --dims is the multi_ring box and the\n"
               "extents of auto's topology (link costs: DDL_TOPOLOGY, else the transport's defaults)\n",
               error.c_str());
  std::exit(2);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t a = 0;
  for (;;) {
    const std::size_t b = s.find(sep, a);
    out.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return out;
    a = b + 1;
  }
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("flag " + a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "-b") s.min_bytes = ddl::detail::parse_bytes("-b", value());
      else if (a == "-e") s.max_bytes = ddl::detail::parse_bytes("-e", value());
      else if (a == "-f") s.factor = std::stod(value());
      else if (a == "-n") s.iters = std::stoi(value());
      else if (a == "-w") s.warmup = std::stoi(value());
      else if (a == "-c") s.check = std::stoi(value()) != 0;
      else if (a == "-d") s.type = ddl::parse_dtype(value());
      else if (a == "-o") s.oper = ddl::parse_op(value());
      else if (a == "--ranks") s.ranks = std::stoi(value());
      else if (a == "--transport") s.transport = value();
      else if (a == "--baseline") s.baselines = split(value(), ',');
      else if (a == "--strategy") s.strategies = split(value(), ',');
      else if (a == "--collective") {
        const std::string v = value();
        const auto* c = std::find(std::begin(collective_names), std::end(collective_names), v);
        if (c == std::end(collective_names))
          usage("unknown collective '" + v + "' (available: all_reduce, reduce_scatter, all_gather, broadcast)");
        s.coll = static_cast<collective>(c - std::begin(collective_names));
      }
      else if (a == "--dims") s.dims = value();
      else if (a == "--explain") s.explain = true;
      else if (a == "--chunk") s.chunk_bytes = ddl::detail::parse_bytes("--chunk", value());
      else if (a == "--csv") s.csv = true;
      else if (a == "-h" || a == "--help") usage("help");
      else usage("unknown flag '" + a + "'");
    } catch (const std::invalid_argument&) {
      usage("bad value for " + a);
    } catch (const ddl::error& e) {
      usage(e.what());
    }
  }
  if (s.transport != "local" && s.transport != "mpi") usage("unknown transport '" + s.transport + "' (available: local, mpi)");
  for (const auto& b : s.baselines)
    if (b != "mpi" && b != "gloo") usage("unknown baseline '" + b + "' (available: mpi, gloo; they need --transport mpi)");
  if (!s.baselines.empty() && s.transport != "mpi") usage("--baseline needs --transport mpi (run under mpirun)");
  s.all_strategies = s.strategies.size() == 1 && s.strategies[0] == "all";
  if (s.all_strategies) s.strategies.assign(std::begin(strategy_names), std::end(strategy_names));
  for (const auto& name : s.strategies)
    if (std::find(std::begin(strategy_names), std::end(strategy_names), name) == std::end(strategy_names))
      usage("unknown strategy '" + name + "' (available: ring, multi_ring, recursive_doubling, halving_doubling, one_shot, two_shot, auto, all)");
  if (s.ranks < 1) usage("--ranks must be at least 1");
  if (s.factor <= 1 && s.min_bytes != s.max_bytes) usage("-f must be > 1");
  if (s.iters < 1 || s.warmup < 0) usage("-n must be >= 1 and -w >= 0");
  if (s.max_bytes < s.min_bytes) usage("-e must be >= -b");
  return s;
}

// The topology auto plans with: DDL_TOPOLOGY, else --dims with the local
// transport's default link costs, else one level of all ranks.
ddl::topology bench_topology(const settings& s) {
  using L = ddl::default_link<ddl::local_transport>;
  ddl::topology fallback;
  if (!s.dims.empty()) {
    for (const auto& e : split(s.dims, 'x')) fallback.add(ddl::level{std::stoi(e), L::bandwidth, L::latency, 0});
  } else {
    fallback = ddl::topology::uniform(s.ranks, L::bandwidth, L::latency);
  }
  return ddl::topology::from_env(s.ranks, fallback);
}

ddl::dynamic_extents bench_box(const ddl::topology& t) {
  std::vector<int> e;
  for (std::size_t l = 0; l < t.count(); ++l) e.push_back(t[l].extent);
  return ddl::dynamic_extents(e.begin(), e.end());
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown cpu";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct result {
  double t_oop = 0, t_ip = 0;  // < 0: not measured
  long wrong_oop = 0, wrong_ip = 0;
  std::string note;
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
  std::function<void(std::byte*, std::size_t)> prepare;
  bool ip_block_at_own_offset = true;
};

// The rank's block of `count` elements: equal blocks (counts are multiples of n).
ddl::block own_block(std::size_t count, int n, int r) { return ddl::block_of(count, n, r); }

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
      m.note = [comm, dt](std::size_t bytes) {
        const ddl::broadcast_plan p = comm->broadcast_plan_for(bytes, dt);
        return p.algo == ddl::broadcast_plan::algorithm::chain
                   ? "chain of " + std::to_string(p.segments) + " segments"
                   : std::string("binomial tree");
      };
      break;
  }
  if constexpr (std::is_same_v<Strategy, ddl::auto_strategy>) {
    if (s.coll == collective::all_reduce) {
      m.note = [comm](std::size_t bytes) {
        const auto& strat = comm->strategy();
        const ddl::plan p = strat.choose(bytes);
        const ddl::plan ip = strat.choose(bytes, ddl::candidates::all, true);
        char model[48];
        std::snprintf(model, sizeof model, " [model %.1f us]", p.seconds * 1e6);
        std::string note = ddl::describe(strat.topo(), p) + model;
        if (ip.algo != p.algo || ip.dims != p.dims) note += "; in place " + ddl::describe(strat.topo(), ip);
        return note;
      };
    }
  }
  return m;
}

template <class Transport>
std::vector<impl> ddl_impls(Transport& t, const settings& s, const ddl::topology& topo, const ddl::options& opts) {
  std::vector<impl> impls;
  // Broadcast is the communicator's own (tree or chain), whatever the strategy.
  if (s.coll == collective::broadcast) {
    impls.push_back(make_impl("ddl:broadcast", t, ddl::ring{}, opts, s));
    return impls;
  }
  for (const auto& name : s.strategies) {
    if (name == "ring") impls.push_back(make_impl("ddl:ring", t, ddl::ring{}, opts, s));
    else if (name == "recursive_doubling") impls.push_back(make_impl("ddl:rec_doubling", t, ddl::recursive_doubling{}, opts, s));
    else if (name == "halving_doubling") impls.push_back(make_impl("ddl:halv_doubling", t, ddl::halving_doubling{}, opts, s));
    else if (name == "one_shot" || name == "two_shot") {
      if constexpr (ddl::has_peer_memory_v<Transport>) {
        if (name == "one_shot") impls.push_back(make_impl("ddl:one_shot", t, ddl::one_shot{}, opts, s));
        else impls.push_back(make_impl("ddl:two_shot", t, ddl::two_shot{}, opts, s));
      } else if (!s.all_strategies) {
        usage(name + " reads peers' buffers in place: it runs on --transport local only");
      }
    } else if (name == "auto") impls.push_back(make_impl("ddl:auto", t, ddl::auto_strategy(topo), opts, s));
    else {
      const auto box = bench_box(topo);
      impls.push_back(make_impl("ddl:multi_ring", t, ddl::multi_ring<ddl::dynamic_extents>(box), opts, s));
      impls.back().note = [box](std::size_t) { return box.str(); };
    }
  }
  return impls;
}

// The sizes of the sweep: whole elements; for reduce-scatter and all-gather
// whole multiples of n elements (at least n).
std::vector<std::size_t> sweep(const settings& s, int n) {
  const std::size_t es = ddl::size_of(s.type);
  const std::size_t unit =
      es * (s.coll == collective::reduce_scatter || s.coll == collective::all_gather ? static_cast<std::size_t>(n) : 1);
  std::vector<std::size_t> sizes;
  for (double b = static_cast<double>(s.min_bytes); b <= static_cast<double>(s.max_bytes) * 1.0000001; b *= s.factor) {
    const std::size_t bytes = std::max(unit, static_cast<std::size_t>(b) / unit * unit);
    if (bytes && (sizes.empty() || sizes.back() != bytes)) sizes.push_back(bytes);
    if (s.factor <= 1) break;
  }
  return sizes;
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
  std::unique_ptr<std::byte[]> in_buf(new std::byte[cap]), out_buf(new std::byte[cap]), own_expected;
  std::memset(in_buf.get(), 0, cap);
  std::memset(out_buf.get(), 0, cap);
  std::byte* expected = shared_expected;
  if (!expected) {
    own_expected.reset(new std::byte[cap]);
    expected = own_expected.get();
  }
  std::byte* in = in_buf.get();
  std::byte* out = out_buf.get();
  std::vector<row> rows(sizes.size());

  auto measure = [&](auto&& prepare, auto&& body) {
    std::vector<double> ts;
    for (int it = 0; it < s.warmup + s.iters; ++it) {
      prepare();
      barrier();
      const auto t0 = std::chrono::steady_clock::now();
      body();
      barrier();
      const auto t1 = std::chrono::steady_clock::now();
      if (it >= s.warmup) ts.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    return median(ts);
  };

  ddl::visit_dtype(s.type, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::size_t bytes = sizes[k], count = bytes / es;
      T* I = reinterpret_cast<T*>(in);
      T* O = reinterpret_cast<T*>(out);
      T* E = reinterpret_cast<T*>(expected);
      for (std::size_t i = 0; i < count; ++i) I[i] = ddl_test::to_element<T>(ddl_test::input_value(s.type, s.oper, r, i));
      // What element i of the whole vector must end as: the reduction
      // (all-reduce, reduce-scatter), its owner's input (all-gather), the
      // root's input (broadcast).
      const std::size_t per_rank = count / static_cast<std::size_t>(n);
      auto want = [&](std::size_t i) -> T {
        switch (s.coll) {
          case collective::all_gather:
            return ddl_test::to_element<T>(ddl_test::input_value(s.type, s.oper, static_cast<int>(i / per_rank), i));
          case collective::broadcast: return ddl_test::to_element<T>(ddl_test::input_value(s.type, s.oper, 0, i));
          default: return ddl_test::expected_value<T>(s.oper, n, i);
        }
      };
      const ddl::block fill = shared_expected ? ddl::block_of(count, n, r) : ddl::block{0, count};
      if (s.check)
        for (std::size_t i = fill.offset; i < fill.offset + fill.size; ++i) E[i] = want(i);
      // Wrong elements of this rank's result: its block for reduce-scatter
      // (at the start of `out`, or at its own offset in place as `ip` says).
      auto count_wrong = [&](bool in_place, const impl& m) {
        long w = 0;
        if (!s.check) return w;
        if (s.coll == collective::reduce_scatter) {
          const ddl::block b = own_block(count, n, r);
          const std::size_t at = in_place && m.ip_block_at_own_offset ? b.offset : 0;
          for (std::size_t i = 0; i < b.size; ++i) w += !ddl_test::same_bits(O[at + i], E[b.offset + i]);
        } else {
          for (std::size_t i = 0; i < count; ++i) w += !ddl_test::same_bits(O[i], E[i]);
        }
        return w;
      };
      auto nothing = [] {};
      row& rw = rows[k];
      rw.bytes = bytes;
      rw.count = count;
      rw.impls.resize(impls.size());
      rw.floor_s = measure(nothing, [&] { std::memcpy(out, in, bytes); });
      barrier();  // expected[] complete
      for (std::size_t j = 0; j < impls.size(); ++j) {
        result& res = rw.impls[j];
        if (impls[j].prepare) impls[j].prepare(out, count);
        if (impls[j].oop) {
          res.t_oop = measure(nothing, [&] { impls[j].oop(in, out, count); });
          res.wrong_oop = count_wrong(false, impls[j]);
        } else {
          res.t_oop = -1;
        }
        res.t_ip = measure([&] { std::memcpy(out, in, bytes); }, [&] { impls[j].ip(out, count); });
        res.wrong_ip = count_wrong(true, impls[j]);
        res.note = impls[j].note(bytes);
      }
      barrier();  // nobody rewrites expected[] while others count
    }
  });
  return rows;
}

// Rows of rank 0 with every rank's wrong counts added in.
void add_wrong(std::vector<row>& into, const std::vector<row>& from) {
  for (std::size_t k = 0; k < into.size(); ++k)
    for (std::size_t j = 0; j < into[k].impls.size(); ++j) {
      into[k].impls[j].wrong_oop += from[k].impls[j].wrong_oop;
      into[k].impls[j].wrong_ip += from[k].impls[j].wrong_ip;
    }
}

std::vector<row> run_local(const settings& s, const ddl::topology& topo, std::vector<std::string>& labels) {
  ddl::options opts = ddl::options::from_env();
  if (s.chunk_bytes) opts.chunk_bytes = s.chunk_bytes;
  const auto sizes = sweep(s, s.ranks);
  std::unique_ptr<std::byte[]> expected(new std::byte[sizes.empty() ? 8 : sizes.back()]);
  ddl_test::thread_barrier bar(s.ranks);
  std::vector<std::vector<row>> per_rank(static_cast<std::size_t>(s.ranks));
  std::mutex m;
  ddl::local_fabric::run(s.ranks, [&](ddl::local_transport& t) {
    auto impls = ddl_impls(t, s, topo, opts);
    if (t.rank() == 0) {
      std::lock_guard<std::mutex> lock(m);
      for (const auto& i : impls) labels.push_back(i.label);
    }
    per_rank[static_cast<std::size_t>(t.rank())] =
        rank_sweep(t.rank(), t.size(), s, impls, [&] { bar.arrive_and_wait(); }, expected.get());
  });
  std::vector<row> rows = per_rank[0];
  for (std::size_t r = 1; r < per_rank.size(); ++r) add_wrong(rows, per_rank[r]);
  return rows;
}

#ifdef DDL_BENCH_MPI
MPI_Datatype mpi_type(ddl::dtype t) {
  switch (t) {
    case ddl::dtype::int32: return MPI_INT32_T;
    case ddl::dtype::int64: return MPI_INT64_T;
    case ddl::dtype::float32: return MPI_FLOAT;
    case ddl::dtype::float64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}
MPI_Op mpi_op(ddl::op o) {
  switch (o) {
    case ddl::op::sum: return MPI_SUM;
    case ddl::op::prod: return MPI_PROD;
    case ddl::op::min: return MPI_MIN;
    case ddl::op::max: return MPI_MAX;
    default: return MPI_OP_NULL;
  }
}

#ifdef DDL_BENCH_GLOO
template <class T>
const gloo::ReductionFunction<T>* gloo_fn(ddl::op o) {
  switch (o) {
    case ddl::op::prod: return gloo::ReductionFunction<T>::product;
    case ddl::op::min: return gloo::ReductionFunction<T>::min;
    case ddl::op::max: return gloo::ReductionFunction<T>::max;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

// Gloo over TCP on loopback, rendezvous through a file store every rank sees.
struct gloo_baseline {
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::string dir;

  gloo_baseline(MPI_Comm comm) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char path[256] = "";
    if (rank == 0) {
      std::snprintf(path, sizeof path, "/tmp/ddl-bench-gloo-XXXXXX");
      if (!mkdtemp(path)) throw std::runtime_error("mkdtemp failed");
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, comm);
    dir = path;
    gloo::rendezvous::FileStore store(dir);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->connectFullMesh(store, dev);
    MPI_Barrier(comm);
    if (rank == 0) std::system(("rm -rf " + dir).c_str());
  }

  template <template <class> class Algo>
  impl make(const std::string& label, const settings& s) {
    impl m;
    m.label = label;
    auto algo = std::make_shared<std::shared_ptr<gloo::Algorithm>>();
    auto ctx = context;
    const ddl::dtype dt = s.type;
    const ddl::op op = s.oper;
    m.prepare = [algo, ctx, dt, op](std::byte* buf, std::size_t count) {
      algo->reset();
      ddl::visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t> ||
                      std::is_same_v<T, std::int32_t>) {
          using G = std::conditional_t<std::is_same_v<T, std::int32_t>, int, T>;
          *algo = std::make_shared<Algo<G>>(ctx, std::vector<G*>{reinterpret_cast<G*>(buf)}, static_cast<int>(count),
                                            gloo_fn<G>(op));
        }
      });
    };
    m.ip = [algo](std::byte*, std::size_t) { (*algo)->run(); };
    return m;
  }
};
#endif

std::vector<row> run_mpi(const settings& s, std::vector<std::string>& labels, ddl::topology& topo, std::string& found) {
  ddl::mpi_cluster cluster(MPI_COMM_WORLD);
  auto& t = cluster.transport();
  found = cluster.report();
  topo = cluster.topo();
  if (!s.dims.empty()) {  // --dims re-shapes the detected costs' extents
    ddl::topology shaped;
    const auto& base = cluster.topo();
    std::size_t l = 0;
    for (const auto& e : split(s.dims, 'x')) {
      ddl::level lv = base[std::min(l++, base.count() - 1)];
      lv.extent = std::stoi(e);
      shaped.add(lv);
    }
    shaped.check(t.size());
    topo = shaped;
  }
  ddl::options opts = ddl::options::from_env();
  if (s.chunk_bytes) opts.chunk_bytes = s.chunk_bytes;
  auto impls = ddl_impls(t, s, topo, opts);
  const MPI_Comm comm = t.comm();
  for (const auto& b : s.baselines) {
    if (b == "mpi") {
      const MPI_Datatype dt = mpi_type(s.type);
      const MPI_Op op = mpi_op(s.oper);
      const bool reduces = s.coll == collective::all_reduce || s.coll == collective::reduce_scatter;
      if (dt == MPI_DATATYPE_NULL || (reduces && op == MPI_OP_NULL)) {
        found += std::string("; MPI not compared: MPI has no ") +
                 (dt == MPI_DATATYPE_NULL ? "datatype for " + std::string(ddl::name_of(s.type)) : "avg op");
        continue;
      }
      const int n = t.size();
      const std::size_t es = ddl::size_of(s.type);
      impl m;
      switch (s.coll) {
        case collective::all_reduce:
          m.label = "MPI_Allreduce";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            MPI_Allreduce(in, out, static_cast<int>(c), dt, op, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) { MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(c), dt, op, comm); };
          break;
        case collective::reduce_scatter:
          m.label = "MPI_Reduce_scatter_block";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            MPI_Reduce_scatter_block(in, out, static_cast<int>(c / n), dt, op, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, static_cast<int>(c / n), dt, op, comm);
          };
          m.ip_block_at_own_offset = false;  // MPI_IN_PLACE leaves the block at the start
          break;
        case collective::all_gather: {
          const int r = t.rank();
          m.label = "MPI_Allgather";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            const int k = static_cast<int>(c / n);
            MPI_Allgather(in + static_cast<std::size_t>(r) * (c / n) * es, k, dt, out, k, dt, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, static_cast<int>(c / n), dt, comm);
          };
          break;
        }
        case collective::broadcast:
          m.label = "MPI_Bcast";
          m.ip = [=](std::byte* buf, std::size_t c) { MPI_Bcast(buf, static_cast<int>(c), dt, 0, comm); };
          break;
      }
      impls.push_back(std::move(m));
    } else {
      if (s.coll != collective::all_reduce) {
        found += "; gloo not compared: all_reduce only";
        continue;
      }
#ifdef DDL_BENCH_GLOO
      if (s.oper == ddl::op::avg || s.type == ddl::dtype::float16 || s.type == ddl::dtype::bfloat16) {
        found += "; gloo not compared for this dtype/op";
        continue;
      }
      static gloo_baseline g(comm);
      impls.push_back(g.make<gloo::AllreduceRingChunked>("gloo:ring_chunked", s));
      impls.push_back(g.make<gloo::AllreduceHalvingDoubling>("gloo:halving_doubl", s));
#else
      found += "; gloo not compared: ddl-bench was built without Gloo (install libgloo-dev and reconfigure)";
#endif
    }
  }
  for (const auto& i : impls) labels.push_back(i.label);
  // The timing barrier yields while it waits: MPICH's MPI_Barrier busy-polls,
  // and on oversubscribed cores every timed iteration then lasts whole
  // scheduler ticks (4 ms here, even around a memcpy).
  auto quiet_barrier = [comm] {
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    for (int done = 0;;) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (done) break;
      std::this_thread::yield();
    }
  };
  std::vector<row> rows = rank_sweep(t.rank(), t.size(), s, impls, quiet_barrier, nullptr);
  // Wrong counts of every rank, summed on rank 0.
  std::vector<long> w;
  for (const auto& rw : rows)
    for (const auto& res : rw.impls) {
      w.push_back(res.wrong_oop);
      w.push_back(res.wrong_ip);
    }
  std::vector<long> total(w.size());
  MPI_Reduce(w.data(), total.data(), static_cast<int>(w.size()), MPI_LONG, MPI_SUM, 0, comm);
  std::size_t i = 0;
  for (auto& rw : rows)
    for (auto& res : rw.impls) {
      res.wrong_oop = total[i++];
      res.wrong_ip = total[i++];
    }
  return rows;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  settings s = parse(argc, argv);
#ifdef DDL_BENCH_MPI
  std::unique_ptr<ddl::mpi_session> mpi;
  if (s.transport == "mpi") {
    mpi = std::make_unique<ddl::mpi_session>(argc, argv);
    MPI_Comm_size(MPI_COMM_WORLD, &s.ranks);
  }
#endif
  std::vector<row> rows;
  std::vector<std::string> labels;
  ddl::topology topo;
  std::string found;
  int rank = 0;
  try {
    if (s.transport == "mpi") {
#ifdef DDL_BENCH_MPI
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      rows = run_mpi(s, labels, topo, found);
#else
      usage("this ddl-bench was built without MPI (configure with DDL_ENABLE_MPI=ON)");
#endif
    } else {
      topo = bench_topology(s);
      rows = run_local(s, topo, labels);
    }
  } catch (const ddl::error& e) {
    std::fprintf(stderr, "ddl-bench: %s\n", e.what());
    return 1;
  } catch (const std::invalid_argument&) {
    std::fprintf(stderr, "ddl-bench: --dims must look like 2x2x2\n");
    return 2;
  }
  if (rank != 0) return 0;
  if (s.explain) {
    const bool peer_memory = s.transport == "local";  // threads read each other's buffers (one_shot, two_shot)
    for (const auto& rw : rows)
      std::printf("%s\n", ddl::explain(topo, static_cast<double>(rw.bytes), {ddl::candidates::all, peer_memory}).c_str());
  }
  const int n = s.ranks;
  const double bus = bus_factor(s.coll, n);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  long wrong_total = 0;
  auto wrong_str = [&](long w) { return s.check ? std::to_string(w) : std::string("N/A"); };

  if (s.csv) {
    std::printf("size,count,type,redop,impl,placement,time_us,algbw_GBps,busbw_GBps,wrong,floor_us,floor_eff,ranks,transport,note,"
                "collective\n");
    for (const row& rw : rows) {
      std::printf("%zu,%zu,%s,%s,floor:copy,-,%.3f,%.4f,%.4f,,%.3f,1.0000,%d,%s,,%s\n", rw.bytes, rw.count,
                  ddl::name_of(s.type), ddl::name_of(s.oper), rw.floor_s * 1e6, rw.bytes / rw.floor_s / 1e9,
                  rw.bytes / rw.floor_s / 1e9 * bus, rw.floor_s * 1e6, n, s.transport.c_str(), s.coll_name());
      for (std::size_t j = 0; j < rw.impls.size(); ++j)
        for (int p = 0; p < 2; ++p) {
          const result& res = rw.impls[j];
          const double t = p ? res.t_ip : res.t_oop;
          if (t < 0) continue;
          const long w = p ? res.wrong_ip : res.wrong_oop;
          wrong_total += w;
          std::printf("%zu,%zu,%s,%s,%s,%s,%.3f,%.4f,%.4f,%s,%.3f,%.4f,%d,%s,%s,%s\n", rw.bytes, rw.count,
                      ddl::name_of(s.type), ddl::name_of(s.oper), labels[j].c_str(), p ? "in-place" : "out-of-place",
                      t * 1e6, rw.bytes / t / 1e9, rw.bytes / t / 1e9 * bus, wrong_str(w).c_str(), rw.floor_s * 1e6,
                      rw.floor_s / t, n, s.transport.c_str(), res.note.c_str(), s.coll_name());
        }
    }
  } else {
    std::string names;
    for (const auto& x : labels) names += (names.empty() ? "" : ",") + x;
    std::printf("# ddl-bench %s: transport %s, %d ranks, %s; %d iterations (+%d warm-up), median time\n",
                s.coll_name(), s.transport.c_str(), n, names.c_str(), s.iters, s.warmup);
    std::printf("# topology (auto, multi_ring): %s%s%s\n", topo.str().c_str(), found.empty() ? "" : "  <- ",
                found.c_str());
    std::printf("# machine: %s, %s, %ld cores; commit %s\n", host, cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
                DDL_BENCH_COMMIT);
    std::printf("# floor:copy = the same %d ranks each copying their own buffer (2nS bytes of traffic, the least\n"
                "#   any all-reduce causes); floor_eff = t_floor / t (ring all-reduce ideal: 2n/(5(n-1)) = %.0f%%)\n",
                n, n > 1 ? 100.0 * 2 * n / (5.0 * (n - 1)) : 100.0);
    if (s.coll != collective::all_reduce)
      std::printf("# size = the whole vector (reduce_scatter's input, all_gather's output, broadcast's buffer, root 0);"
                  " busbw factor %.3f\n", bus);
    const char* hfmt = "#%11s %12s %8s %6s %18s %10s %8s %8s %6s %6s %10s %8s %8s %6s %6s  %s\n";
    std::printf("#\n");
    std::printf(hfmt, "", "", "", "", "", "out-of-place", "", "", "", "", "in-place", "", "", "", "", "");
    std::printf(hfmt, "size", "count", "type", "redop", "impl", "time", "algbw", "busbw", "#wrong", "floor", "time",
                "algbw", "busbw", "#wrong", "floor", "plan");
    std::printf(hfmt, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "_eff", "(us)", "(GB/s)",
                "(GB/s)", "", "_eff", "");
    for (const row& rw : rows) {
      std::printf(" %11zu %12zu %8s %6s %18s %10.1f %8.2f %8.2f %6s %6s\n", rw.bytes, rw.count, ddl::name_of(s.type),
                  ddl::name_of(s.oper), "floor:copy", rw.floor_s * 1e6, rw.bytes / rw.floor_s / 1e9,
                  rw.bytes / rw.floor_s / 1e9 * bus, "-", "1.00");
      for (std::size_t j = 0; j < rw.impls.size(); ++j) {
        const result& res = rw.impls[j];
        wrong_total += res.wrong_oop + res.wrong_ip;
        char oop[128] = "";
        if (res.t_oop >= 0)
          std::snprintf(oop, sizeof oop, "%10.1f %8.2f %8.2f %6s %6.2f", res.t_oop * 1e6, rw.bytes / res.t_oop / 1e9,
                        rw.bytes / res.t_oop / 1e9 * bus, wrong_str(res.wrong_oop).c_str(), rw.floor_s / res.t_oop);
        else
          std::snprintf(oop, sizeof oop, "%10s %8s %8s %6s %6s", "-", "-", "-", "-", "-");
        std::printf(" %11zu %12zu %8s %6s %18s %s %10.1f %8.2f %8.2f %6s %6.2f  %s\n", rw.bytes, rw.count,
                    ddl::name_of(s.type), ddl::name_of(s.oper), labels[j].c_str(), oop, res.t_ip * 1e6,
                    rw.bytes / res.t_ip / 1e9, rw.bytes / res.t_ip / 1e9 * bus, wrong_str(res.wrong_ip).c_str(),
                    rw.floor_s / res.t_ip, res.note.c_str());
      }
    }
    std::printf("# out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
  }
  if (wrong_total) {
    std::fprintf(stderr, "ddl-bench: %ld wrong results\n", wrong_total);
    return 1;
  }
  return 0;
}
