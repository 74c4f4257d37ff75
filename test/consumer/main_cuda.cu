// A user's CUDA translation unit: ddl::cuda from find_package(ddl COMPONENTS
// cuda), with CCCL (Thrust) found through it. Without a device it reduces host
// buffers only; with one it also averages a thrust::device_vector on 2 ranks.
#include <ddl/cuda.hpp>

#include <thrust/count.h>
#include <thrust/device_vector.h>

#include <atomic>
#include <cstdio>
#include <vector>

int main() {
  std::atomic<int> wrong{0};
  ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
    std::vector<double> g(101, t.rank() + 1.0);
    comm.all_reduce(ddl::host_view(g), ddl::op::sum);
    for (double v : g) wrong += v != 6.0;
  });
  if (ddl::cuda::device_count() > 0) {
    ddl::cuda_peer_fabric::run(2, [&](ddl::cuda_peer_transport& t) {
      thrust::device_vector<float> grads(1000, float(t.rank()));
      ddl::communicator<ddl::ring, ddl::cuda_peer_transport> comm(t);
      comm.all_reduce(ddl::device_view(thrust::raw_pointer_cast(grads.data()), grads.size(), t.device(), t.stream()),
                      ddl::op::avg);
      DDL_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
      wrong += static_cast<int>(thrust::count(grads.begin(), grads.end(), 0.5f) != 1000);
    });
  }
  std::printf("consumer: %d wrong\n", wrong.load());
  return wrong.load() == 0 ? 0 : 1;
}
