// ddl-gpu-mpi-bench: device buffers over MPI against what a user without ddl
// writes, on the same buffers, side by side in one run.
//
//   mpirun -n 4 ddl-gpu-mpi-bench [-b 1M] [-e 256M] [-f 4] [-n 10]
//     [--strategy auto|ring|multi_ring|multi_ring_direct|two_shot|one_shot]
//
// Each process holds a float32 device buffer on GPU (rank % devices) and
// all-reduces it in place (sum):
//   - ddl: `communicator<Strategy, mpi_staged_transport>` as a user gets it
//     (`staging_options::from_env()`): messages between near ranks (processes
//     of one host whose device memory CUDA IPC maps, `staged/near.hpp`) go
//     device to device; calls up to `near_bounce_bytes` where some ranks are
//     near (else `bounce_bytes`) run whole on MPI from one copy in pinned
//     shared host memory; the rest staged piece by piece through pinned memory;
//   - ddl_host: the same with near ranks off (`DDL_CUDA_IPC=0`): everything
//     through host memory, as before IPC;
//   - ddl_staged: near off and `bounce_bytes` 0 (every call piece by piece);
//   - baseline: cudaMemcpy to a pinned host buffer, MPI_Allreduce(MPI_IN_PLACE),
//     cudaMemcpy back.
// `--strategy multi_ring`: a 2 x n/2 box, its first dimension the pairs of
// consecutive ranks (with DDL_MPI_SHM_RANKS=2 the near ranks: the paper's
// node-by-network plan on one machine); `multi_ring_direct` the same box
// with its first dimension read in place (`multi_ring::direct_first`: each
// pair reduces reading the other's device buffer, no ring step).
// `--strategy two_shot`: every rank
// reduces its block reading all the peers' device buffers where they lie
// (all ranks near, `two_shot::all_reduce_device`); `--strategy one_shot`:
// every rank reduces the whole of every peer's buffer where it lies; for
// both, ddl_host and ddl_staged, whose ranks are not near, run auto instead.
// Time per call: the slowest rank's, median of -n after 2 warm-ups; each
// call starts from a barrier with the buffer refilled. `wrong` counts the
// elements (all ranks, all four) that are not n after the calls.
// ratio = baseline / ddl, x_host = ddl_host / ddl, staged_ratio = baseline /
// ddl_staged.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <thrust/count.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>

#include <ddl/cuda.hpp>
#include <ddl/mpi_cuda.hpp>

#include "ddl_bench/mpi_timing.hpp"
#include "ddl_bench/sweep.hpp"

namespace {

struct settings : ddl_bench::sweep_flags {  // -b -e -f -n
  settings() { min_bytes = 1 << 20, max_bytes = std::size_t{256} << 20, factor = 4, iters = 10; }
  std::string strategy = "auto";
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "ddl-gpu-mpi-bench: %s\nusage: mpirun -n N ddl-gpu-mpi-bench [-b N] [-e N] [-f F] [-n ITERS]"
                       " [--strategy auto|ring|multi_ring|multi_ring_direct|two_shot|one_shot]\n", why.c_str());
  std::exit(2);
}

