#pragma once
// ddl-bench's command line: the settings, their parsing (errors are usage
// errors naming the flag), the topology auto plans with, and the sweep.
#include <ddl.hpp>

#include "sweep.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddl_bench {

const char* const collective_names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all",
                                        "gather",     "scatter",        "reduce",     "sendrecv"};
/// `sendrecv`: point-to-point, not a collective: every rank sends its
/// buffer to the next rank and receives the previous one's (a ring shift,
/// nccl-tests' sendrecv), beside `MPI_Sendrecv`.
enum class collective { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, gather, scatter, reduce, sendrecv };

const char* const strategy_names[] = {"ring",     "multi_ring", "pipelined", "direct_first", "recursive_doubling",
                                      "halving_doubling", "one_shot", "two_shot", "two_shot_read",
                                      "two_shot_stream", "auto"};

struct settings : sweep_flags {  // -b -e -f -n
  int warmup = 5;
  int batch = 1;  // --batch K: calls per timed sample, back to back (the time is per call)
  bool check = true, csv = false, explain = false;
  bool shared_buffers = false;  // --shared-buffers: every implementation's buffers in a ddl::shared_buffer
  bool timed_writes = false;    // --timed-writes: each call's time includes the write of its input before it
  int ranks = 4;
  std::string transport = "local";
  int spawn = 0;  // --spawn N: start N ranks of this run here (ucx), as ddl-run would
  std::vector<int> dims;  // --dims AxBx...: positive extents
  int segments = 8;       // --segments K: the pipelined multi-ring's segments
  std::vector<std::string> strategies{"ring"};
  bool all_strategies = false;  // --strategy all: those the transport cannot run are left out
  ddl::dtype type = ddl::dtype::float32;
  ddl::op oper = ddl::op::sum;
  std::size_t chunk_bytes = 0;  // 0: the library default
  std::vector<std::string> baselines;  // mpi, gloo, oneccl, ring
  collective coll = collective::all_reduce;
  const char* coll_name() const { return collective_names[static_cast<int>(coll)]; }
};

// The ring shift of `--collective sendrecv`, every row alike: rank r sends
// to `next` and receives from `prev`.
struct ring_peers {
  int next, prev;
  ring_peers(int r, int n) : next((r + 1) % n), prev((r + n - 1) % n) {}
};

// nccl-tests' bus-bandwidth factor of the collective over n ranks.
inline double bus_factor(collective c, int n) {
  if (n < 2) return 0;
  switch (c) {
    case collective::all_reduce: return 2.0 * (n - 1) / n;
    case collective::reduce_scatter:
    case collective::all_gather:
    case collective::all_to_all:
    case collective::gather:
    case collective::scatter: return 1.0 * (n - 1) / n;
    case collective::broadcast:
    case collective::reduce:
    case collective::sendrecv: return 1;
  }
  return 0;
}

[[noreturn]] inline void usage(const std::string& error) {
  std::fprintf(stderr,
               "ddl-bench: %s\n"
               "usage: ddl-bench [--transport local|mpi|ucx] [--ranks N] [--spawn N] [--baseline mpi,gloo,oneccl,ring]\n"
               "                 [--collective all_reduce|reduce_scatter|all_gather|broadcast|all_to_all|\n"
               "                               gather|scatter|reduce|sendrecv]\n"
               "                 [--strategy ring|multi_ring|pipelined|direct_first|recursive_doubling|halving_doubling|one_shot|two_shot|two_shot_read|two_shot_stream|auto|all[,...]]\n"
               "                 [--dims AxBx...] [--segments K] [--explain]\n"
               "                 [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--batch K] [-c 0|1]\n"
               "                 [-d int32|int64|float|double|half|bfloat16] [-o sum|prod|min|max|avg]\n"
               "                 [--chunk BYTES] [--shared-buffers] [--timed-writes] [--csv]\n"
               "sizes take K, M, G suffixes (powers of 1024); --dims is the multi_ring box and the\n"
               "extents of auto's topology (link costs: DDL_TOPOLOGY, else the transport's defaults);\n"
               "pipelined is that multi_ring cut into --segments K segments (default 8) pipelined across its levels;\n"
               "--explain prints the planner's table per size, and after the run what auto's trials measured;\n"
               "each of the ITERS samples is barrier, K calls back to back (default 1), barrier, and reports a\n"
               "call's share (in place, the K calls reduce the running result again; a separate call is checked);\n"
               "before each sample every rank writes its input afresh (into the input buffer out of place, the\n"
               "output in place), so both placements read memory just written, as a trainer's gradients;\n"
               "--timed-writes times that write with the call, before every call of the batch (as a trainer's\n"
               "backward pass writes its gradients before each all-reduce; floor:copy then is a write and a copy):\n"
               "out of place a rank's write over lines its peers read in the last call, in place the call's own;\n"
               "--shared-buffers allocates every implementation's buffers as ddl::shared_buffer (MPI ranks of\n"
               "one machine read a peer's buffer where it lies instead of a copy in its stage);\n"
               "sendrecv sends every rank's buffer to the next rank, received from the previous one (in place:\n"
               "into a buffer of the size, then copied back, as MPI_Sendrecv_replace does; 2 ranks or more);\n"
               "--transport ucx runs on processes started by ddl-run, by --spawn N (this machine), or by mpiexec\n"
               "(then --baseline mpi,gloo run beside it in the same job);\n"
               "--baseline oneccl adds Intel's oneCCL (ddl-bench built with DDL_ONECCL_ROOT, run under its Intel MPI):\n"
               "all_reduce, reduce_scatter, all_gather, broadcast;\n"
               "--baseline ring adds hand:ring, a ring written by hand (one blocking exchange a step: MPI_Sendrecv\n"
               "over MPI, isend/irecv on threads; a plain loop reduces): all_reduce, reduce_scatter, all_gather;\n"
               "int32, int64, float, double; sum, prod, min, max\n",
               error.c_str());
  std::exit(2);
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t a = 0;
  for (;;) {
    const std::size_t b = s.find(sep, a);
    out.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return out;
    a = b + 1;
  }
}

