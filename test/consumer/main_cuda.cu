// A user's CUDA translation unit against the installed package: ddl::cuda
// from find_package(ddl COMPONENTS cuda), with CCCL (Thrust, CUB) found
// through it. Builds and links everywhere; with a device it also averages a
// thrust::device_vector over 2 ranks.
#include <ddl/cuda.hpp>

#include <thrust/count.h>
#include <thrust/device_vector.h>

#include <atomic>
#include <cstdio>
#include <cstring>

int main() {
  std::atomic<int> wrong{0};
  // The engine named by DDL_CUDA_REDUCE (host code, no device needed).
  wrong += std::strcmp(ddl::cuda::name_of(ddl::cuda::default_reduce_engine()), "kernel") != 0;
  // CUB's engine is compiled in only where DDL_CUDA_CUB_ENGINE is defined (not
  // here): asking for it is an error naming the macro, before any device call.
  static_assert(!ddl::cuda::has_cub_engine);
  try {
    ddl::cuda::reduce(nullptr, nullptr, nullptr, 0, {ddl::dtype::float32, ddl::op::sum}, nullptr,
                      ddl::cuda::reduce_engine::cub);
    ++wrong;
  } catch (const ddl::invalid_argument& e) {
    wrong += std::strstr(e.what(), "DDL_CUDA_CUB_ENGINE") == nullptr;
  }
  if (ddl::cuda::device_count() > 0) {
    ddl::cuda_peer_fabric::run(2, [&](ddl::cuda_peer_transport& t) {
      thrust::device_vector<float> grads(1000, float(t.rank()));
      ddl::communicator<ddl::ring, ddl::cuda_peer_transport> comm(t);
      comm.all_reduce(ddl::device_view(thrust::raw_pointer_cast(grads.data()), grads.size(), t.device(), t.stream()),
                      ddl::op::avg);
      DDL_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
      wrong += static_cast<int>(thrust::count(grads.begin(), grads.end(), 0.5f) != 1000);
    });
  } else {
    std::puts("consumer: no CUDA device, built and linked only");
  }
  std::printf("consumer: %d wrong\n", wrong.load());
  return wrong.load() == 0 ? 0 : 1;
}
