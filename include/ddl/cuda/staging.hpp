#pragma once
/// \file
/// The CUDA side of `staged_transport` (device buffers over a host
/// transport such as MPI): pinned, mapped host slots; copies and reductions
/// on the buffers' stream, each followed by an event the pipeline polls.
/// The reduction reads the received piece straight from pinned host memory
/// (one pass over PCIe instead of a copy and a second pass).
///
/// `staging_device` stages through the host; `direct_device` (for a
/// CUDA-aware MPI) hands device pointers to the inner transport and keeps
/// its slots, used only to receive pieces that are reduced, on the device.
/// Both share their device memory with the ranks of their host through
/// CUDA IPC (`share`, `open`, `probe`, ...: `cuda/ipc.hpp`), so messages between
/// near ranks go device to device (`staged/near.hpp`).
#include <vector>

#include "ddl/staged/transport.hpp"
#include "ddl/cuda/ipc.hpp"
#include "ddl/cuda/runtime.hpp"

namespace ddl {
namespace cuda {

namespace detail {
template <bool Direct>
class device_backend {
 public:
  static constexpr bool direct = Direct;
  struct event {
    cudaEvent_t e = nullptr;
  };

  /// \param device the buffers' device; \param stream used until `memory()` names another.
  explicit device_backend(int device, cudaStream_t stream = nullptr) : ctx_{device, stream}, ipc_(device) {}
  device_backend(const device_backend&) = delete;
  device_backend& operator=(const device_backend&) = delete;
  ~device_backend() {
    for (cudaEvent_t e : pool_) (void)cudaEventDestroy(e);
  }

  std::byte* allocate_slot(std::size_t n) {
    device_guard g(ctx_.device);
    void* p = nullptr;
    if (Direct) DDL_CUDA_CHECK(cudaMalloc(&p, n));
    else DDL_CUDA_CHECK(cudaHostAlloc(&p, n, cudaHostAllocMapped | cudaHostAllocPortable));
    return static_cast<std::byte*>(p);
  }
  void release_slot(std::byte* p, std::size_t) {
    device_guard g(ctx_.device);
    if (Direct) (void)cudaFree(p);
    else (void)cudaFreeHost(p);
  }
  /// Page-locks host memory the transport bounces calls through (false where
  /// the driver refuses: the copies then run from pageable memory).
  bool pin(std::byte* p, std::size_t n) {
    device_guard g(ctx_.device);
    if (cudaHostRegister(p, n, cudaHostRegisterPortable) == cudaSuccess) return true;
    (void)cudaGetLastError();  // not sticky: clear it
    return false;
  }
  void unpin(std::byte* p) {
    device_guard g(ctx_.device);
    (void)cudaHostUnregister(p);
  }
  event copy(std::byte* dst, const std::byte* src, std::size_t n) {
    if (n) DDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, ctx_.stream));
    return mark();
  }
  event reduce(std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, reduction r) {
    cuda::reduce(dst, a, b, count, r, ctx_.stream);
    return mark();
  }
  event mark() {
    event ev;
    if (pool_.empty()) {
      device_guard g(ctx_.device);
      DDL_CUDA_CHECK(cudaEventCreateWithFlags(&ev.e, cudaEventDisableTiming));
    } else {
      ev.e = pool_.back();
      pool_.pop_back();
    }
    DDL_CUDA_CHECK(cudaEventRecord(ev.e, ctx_.stream));
    return ev;
  }
  bool ready(event& ev) {
    if (!ev.e) return true;
    const cudaError_t q = cudaEventQuery(ev.e);
    if (q == cudaErrorNotReady) return false;
    DDL_CUDA_CHECK(q);
    pool_.push_back(ev.e);  // events are reused: none is created per message once warm
    ev.e = nullptr;
    return true;
  }
  /// Device memory shared with the ranks of this host (`cuda/ipc.hpp`).
  bool share(const std::byte* p, std::size_t n, device_region& r) { return ipc_.share(p, n, r); }
  const std::byte* open(int peer, const device_region& r) { return ipc_.open(peer, r); }
  device_region probe() { return ipc_.probe(); }
  bool on_device(const std::byte* p) { return ipc_.on_device(p); }
  std::byte* allocate_shared(std::size_t n) { return ipc_.allocate_shared(n); }
  void release_shared(std::byte* p, std::size_t n) { ipc_.release_shared(p, n); }

  memory_ops memory(const location& where) {
    if (where.space == memory_space::host) return host_memory_ops();
    if (where.device >= 0 && where.device != ctx_.device)
      throw invalid_argument("staged transport: buffers on device " + std::to_string(where.device) +
                             ", staging set up for device " + std::to_string(ctx_.device));
    ctx_.stream = static_cast<cudaStream_t>(where.stream);
    return device_memory_ops(&ctx_);
  }

 private:
  stream_context ctx_;
  std::vector<cudaEvent_t> pool_;
  ipc_memory ipc_;
};
}  // namespace detail

/// Stages device buffers through pinned host memory.
using staging_device = detail::device_backend<false>;
/// Hands device pointers to a CUDA-aware inner transport.
using direct_device = detail::device_backend<true>;

}  // namespace cuda
}  // namespace ddl
