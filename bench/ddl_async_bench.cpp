// ddl-async-bench: what asynchronous collectives and gradient buckets buy.
//
//   ddl-async-bench overlap   [common] [--model resnet50|transformer|FILE.csv] [--ratios 0,1,1.5]
//                             [--tflops X] [--bucket BYTES] [--last-bucket BYTES] [--separate]
//   ddl-async-bench overhead  [common] [-b 8 -e 64M -f 8]
//   ddl-async-bench broadcast [common] [-b 4K -e 64M -f 4]
//   common: [--transport local|mpi] [--ranks N] [-n ITERS] [-w WARMUP] [--csv]
//
// overlap: a backward pass replayed from a model's gradient-tensor list
// (bench/models/*.csv, sizes from the real model): gradient k becomes ready
// when the emulated compute reaches it, a timed wait as if a GPU computed
// (the CPU stays free for communication, as it would be). Compute per tensor
// is its backward FLOPs at a rate chosen so the whole pass takes R x the
// measured blocking all-reduce of all gradients (--ratios), or at --tflops.
// Rows: compute only; compute then one blocking all-reduce per tensor;
// compute then one blocking all-reduce of the fused gradients; bucketed and
// asynchronous (mark_ready as each gradient is computed, wait_all at the end).
// exposed = iteration - compute only; overlap = 1 - exposed / (blocking
// all-reduce of the fused gradients, measured alone).
//
// overhead: in-place all-reduce, blocking vs asynchronous (issue + wait),
// side by side per size. broadcast: ddl's broadcast beside MPI_Bcast.
//
// Times are per iteration, the slowest rank's, median over -n iterations.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <ddl.hpp>

#include "ddl_bench/sweep.hpp"
#include "models/gradient_list.hpp"
#ifdef DDL_BENCH_MPI
#include <ddl/mpi.hpp>
#endif

namespace {

using clock_type = std::chrono::steady_clock;

struct settings : ddl_bench::sweep_flags {  // -b -e -f (overhead, broadcast), -n
  settings() { iters = 10, min_bytes = 8, max_bytes = std::size_t(64) << 20, factor = 8; }
  std::string mode;
  std::string transport = "local";
  int ranks = 4;
  int warmup = 2;
  bool csv = false;
  std::string model = "resnet50";
  std::vector<double> ratios = {0, 1, 1.5};
  double tflops = 0;  // > 0: absolute compute rate instead of ratios
  std::size_t bucket_bytes = 0;  // 0: DDL_BUCKET_BYTES or the default
  long long last_bucket = -1;    // -1: the default tail split; 0: none (DDP's layout)
  bool separate = false;         // gradients in separate allocations (packed buckets)
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "%s%s"
               "usage: ddl-async-bench overlap|overhead|broadcast [--transport local|mpi] [--ranks N]\n"
               "         [-n ITERS] [-w WARMUP] [--csv]\n"
               "       overlap:   [--model resnet50|transformer|FILE.csv] [--ratios 0,1,1.5] [--tflops X]\n"
               "                  [--bucket BYTES] [--last-bucket BYTES (0: DDP's layout)] [--separate]\n"
               "       overhead, broadcast: [-b MIN] [-e MAX] [-f FACTOR]   (sizes take K, M, G)\n",
               error.empty() ? "" : ("ddl-async-bench: " + error + "\n").c_str(), "");
  std::exit(error == "help" ? 0 : 2);
}

