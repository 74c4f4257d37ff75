// Averaging gradients that live on the GPU: 4 ranks (threads), each with its
// own device buffer and stream, on however many GPUs the machine has (ranks
// share GPUs round-robin). The all-reduce is queued on each rank's stream;
// the host reads the result after synchronising it.
#include <ddl/cuda.hpp>

#include <cstdio>
#include <vector>

int main() {
  if (ddl::cuda::device_count() == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  constexpr int ranks = 4;
  constexpr std::size_t n = (1u << 20) + 7;
  std::vector<int> bad(ranks, 0);

  ddl::cuda_peer_fabric::run(ranks, [&](ddl::cuda_peer_transport& t) {
    cudaStream_t stream = nullptr;
    DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // Rank r's "gradients": r + i % 3 (exact in float).
    std::vector<float> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = float(t.rank()) + float(i % 3);
    float* grads = nullptr;
    DDL_CUDA_CHECK(cudaMalloc(&grads, n * sizeof(float)));
    DDL_CUDA_CHECK(cudaMemcpyAsync(grads, host.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));

    ddl::communicator<ddl::auto_strategy, ddl::cuda_peer_transport> comm(t);
    comm.all_reduce(ddl::device_view(grads, n, t.device(), stream), ddl::op::avg);

    DDL_CUDA_CHECK(cudaMemcpyAsync(host.data(), grads, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
    const float mean_rank = float(ranks - 1) / 2;
    for (std::size_t i = 0; i < n; ++i)
      if (host[i] != mean_rank + float(i % 3)) ++bad[t.rank()];
    DDL_CUDA_CHECK(cudaFree(grads));
    DDL_CUDA_CHECK(cudaStreamDestroy(stream));
  });

  for (int r = 0; r < ranks; ++r)
    if (bad[r]) {
      std::printf("rank %d: %d wrong elements\n", r, bad[r]);
      return 1;
    }
  std::printf("%d ranks averaged %zu device floats; every rank holds the mean\n", ranks, n);
  return 0;
}
