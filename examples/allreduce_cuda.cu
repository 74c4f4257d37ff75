// Averaging gradients that live on the GPU, held the way a Thrust user holds
// them: 4 ranks (threads), each with a thrust::device_vector of gradients and
// its own stream, on however many GPUs the machine has (ranks share GPUs
// round-robin). ddl takes a raw pointer into the vector; the all-reduce is
// queued on the rank's stream, and the check runs on the device too.
#include <ddl/cuda.hpp>

#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/tabulate.h>

#include <cstdio>
#include <vector>

// Rank r's "gradient" i: r + i % 3 (exact in float).
struct gradient {
  int rank;
  __host__ __device__ float operator()(std::size_t i) const { return float(rank) + float(i % 3); }
};
// After averaging over `ranks`: (ranks - 1) / 2 + i % 3.
struct is_wrong {
  const float* mean;
  int ranks;
  __host__ __device__ bool operator()(std::size_t i) const {
    return mean[i] != float(ranks - 1) / 2 + float(i % 3);
  }
};

int main() {
  if (ddl::cuda::device_count() == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  constexpr int ranks = 4;
  constexpr std::size_t n = (1u << 20) + 7;
  std::vector<long> bad(ranks, 0);

  ddl::cuda_peer_fabric::run(ranks, [&](ddl::cuda_peer_transport& t) {
    cudaStream_t stream = nullptr;
    DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const auto on_stream = thrust::cuda::par.on(stream);

    thrust::device_vector<float> grads(n);
    thrust::tabulate(on_stream, grads.begin(), grads.end(), gradient{t.rank()});

    ddl::communicator<ddl::auto_strategy, ddl::cuda_peer_transport> comm(t);
    float* g = thrust::raw_pointer_cast(grads.data());
    comm.all_reduce(ddl::device_view(g, grads.size(), t.device(), stream), ddl::op::avg);

    // Same stream: the count sees the averaged gradients.
    bad[t.rank()] = thrust::count_if(on_stream, thrust::counting_iterator<std::size_t>(0),
                                     thrust::counting_iterator<std::size_t>(n), is_wrong{g, ranks});
    DDL_CUDA_CHECK(cudaStreamDestroy(stream));
  });

  for (int r = 0; r < ranks; ++r)
    if (bad[r]) {
      std::printf("rank %d: %ld wrong elements\n", r, bad[r]);
      return 1;
    }
  std::printf("%d ranks averaged %zu device floats in thrust::device_vectors; every rank holds the mean\n", ranks, n);
  return 0;
}