settings parse(int argc, char** argv) {
  settings s;
  if (argc < 2) usage("name a mode: overlap, overhead or broadcast");
  s.mode = argv[1];
  if (s.mode == "-h" || s.mode == "--help") usage("help");
  if (s.mode != "overlap" && s.mode != "overhead" && s.mode != "broadcast") usage("unknown mode '" + s.mode + "'");
  if (s.mode == "broadcast") s.min_bytes = 4096, s.factor = 4;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("flag " + a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--transport") s.transport = value();
      else if (a == "--ranks") s.ranks = std::stoi(value());
      else if (ddl_bench::sweep_flags::names(a)) s.take(a, value());
      else if (a == "-w") s.warmup = std::stoi(value());
      else if (a == "--csv") s.csv = true;
      else if (a == "--model") s.model = value();
      else if (a == "--ratios") {
        s.ratios.clear();
        std::stringstream ss(value());
        for (std::string x; std::getline(ss, x, ',');) s.ratios.push_back(std::stod(x));
      } else if (a == "--tflops") s.tflops = std::stod(value());
      else if (a == "--bucket") s.bucket_bytes = ddl::detail::parse_bytes("--bucket", value());
      else if (a == "--last-bucket") s.last_bucket = static_cast<long long>(ddl::detail::parse_bytes("--last-bucket", value()));
      else if (a == "--separate") s.separate = true;
      else if (a == "-h" || a == "--help") usage("help");
      else usage("unknown flag '" + a + "'");
    } catch (const ddl::error& e) {
      usage(e.what());
    } catch (const std::exception&) {
      usage("bad value for " + a);
    }
  }
  if (s.transport != "local" && s.transport != "mpi") usage("unknown transport '" + s.transport + "'");
  if (s.ranks < 1) usage("--ranks must be at least 1");
  if (const std::string p = s.problem(4); !p.empty()) usage(p);
  if (s.warmup < 0) usage("-w must be >= 0");
  if (s.ratios.empty()) usage("--ratios needs at least one value");
  for (double r : s.ratios)
    if (!(r >= 0)) usage("--ratios must be >= 0");
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// --- the model's gradient tensors: bench/models/gradient_list.hpp ----------

using ddl_bench::load_model;
using ddl_bench::tensor_spec;

// --- one rank's work, on any transport ---------------------------------------

struct overlap_row {
  double ratio;
  std::string what;
  double iteration, compute, exposed, overlap;
};

template <class Comm>
double slowest(Comm& comm, double seconds) {
  comm.all_reduce(ddl::host_view(&seconds, 1), ddl::op::max);
  return seconds;
}

// Times `body` per iteration (barrier first), the slowest rank's, median.
template <class Comm, class Body>
double time_median(Comm& comm, const settings& s, Body&& body) {
  std::vector<double> t;
  for (int it = 0; it < s.warmup + s.iters; ++it) {
    comm.barrier();
    const auto start = clock_type::now();
    body();
    const double mine = std::chrono::duration<double>(clock_type::now() - start).count();
    const double all = slowest(comm, mine);
    if (it >= s.warmup) t.push_back(all);
  }
  return median(t);
}