inline settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("flag " + a + " needs a value");
      return argv[++i];
    };
    try {
      if (sweep_flags::names(a)) s.take(a, value());
      else if (a == "-w") s.warmup = std::stoi(value());
      else if (a == "--batch") s.batch = std::stoi(value());
      else if (a == "-c") s.check = std::stoi(value()) != 0;
      else if (a == "--shared-buffers") s.shared_buffers = true;
      else if (a == "--timed-writes") s.timed_writes = true;
      else if (a == "-d") s.type = ddl::parse_dtype(value());
      else if (a == "-o") s.oper = ddl::parse_op(value());
      else if (a == "--ranks") s.ranks = std::stoi(value());
      else if (a == "--transport") s.transport = value();
      else if (a == "--spawn") s.spawn = std::stoi(value());
      else if (a == "--baseline") s.baselines = split(value(), ',');
      else if (a == "--strategy") s.strategies = split(value(), ',');
      else if (a == "--collective") {
        const std::string v = value();
        const auto* c = std::find(std::begin(collective_names), std::end(collective_names), v);
        if (c == std::end(collective_names))
          usage("unknown collective '" + v + "' (available: all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, gather, scatter, reduce, sendrecv)");
        s.coll = static_cast<collective>(c - std::begin(collective_names));
      }
      else if (a == "--dims") {
        const std::string v = value();
        for (const auto& e : split(v, 'x')) {
          std::size_t used = 0;
          int x = 0;
          try {
            x = std::stoi(e, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used == 0 || used != e.size() || x < 1) usage("--dims '" + v + "' must look like 2x2x2 (positive extents)");
          s.dims.push_back(x);
        }
      }
      else if (a == "--segments") {
        s.segments = std::stoi(value());
        if (s.segments < 1 || s.segments > 24) usage("--segments must be 1-24");
      }
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
  if (s.transport != "local" && s.transport != "mpi" && s.transport != "ucx")
    usage("unknown transport '" + s.transport + "' (available: local, mpi, ucx)");
  if (s.spawn < 0 || (s.spawn > 0 && s.transport != "ucx")) usage("--spawn N needs --transport ucx and N >= 1");
  for (const auto& b : s.baselines) {
    if (b != "mpi" && b != "gloo" && b != "oneccl" && b != "ring")
      usage("unknown baseline '" + b + "' (available: mpi, gloo, oneccl (--transport mpi or ucx under mpirun), ring)");
    if (b != "ring" && s.transport == "local") usage("--baseline " + b + " needs --transport mpi or ucx (run under mpirun)");
  }
  s.all_strategies = s.strategies.size() == 1 && s.strategies[0] == "all";
  if (s.all_strategies) s.strategies.assign(std::begin(strategy_names), std::end(strategy_names));
  for (const auto& name : s.strategies)
    if (std::find(std::begin(strategy_names), std::end(strategy_names), name) == std::end(strategy_names)) {
      std::string known;
      for (const char* k : strategy_names) known += std::string(k) + ", ";
      usage("unknown strategy '" + name + "' (available: " + known + "all)");
    }
  if (s.ranks < 1) usage("--ranks must be at least 1");
  if (const std::string p = s.problem(1); !p.empty()) usage(p);
  if (s.warmup < 0) usage("-w must be >= 0");
  if (s.batch < 1 || s.batch > 100000) usage("--batch must be 1-100000");
  return s;
}

// The topology auto plans with: DDL_TOPOLOGY, else --dims with the local
// transport's default link costs, else one level of all ranks.
inline ddl::topology bench_topology(const settings& s) {
  using L = ddl::default_link<ddl::local_transport>;
  ddl::topology fallback;
  if (!s.dims.empty()) {
    for (int e : s.dims) fallback.add(ddl::level{e, L::bandwidth, L::latency, 0});
  } else {
    fallback = ddl::topology::uniform(s.ranks, L::bandwidth, L::latency);
  }
  return ddl::topology::from_env(s.ranks, fallback);
}

inline ddl::dynamic_extents bench_box(const ddl::topology& t) {
  std::vector<int> e;
  for (std::size_t l = 0; l < t.count(); ++l) e.push_back(t[l].extent);
  return ddl::dynamic_extents(e.begin(), e.end());
}

// The sizes of the sweep: whole elements; for reduce-scatter and all-gather
// whole multiples of n elements (at least n).
inline std::vector<std::size_t> sweep(const settings& s, int n) {
  const std::size_t es = ddl::size_of(s.type);
  const bool blocks = s.coll == collective::reduce_scatter || s.coll == collective::all_gather ||
                      s.coll == collective::all_to_all || s.coll == collective::gather ||
                      s.coll == collective::scatter;
  const std::size_t unit = es * (blocks ? static_cast<std::size_t>(n) : 1);
  return s.sizes(unit);
}

}  // namespace ddl_bench
