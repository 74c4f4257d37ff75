// ddl-staged-bench: the staged transport's two paths on the CPU, over MPI.
//
//   mpirun -n 4 ddl-staged-bench [-b 64K] [-e 16M] [-f 4] [-n 10]
//
// A proxy for device buffers over MPI (`mpi_staged_transport`) without a
// GPU: the "device" is host memory and its copies are memcpy, so what shows
// is the host side of each path (messages, pieces, the collective run), not
// a GPU's copies or its per-call cost. Each rank all-reduces a float32
// buffer in place (sum), timed as:
//   - bounce: `staged_transport` with every call bounced whole
//     (`staging_options::bounce_bytes` past the sweep): one copy into its
//     shared host buffer, auto's host collective over MPI, one copy back;
//   - pieces: the same transport with `bounce_bytes` 0 (every call piece by
//     piece through the slots);
//   - copy+MPI: memcpy into a host buffer, MPI_Allreduce(MPI_IN_PLACE), memcpy
//     back (the GPU benchmark's baseline, with memcpy for the device copies).
// Slowest rank, median of -n after 2 warm-ups, each call from a barrier with
// the buffer refilled; `wrong` counts elements (all ranks, all rows) that are
// not n afterwards (any: exit status 1). ratio = copy+MPI time / bounce time.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <ddl/mpi.hpp>
#include <ddl/staged/transport.hpp>

#include "ddl_bench/mpi_timing.hpp"
#include "ddl_bench/sweep.hpp"

namespace {

// Device copies and reductions that are host memcpy and host kernels, done at once.
struct memcpy_device {
  static constexpr bool direct = false;
  struct event {};
  std::byte* allocate_slot(std::size_t n) { return new std::byte[n](); }
  void release_slot(std::byte* p, std::size_t) { delete[] p; }
  event copy(std::byte* dst, const std::byte* src, std::size_t n) {
    std::memcpy(dst, src, n);
    return {};
  }
  event reduce(std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, ddl::reduction r) {
    ddl::host::reduce(dst, a, b, count, r);
    return {};
  }
  event mark() { return {}; }
  bool ready(event&) { return true; }
  ddl::memory_ops memory(const ddl::location&) { return ddl::host_memory_ops(); }
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "ddl-staged-bench: %s\nusage: mpirun -n N ddl-staged-bench [-b N] [-e N] [-f F] [-n ITERS]\n",
               why.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  ddl::mpi_session session(argc, argv);
  ddl_bench::sweep_flags sw;
  sw.min_bytes = std::size_t{64} << 10, sw.max_bytes = std::size_t{16} << 20, sw.factor = 4, sw.iters = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    try {
      if (!sw.take(a, v)) usage("unknown flag '" + a + "'");
    } catch (const std::exception& e) {
      usage(e.what());
    }
  }
  if (const std::string p = sw.problem(4); !p.empty()) usage(p);
  const std::size_t hi = sw.max_bytes;
  const int iters = sw.iters;

  ddl::mpi_transport mt(MPI_COMM_WORLD);
  const int n = mt.size(), rank = mt.rank();
  memcpy_device dev;
  ddl::staging_options whole, pieces;
  whole.bounce_bytes = hi;
  pieces.bounce_bytes = 0;
  using staged = ddl::staged_transport<ddl::mpi_transport, memcpy_device>;
  staged tb(mt, dev, whole), tp(mt, dev, pieces);
  ddl::communicator<ddl::auto_strategy, staged> bounce(tb), piecewise(tp);

  std::vector<float> buf(hi / sizeof(float)), host(hi / sizeof(float));
  auto time_calls = [&](std::size_t count, auto&& call, long& wrong) {
    const double t = ddl_bench::slowest_median(
        iters, [&] { std::fill(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(count), 1.0f); }, call);
    wrong += std::count_if(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(count),
                           [n](float x) { return x != static_cast<float>(n); });
    return t * 1e6;
  };
  if (rank == 0) {
    std::printf("# ddl-staged-bench: %d MPI processes, float32 sum in place, through staged_transport with a memcpy "
                "\"device\" (a CPU proxy: no GPU copies, no per-call GPU cost); slowest rank, median of %d\n",
                n, iters);
    std::printf("# %12s %10s %10s %12s %8s %6s\n", "size(B)", "bounce_us", "pieces_us", "copy_mpi_us", "ratio",
                "wrong");
  }
  long total_wrong = 0;
  for (std::size_t bytes : sw.sizes(sizeof(float))) {
    const std::size_t count = bytes / sizeof(float);
    ddl::buffer_view v = ddl::host_view(buf.data(), count);
    v.where = ddl::location{ddl::memory_space::cuda, 0, nullptr};  // "device" memory: staged or bounced
    long wrong = 0;
    const double t_bounce = time_calls(count, [&] { bounce.all_reduce(v, ddl::op::sum); }, wrong);
    const double t_pieces = time_calls(count, [&] { piecewise.all_reduce(v, ddl::op::sum); }, wrong);
    const double t_mpi = time_calls(count, [&] {
      std::memcpy(host.data(), buf.data(), bytes);
      MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      std::memcpy(buf.data(), host.data(), bytes);
    }, wrong);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    total_wrong += wrong;
    if (rank == 0) {
      std::printf("  %12zu %10.1f %10.1f %12.1f %8.2f %6ld\n", bytes, t_bounce, t_pieces, t_mpi, t_mpi / t_bounce,
                  wrong);
      std::fflush(stdout);
    }
  }
  return total_wrong == 0 ? 0 : 1;  // wrong results fail the run (and its CTest)
}
