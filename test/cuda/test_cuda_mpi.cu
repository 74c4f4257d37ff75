// Device buffers over MPI processes that share a host: every collective of
// every dtype and op through `mpi_staged_transport`, its messages between
// near ranks device to device (CUDA IPC, `staged/near.hpp`), checked on the
// device against the suite's exact results; a buffer freed and allocated
// again between calls; buffers IPC cannot share (a `cudaMallocAsync` pool's,
// managed memory); and the near ranks as every rank sees them.
//
//   mpirun -n N ddl_test_cuda_mpi [--quick]
//     [--strategy ring|halving|recursive|auto|multi_ring|multi_ring_direct|two_shot|one_shot]
//
// `two_shot` and `one_shot` read the peers' device buffers where they lie
// (every rank near); `multi_ring_direct`: a 2 x n/2 box whose first
// dimension (pairs of consecutive ranks, near) does so.
//
// `--quick` (under compute-sanitizer): counts up to 1009 only.
// Exit 0: every check held on every rank; 1: some failed (each named on
// stderr); 77: no CUDA device ("skipped"). Built with nvcc everywhere; run on
// a machine with a GPU (bench/tools/gpu_checks.sh ipc), one device holding
// every process, as IPC between processes of one device allows.
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/mismatch.h>
#include <thrust/tabulate.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <ddl/cuda.hpp>
#include <ddl/mpi_cuda.hpp>

#include "../support.hpp"
#include "device_checks.hpp"

namespace {

bool quick = false;

template <class Strategy>
void collectives(ddl::mpi_staged_transport& t, const Strategy& s, int dev, cudaStream_t stream,
                 ddl_test::failure_log& log) {
  const int n = t.size();
  std::vector<std::size_t> counts{0, 1, static_cast<std::size_t>(n) + 1, 1009, 16383, (std::size_t{1} << 20) + 3};
  if (quick) counts.resize(4);
  ddl::communicator<Strategy, ddl::mpi_staged_transport> comm(t, s);
  device_collectives(comm, s.describe(), n, t.rank(), dev, counts, stream, log);
}

// A buffer freed and another allocated between calls (often at the same
// address): the peers open the new allocation, never read the old mapping.
void reallocated(ddl::mpi_staged_transport& t, int dev, cudaStream_t stream, ddl_test::failure_log& log) {
  ddl::communicator<ddl::ring, ddl::mpi_staged_transport> comm(t);
  const std::size_t count = (std::size_t{1} << 20) + 7;
  for (int round = 0; round < 3; ++round) {
    dvec<float> d(count, static_cast<float>(round + 1));
    comm.all_reduce(ddl::device_view(raw(d), count, dev, stream), ddl::op::sum);
    DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
    const float want = static_cast<float>((round + 1) * t.size());
    const std::vector<float> h(d.begin(), d.end());
    for (std::size_t i = 0; i < count; ++i)
      if (h[i] != want) {
        log.add("reallocated buffer, round " + std::to_string(round) + ", rank " + std::to_string(t.rank()) +
                ": element " + std::to_string(i) + " is " + std::to_string(h[i]));
        break;
      }
  }
}

// Buffers legacy IPC cannot share, a `cudaMallocAsync` pool's and managed
// memory: their messages go through shared scratch, exact, twice (the
// second call through the same scratch blocks).
void unshareable(ddl::mpi_staged_transport& t, int dev, cudaStream_t stream, ddl_test::failure_log& log) {
  ddl::communicator<ddl::ring, ddl::mpi_staged_transport> comm(t);
  const std::size_t count = (std::size_t{1} << 20) + 5;
  const int n = t.size();
  for (int managed = 0; managed < 2; ++managed) {
    float* p = nullptr;
    if (managed) DDL_CUDA_CHECK(cudaMallocManaged(&p, count * sizeof(float)));
    else DDL_CUDA_CHECK(cudaMallocAsync(&p, count * sizeof(float), stream));
    thrust::fill(thrust::cuda::par.on(stream), p, p + count, static_cast<float>(t.rank() + 1));
    for (int k = 0; k < 2; ++k) comm.all_reduce(ddl::device_view(p, count, dev, stream), ddl::op::sum);
    std::vector<float> h(count);
    DDL_CUDA_CHECK(cudaMemcpyAsync(h.data(), p, count * sizeof(float), cudaMemcpyDefault, stream));
    DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
    const float want = static_cast<float>(n * n * (n + 1) / 2);
    for (std::size_t i = 0; i < count; ++i)
      if (h[i] != want) {
        log.add(std::string(managed ? "managed" : "pool") + " buffer, rank " + std::to_string(t.rank()) +
                ": element " + std::to_string(i) + " is " + std::to_string(h[i]) + ", not " + std::to_string(want));
        break;
      }
    if (managed) DDL_CUDA_CHECK(cudaFree(p));
    else DDL_CUDA_CHECK(cudaFreeAsync(p, stream));
  }
  DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

int main(int argc, char** argv) {
  ddl::mpi_session mpi(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  std::string strategy = "ring";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--strategy" && i + 1 < argc) strategy = argv[++i];
    else if (std::string(argv[i]) == "--quick") quick = true;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int dev = rank % devices;
  DDL_CUDA_CHECK(cudaSetDevice(dev));
  cudaStream_t stream = nullptr;
  DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ddl_test::failure_log log;
  {
    ddl::mpi_transport mt(MPI_COMM_WORLD);
    ddl::cuda::staging_device staging(dev, stream);
    ddl::staging_options so = ddl::staging_options::from_env();
    ddl::mpi_staged_transport t(mt, staging, so);
    std::string nears;
    for (int q = 0; q < t.size(); ++q) nears += q == rank ? '-' : t.near(q) ? '1' : '0';
    std::printf("rank %d: near %s (some_near %d)\n", rank, nears.c_str(), static_cast<int>(t.some_near()));
    const int n = t.size();
    try {
      if (strategy == "ring") collectives(t, ddl::ring{}, dev, stream, log);
      else if (strategy == "halving") collectives(t, ddl::halving_doubling{}, dev, stream, log);
      else if (strategy == "recursive") collectives(t, ddl::recursive_doubling{}, dev, stream, log);
      else if (strategy == "auto") collectives(t, ddl::auto_strategy{}, dev, stream, log);
      else if (strategy == "two_shot") collectives(t, ddl::two_shot{}, dev, stream, log);
      else if (strategy == "one_shot") collectives(t, ddl::one_shot{}, dev, stream, log);
      else if (strategy == "multi_ring" && n % 2 == 0)
        collectives(t, ddl::multi_ring<ddl::dynamic_extents>({2, n / 2}, {1, 0}), dev, stream, log);
      else if (strategy == "multi_ring_direct" && n % 2 == 0)
        collectives(t, ddl::multi_ring<ddl::dynamic_extents>({2, n / 2}).direct_first(), dev, stream, log);
      else log.add("unknown strategy '" + strategy + "' (or multi_ring on an odd count)");
      reallocated(t, dev, stream, log);
      unshareable(t, dev, stream, log);
    } catch (const std::exception& e) {
      log.add(std::string("rank ") + std::to_string(rank) + " threw: " + e.what());
    }
  }
  DDL_CUDA_CHECK(cudaStreamDestroy(stream));
  int bad = log.count() > 0 ? 1 : 0;
  if (bad) std::fprintf(stderr, "rank %d: %s\n", rank, log.summary().c_str());
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s: %s\n", strategy.c_str(), bad ? "FAILED" : "every check held");
  return bad;
}