template <class Transport>
std::vector<overlap_row> overlap_rank(Transport& t, const settings& s, const std::vector<tensor_spec>& model) {
  using comm_t = ddl::communicator<ddl::auto_strategy, Transport>;
  comm_t comm(t);
  const std::size_t n_tensors = model.size();
  std::size_t total = 0;
  for (const auto& m : model) total += m.elements;

  // Gradients: one flat buffer in forward order (as frameworks lay out
  // contiguous gradients), or one allocation each (--separate).
  std::vector<float> flat(s.separate ? 0 : total);
  std::vector<std::vector<float>> separate;
  std::vector<ddl::buffer_view> grads;  // forward order
  for (std::size_t k = 0, off = 0; k < n_tensors; off += model[k].elements, ++k) {
    if (s.separate) {
      separate.emplace_back(model[k].elements, 1.0f);
      grads.push_back(ddl::host_view(separate.back()));
    } else {
      grads.push_back(ddl::host_view(flat.data() + off, model[k].elements));
    }
  }
  std::fill(flat.begin(), flat.end(), 1.0f);
  std::vector<float> fused_copy(s.separate ? total : 0);  // the fused row's pack buffer
  comm.reserve_workspace(total * sizeof(float) * 2);

  ddl::bucket_options bo = ddl::bucket_options::from_env();
  if (s.bucket_bytes) {
    bo.bucket_bytes = s.bucket_bytes;
    bo.first_bucket_bytes = std::min(bo.first_bucket_bytes, s.bucket_bytes);
    bo.last_bucket_bytes = std::min(bo.last_bucket_bytes, s.bucket_bytes);
  }
  if (s.last_bucket >= 0) bo.last_bucket_bytes = static_cast<std::size_t>(s.last_bucket);
  ddl::bucketer<comm_t> buckets(comm, ddl::op::avg, bo);
  for (std::size_t k = n_tensors; k-- > 0;) buckets.add(grads[k]);  // backward order

  auto fused_all_reduce = [&] {
    if (!s.separate) {
      comm.all_reduce(ddl::host_view(flat), ddl::op::avg);
      return;
    }
    std::size_t off = 0;  // a framework without contiguous gradients packs first
    for (auto& g : separate) std::copy(g.begin(), g.end(), fused_copy.begin() + static_cast<std::ptrdiff_t>(off)), off += g.size();
    comm.all_reduce(ddl::host_view(fused_copy), ddl::op::avg);
    off = 0;
    for (auto& g : separate) std::copy_n(fused_copy.begin() + static_cast<std::ptrdiff_t>(off), g.size(), g.begin()), off += g.size();
  };
  const double comm_alone = time_median(comm, s, fused_all_reduce);

  std::vector<overlap_row> rows;
  std::vector<double> ratios = s.ratios;
  if (s.tflops > 0) ratios = {-1};
  double total_flop = 0;
  for (const auto& m : model) total_flop += m.backward_flop;
  const std::vector<double> share = ddl_bench::backward_shares(model);
  for (double ratio : ratios) {
    // Each gradient's ready time on the emulated timeline (backward order).
    const double compute_total = ratio < 0 ? total_flop / (s.tflops * 1e12) : ratio * comm_alone;
    std::vector<double> ready_at(n_tensors);
    double acc = 0;
    for (std::size_t j = 0; j < n_tensors; ++j) {
      acc += share[n_tensors - 1 - j] * compute_total;
      ready_at[j] = acc;
    }
    auto backward = [&](auto&& on_ready) {
      const auto start = clock_type::now();
      for (std::size_t j = 0; j < n_tensors; ++j) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<clock_type::duration>(
                                                  std::chrono::duration<double>(ready_at[j])));
        on_ready(j);
      }
    };
    const double compute = time_median(comm, s, [&] { backward([](std::size_t) {}); });
    const double per_tensor = time_median(comm, s, [&] {
      backward([](std::size_t) {});
      for (std::size_t k = n_tensors; k-- > 0;) comm.all_reduce(grads[k], ddl::op::avg);
    });
    const double fused = time_median(comm, s, [&] {
      backward([](std::size_t) {});
      fused_all_reduce();
    });
    const double bucketed = time_median(comm, s, [&] {
      backward([&](std::size_t j) { buckets.mark_ready(j); });
      buckets.wait_all();
    });
    const double shown_ratio = ratio < 0 ? compute / comm_alone : ratio;
    auto row = [&](const char* what, double it) {
      const double exposed = std::max(0.0, it - compute);
      rows.push_back({shown_ratio, what, it, compute, exposed, 1 - exposed / comm_alone});
    };
    row("compute only", compute);
    row("per-tensor blocking", per_tensor);
    row("fused blocking", fused);
    row("bucketed async", bucketed);
  }
  // Correctness: every gradient started at 1.0 and averages stay 1.0.
  std::size_t wrong = 0;
  for (const auto& g : grads)
    for (std::size_t i = 0; i < g.count; ++i) wrong += static_cast<const float*>(g.data)[i] != 1.0f;
  wrong = static_cast<std::size_t>(slowest(comm, static_cast<double>(wrong)));
  if (wrong) throw ddl::mismatch_error("overlap: " + std::to_string(wrong) + " gradient elements wrong");
  rows.push_back({0, "fused all-reduce alone", comm_alone, 0, comm_alone, 0});
  rows.push_back({0, "buckets", static_cast<double>(buckets.layout().size()), 0, 0, 0});
  return rows;
}

struct size_row {
  std::size_t bytes;
  double a, b;  // seconds: blocking / async, or ddl / MPI
  long wrong;
};