template <class Strategy, class HostStrategy = Strategy>
int run(const settings& s, const Strategy& strategy, const HostStrategy& host_strategy = HostStrategy{}) {
  int rank = 0, n = 1, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  DDL_CUDA_CHECK(cudaGetDeviceCount(&devices));
  const int dev = rank % devices;
  DDL_CUDA_CHECK(cudaSetDevice(dev));
  cudaStream_t stream = nullptr;
  DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    ddl::mpi_transport mt(MPI_COMM_WORLD);
    ddl::cuda::staging_device staging(dev, stream);
    const ddl::staging_options as_given = ddl::staging_options::from_env();
    ddl::staging_options host_only = as_given;
    host_only.near = false;
    ddl::staging_options piecewise = host_only;
    piecewise.bounce_bytes = 0;
    ddl::mpi_staged_transport t(mt, staging, as_given), th(mt, staging, host_only), tp(mt, staging, piecewise);
    ddl::communicator<Strategy, ddl::mpi_staged_transport> comm(t, strategy);
    ddl::communicator<HostStrategy, ddl::mpi_staged_transport> comm_host(th, host_strategy),
        comm_staged(tp, host_strategy);
    int near_peers = 0;
    for (int q = 0; q < n; ++q) near_peers += t.near(q) ? 1 : 0;
    float* d = nullptr;
    float* h = nullptr;
    DDL_CUDA_CHECK(cudaMalloc(&d, s.max_bytes));
    DDL_CUDA_CHECK(cudaMallocHost(&h, s.max_bytes));
    if (rank == 0) {
      std::printf("# ddl-gpu-mpi-bench: %d MPI processes on %d GPU(s), float32 sum, in place; ddl %s over "
                  "mpi_staged_transport (rank 0 near %d of %d peers; bounce_bytes %zu, near_bounce_bytes %zu; "
                  "ddl_host: near off, %s; ddl_staged: near off, bounce 0) vs cudaMemcpy D2H + "
                  "MPI_Allreduce(MPI_IN_PLACE) + H2D (pinned); slowest rank, median of %d\n",
                  n, devices, strategy.describe().c_str(), near_peers, n - 1, as_given.bounce_bytes,
                  as_given.near_bounce_bytes, host_strategy.describe().c_str(), s.iters);
      std::printf("# %12s %12s %12s %14s %12s %8s %8s %13s %6s\n", "size(B)", "ddl_us", "ddl_host_us", "ddl_staged_us",
                  "mpi_copy_us", "ratio", "x_host", "staged_ratio", "wrong");
    }
    for (std::size_t bytes : s.sizes(sizeof(float))) {
      const std::size_t count = bytes / sizeof(float);
      const auto on = thrust::cuda::par.on(stream);
      thrust::device_ptr<float> p(d);
      auto refill = [&] {
        thrust::fill(on, p, p + static_cast<std::ptrdiff_t>(count), 1.0f);
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
      };
      long wrong = 0;
      auto count_wrong = [&] {
        long w = static_cast<long>(count) - static_cast<long>(thrust::count(on, p, p + static_cast<std::ptrdiff_t>(count),
                                                                            static_cast<float>(n)));
        MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        wrong += w;
      };
      const double t_ddl = ddl_bench::slowest_median(s.iters, refill, [&] {
        comm.all_reduce(ddl::device_view(d, count, dev, stream), ddl::op::sum);
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
      });
      count_wrong();
      const double t_host = ddl_bench::slowest_median(s.iters, refill, [&] {
        comm_host.all_reduce(ddl::device_view(d, count, dev, stream), ddl::op::sum);
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
      });
      count_wrong();
      const double t_staged = ddl_bench::slowest_median(s.iters, refill, [&] {
        comm_staged.all_reduce(ddl::device_view(d, count, dev, stream), ddl::op::sum);
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
      });
      count_wrong();
      const double t_mpi = ddl_bench::slowest_median(s.iters, refill, [&] {
        DDL_CUDA_CHECK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, stream));
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
        MPI_Allreduce(MPI_IN_PLACE, h, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        DDL_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream));
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
      });
      count_wrong();
      if (rank == 0) {
        std::printf("  %12zu %12.1f %12.1f %14.1f %12.1f %8.2f %8.2f %13.2f %6ld\n", bytes, t_ddl * 1e6, t_host * 1e6,
                    t_staged * 1e6, t_mpi * 1e6, t_mpi / t_ddl, t_host / t_ddl, t_mpi / t_staged, wrong);
        std::fflush(stdout);
      }
    }
    DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
    (void)cudaFree(d);
    (void)cudaFreeHost(h);
  }
  (void)cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ddl::mpi_session mpi(argc, argv);
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    try {
      if (s.take(a, v)) continue;
      if (a == "--strategy") s.strategy = v;
      else usage("unknown flag '" + a + "'");
    } catch (const std::exception& e) {
      usage(e.what());
    }
  }
  if (const std::string p = s.problem(4); !p.empty()) usage(p);
  try {
    if (s.strategy == "auto") return run(s, ddl::auto_strategy{});
    if (s.strategy == "ring") return run(s, ddl::ring{});
    if (s.strategy == "two_shot") return run(s, ddl::two_shot{}, ddl::auto_strategy{});
    if (s.strategy == "one_shot") return run(s, ddl::one_shot{}, ddl::auto_strategy{});
    if (s.strategy == "multi_ring") {
      int n = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &n);
      if (n % 2 != 0) usage("--strategy multi_ring needs an even number of processes");
      return run(s, ddl::multi_ring<ddl::dynamic_extents>({2, n / 2}));
    }
    if (s.strategy == "multi_ring_direct") {
      int n = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &n);
      if (n % 2 != 0) usage("--strategy multi_ring_direct needs an even number of processes");
      return run(s, ddl::multi_ring<ddl::dynamic_extents>({2, n / 2}).direct_first(), ddl::auto_strategy{});
    }
    usage("unknown strategy '" + s.strategy + "'");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddl-gpu-mpi-bench: %s\n", e.what());
    return 1;
  }
}
