// ddl-bench: collective bandwidth in the layout of nccl-tests, every
// strategy side by side with the memory-traffic floor of this machine (and,
// over MPI, the MPI call doing the same job), measured in the same run on the
// same buffers.
//
//   ddl-bench --ranks 8 -b 4K -e 256M -f 2 -n 20 -w 5 [-d float] [-o sum]
//             [--collective all_reduce|reduce_scatter|all_gather|broadcast|all_to_all|gather|scatter|
//                           reduce]
//             [--strategy ring|multi_ring|recursive_doubling|halving_doubling|auto|all]
//             [--dims 2x2x2] [--explain] [--transport local|mpi|ucx] [--spawn N] [--baseline mpi,gloo,ring] [--csv] [-c 1]
//
// size is the whole vector S: the all-reduce's buffer, the reduce-scatter's
// input, the all-gather's output, the broadcast's buffer, the all-to-all's
// input and output, the gather's root's output, the scatter's root's input,
// the reduce's buffer (root 0; all but all-reduce, broadcast and reduce round it down to a multiple of n
// elements, so MPI's _block, Allgather, Alltoall, Gather and Scatter calls
// apply). Columns follow nccl-tests: algbw = bytes / time, busbw = algbw *
// 2(n-1)/n (all-reduce), (n-1)/n (reduce-scatter, all-gather, all-to-all,
// gather, scatter), 1 (broadcast, reduce). floor_eff = t_floor / t, where t_floor is the
// time the same n threads take to copy their own S-byte buffer (each reads and
// writes S bytes: the 2 n S bytes of traffic any all-reduce must at least
// cause). A ring all-reduce moves 5 (n-1) S bytes, so its ideal floor_eff is
// 2n / (5(n-1)): 53% at n = 4.
#include <ddl.hpp>
#include <ddl/rendezvous/spawn.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "ddl_bench/local_runner.hpp"
#include "ddl_bench/measure.hpp"
#include "ddl_bench/mpi_runner.hpp"
#include "ddl_bench/ucx_runner.hpp"
#include "ddl_bench/options.hpp"

#ifdef DDL_BENCH_COMMIT_HEADER
#include "ddl_bench_commit.hpp"  // generated at build time (cmake/ddl_commit.cmake)
#endif
#ifndef DDL_BENCH_COMMIT
#define DDL_BENCH_COMMIT "unknown"
#endif

using namespace ddl_bench;

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown cpu";
}

}  // namespace

int main(int argc, char** argv) {
  settings s = parse(argc, argv);
  if (s.spawn > 0) {  // this run again, as --spawn N ranks on this machine
    std::vector<std::string> args{"/proc/self/exe"};
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--spawn") ++i;
      else args.emplace_back(argv[i]);
    }
    return ddl::spawn_local(s.spawn, args);
  }
#ifndef DDL_BENCH_UCX
  if (s.transport == "ucx") usage("this ddl-bench was built without UCX (install libucx-dev and reconfigure)");
#endif
#ifdef DDL_BENCH_MPI
  std::unique_ptr<ddl::mpi_session> mpi;
  bool mpi_ranks = s.transport == "mpi";
#ifdef DDL_BENCH_UCX
  mpi_ranks = mpi_ranks || (s.transport == "ucx" && under_mpi_launcher());
#endif
  if (mpi_ranks) {
    mpi = std::make_unique<ddl::mpi_session>(argc, argv);
    MPI_Comm_size(MPI_COMM_WORLD, &s.ranks);
  }
#endif
  std::vector<row> rows;
  std::vector<std::string> labels;
  ddl::topology topo;
  std::string found;
  int rank = 0;
#ifdef DDL_BENCH_MPI
  ddl::plan_for mpi_allowed;  // what auto weighs over MPI (set by run_mpi)
#endif
  ddl::plan_for explain_allowed = ddl::plan_for::transport<ddl::local_transport>();  // ... over UCX (run_ucx)
  try {
    if (s.transport == "mpi") {
#ifdef DDL_BENCH_MPI
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      rows = run_mpi(s, labels, topo, found, mpi_allowed);
#else
      usage("this ddl-bench was built without MPI (configure with DDL_ENABLE_MPI=ON)");
#endif
    } else if (s.transport == "ucx") {
#ifdef DDL_BENCH_UCX
      ddl::plan_for ucx_allowed;
      rows = run_ucx(s, labels, topo, found, ucx_allowed);
      const ddl::launch_info who = ddl::launch_from_env();
      rank = who.rank;
      s.ranks = who.size;
      explain_allowed = ucx_allowed;
#endif
    } else {
      topo = bench_topology(s);
      rows = run_local(s, topo, labels, found);
    }
  } catch (const ddl::error& e) {
    std::fprintf(stderr, "ddl-bench: %s\n", e.what());
    return 1;
  }
  if (rank != 0) return 0;
  if (s.explain) {
    // What auto weighs over the transport.
    ddl::plan_for allowed = explain_allowed;
#ifdef DDL_BENCH_MPI
    if (s.transport == "mpi") allowed = mpi_allowed;
#endif
    for (const auto& rw : rows)
      std::printf("%s\n", ddl::explain(topo, static_cast<double>(rw.bytes), allowed).c_str());
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
    std::printf("# ddl-bench %s: transport %s, %d ranks, %s; %d iterations (+%d warm-up), median time%s\n",
                s.coll_name(), s.transport.c_str(), n, names.c_str(), s.iters, s.warmup,
                s.batch > 1 ? (" per call of batches of " + std::to_string(s.batch)).c_str() : "");
    std::printf("# topology (auto, multi_ring): %s%s%s\n", topo.str().c_str(), found.empty() ? "" : "  <- ",
                found.c_str());
    std::printf("# machine: %s, %s, %ld cores; commit %s\n", host, cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
                DDL_BENCH_COMMIT);
    if (s.shared_buffers)
      std::printf("# buffers: ddl::shared_buffer, the same for every implementation (over MPI ddl's peers read\n"
                  "#   them where they lie)\n");
    if (s.timed_writes)
      std::printf("# --timed-writes: each call's time includes its rank's write of the input just before it\n"
                  "#   (into the input buffer out of place, the output in place), as a backward pass writes gradients\n");
    else
      std::printf("# each sample's input was just written by its rank (out of place and in place alike)\n");
    std::printf("# floor:copy = the same %d ranks each copying their own buffer%s (2nS bytes of traffic, the least\n"
                "#   any all-reduce causes); floor_eff = t_floor / t (ring all-reduce ideal: 2n/(5(n-1)) = %.0f%%)\n",
                n, s.timed_writes ? ", after that write" : "", n > 1 ? 100.0 * 2 * n / (5.0 * (n - 1)) : 100.0);
    if (s.coll != collective::all_reduce)
      std::printf("# size = the whole vector (reduce_scatter's input, all_gather's output, broadcast's buffer, root 0; "
                  "all_to_all's input and output, gather's root's output, scatter's root's input, reduce's buffer);"
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
    if (s.explain)  // what auto's trials measured, per size (each candidate's slowest rank; * its choice)
      for (const row& rw : rows)
        for (const result& res : rw.impls) std::printf("%s", res.measured.c_str());
    std::printf("# out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
  }
  if (wrong_total) {
    std::fprintf(stderr, "ddl-bench: %ld wrong results\n", wrong_total);
    return 1;
  }
  return 0;
}