template <class Transport>
std::vector<size_row> overhead_rank(Transport& t, const settings& s) {
  ddl::communicator<ddl::auto_strategy, Transport> comm(t);
  std::vector<size_row> rows;
  std::vector<float> buf(s.max_bytes / 4 + 1);
  comm.reserve_workspace(buf.size() * sizeof(float) * 2);
  for (std::size_t bytes : s.sizes(4)) {
    auto v = ddl::host_view(buf.data(), bytes / 4);
    std::vector<double> blocking, async;
    // Alternate the two so drift on a shared machine hits both alike.
    for (int it = 0; it < s.warmup + s.iters; ++it) {
      std::fill_n(buf.data(), bytes / 4, 1.0f);
      comm.barrier();
      auto t0 = clock_type::now();
      comm.all_reduce(v, ddl::op::max);
      const double b = slowest(comm, std::chrono::duration<double>(clock_type::now() - t0).count());
      comm.barrier();
      t0 = clock_type::now();
      comm.all_reduce_async(v, ddl::op::max).wait();
      const double a = slowest(comm, std::chrono::duration<double>(clock_type::now() - t0).count());
      if (it >= s.warmup) blocking.push_back(b), async.push_back(a);
    }
    long wrong = 0;
    for (std::size_t i = 0; i < bytes / 4; ++i) wrong += buf[i] != 1.0f;
    rows.push_back({bytes, median(blocking), median(async), wrong});
  }
  return rows;
}

template <class Transport>
std::vector<size_row> broadcast_rank(Transport& t, const settings& s) {
  ddl::communicator<ddl::auto_strategy, Transport> comm(t);
  std::vector<size_row> rows;
  std::vector<float> buf(s.max_bytes / 4 + 1);
  for (std::size_t bytes : s.sizes(4)) {
    const std::size_t count = bytes / 4;
    std::vector<double> ours, theirs;
    long wrong = 0;
    for (int it = 0; it < s.warmup + s.iters; ++it) {
      const int root = it % t.size();
      std::fill_n(buf.data(), count, t.rank() == root ? static_cast<float>(it + 1) : -1.0f);
      comm.barrier();
      auto t0 = clock_type::now();
      comm.broadcast(ddl::host_view(buf.data(), count), root);
      const double a = slowest(comm, std::chrono::duration<double>(clock_type::now() - t0).count());
      for (std::size_t i = 0; i < count; ++i) wrong += buf[i] != static_cast<float>(it + 1);
      double b = 0;
#ifdef DDL_BENCH_MPI
      if constexpr (std::is_same_v<Transport, ddl::mpi_transport>) {
        std::fill_n(buf.data(), count, t.rank() == root ? static_cast<float>(it + 1) : -1.0f);
        MPI_Barrier(t.comm());
        t0 = clock_type::now();
        MPI_Bcast(buf.data(), static_cast<int>(count), MPI_FLOAT, root, t.comm());
        b = slowest(comm, std::chrono::duration<double>(clock_type::now() - t0).count());
      }
#endif
      if (it >= s.warmup) ours.push_back(a), theirs.push_back(b);
    }
    rows.push_back({bytes, median(ours), median(theirs), static_cast<long>(slowest(comm, static_cast<double>(wrong)))});
  }
  return rows;
}

// --- running on threads or MPI, printing on rank 0 ------------------------------

template <class F>
void on_ranks(const settings& s, F&& f) {
  if (s.transport == "local") {
    ddl::local_fabric::run(s.ranks, [&](ddl::local_transport& t) { f(t); });
    return;
  }
#ifdef DDL_BENCH_MPI
  ddl::mpi_transport t(MPI_COMM_WORLD);
  f(t);
#else
  usage("this ddl-async-bench was built without MPI (configure with DDL_ENABLE_MPI=ON)");
#endif
}

std::string human(std::size_t b) {
  char buf[32];
  if (b >= (1u << 20) && b % (1u << 20) == 0) std::snprintf(buf, sizeof buf, "%zuM", b >> 20);
  else if (b >= 1024 && b % 1024 == 0) std::snprintf(buf, sizeof buf, "%zuK", b >> 10);
  else std::snprintf(buf, sizeof buf, "%zu", b);
  return buf;
}

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
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  try {
    if (s.mode == "overlap") {
      const auto model = load_model(s.model);
      std::size_t total = 0;
      for (const auto& m : model) total += m.elements;
      on_ranks(s, [&](auto& t) {
        auto rows = overlap_rank(t, s, model);
        if (t.rank() != 0) return;
        const std::size_t buckets = static_cast<std::size_t>(rows.back().iteration);
        rows.pop_back();
        const double alone = rows.back().iteration;
        rows.pop_back();
        std::printf("# ddl-async-bench overlap: %s, %zu tensors, %.1f MB fp32, %d ranks (%s), %zu buckets, %s, host %s\n",
                    s.model.c_str(), model.size(), static_cast<double>(total) * 4 / 1e6, s.ranks, s.transport.c_str(),
                    buckets, s.separate ? "separate tensors (packed)" : "contiguous gradients (in place)", host);
        std::printf("# fused blocking all-reduce alone: %.2f ms; -n %d -w %d; times: slowest rank, median\n",
                    alone * 1e3, s.iters, s.warmup);
        if (s.csv) std::printf("compute_ratio,row,iteration_ms,compute_ms,exposed_ms,exposed_vs_allreduce,overlap\n");
        else
          std::printf("%8s  %-22s %12s %11s %11s %10s %8s\n", "compute", "row", "iteration", "compute", "exposed",
                      "exposed/", "overlap");
        if (!s.csv)
          std::printf("%8s  %-22s %12s %11s %11s %10s %8s\n", "/allred", "", "(ms)", "(ms)", "(ms)", "allreduce", "");
        for (const auto& r : rows) {
          if (s.csv)
            std::printf("%.2f,%s,%.3f,%.3f,%.3f,%.4f,%.4f\n", r.ratio, r.what.c_str(), r.iteration * 1e3,
                        r.compute * 1e3, r.exposed * 1e3, r.exposed / alone, r.overlap);
          else
            std::printf("%8.2f  %-22s %12.2f %11.2f %11.2f %9.1f%% %7.1f%%\n", r.ratio, r.what.c_str(), r.iteration * 1e3,
                        r.compute * 1e3, r.exposed * 1e3, 100 * r.exposed / alone, 100 * r.overlap);
        }
      });
    } else {
      const bool bcast = s.mode == "broadcast";
      on_ranks(s, [&](auto& t) {
        const auto rows = bcast ? broadcast_rank(t, s) : overhead_rank(t, s);
        if (t.rank() != 0) return;
        const bool mpi_col = bcast && s.transport == "mpi";
        std::printf("# ddl-async-bench %s: %d ranks (%s), float, -n %d -w %d, host %s; slowest rank, median\n",
                    s.mode.c_str(), s.ranks, s.transport.c_str(), s.iters, s.warmup, host);
        if (bcast)
          std::printf("%10s %12s %10s %12s %10s %8s %7s\n", "size", "ddl(us)", "algbw", mpi_col ? "MPI_Bcast" : "-",
                      "algbw", "ratio", "#wrong");
        else
          std::printf("%10s %14s %14s %10s %8s %7s\n", "size", "blocking(us)", "async(us)", "diff(us)", "ratio",
                      "#wrong");
        for (const auto& r : rows) {
          if (bcast)
            std::printf("%10s %12.1f %10.2f %12.1f %10.2f %8.2f %7ld\n", human(r.bytes).c_str(), r.a * 1e6,
                        static_cast<double>(r.bytes) / r.a / 1e9, r.b * 1e6,
                        r.b > 0 ? static_cast<double>(r.bytes) / r.b / 1e9 : 0.0, r.b > 0 ? r.b / r.a : 0.0, r.wrong);
          else
            std::printf("%10s %14.1f %14.1f %10.1f %8.3f %7ld\n", human(r.bytes).c_str(), r.a * 1e6, r.b * 1e6,
                        (r.b - r.a) * 1e6, r.b / r.a, r.wrong);
        }
        if (bcast && mpi_col) std::printf("# ratio = MPI_Bcast time / ddl time (> 1: ddl faster); algbw in GB/s\n");
        if (!bcast) std::printf("# ratio = async / blocking (in place); diff = async - blocking\n");
      });
    }
  } catch (const ddl::error& e) {
    std::fprintf(stderr, "ddl-async-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
