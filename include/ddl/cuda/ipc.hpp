#pragma once
/// \file
/// CUDA IPC for near ranks (`staged/near.hpp`): a rank shares the device
/// allocation a message lies in (`cudaIpcGetMemHandle`, once per
/// allocation, known by the driver's buffer id, which no later allocation
/// reuses) and its peers on the host open it (`cudaIpcOpenMemHandle`, once
/// per peer and allocation, kept until the transport ends, the oldest
/// closed past `max_open` per peer). A buffer freed and allocated again at
/// the same address is another allocation with another id: shared and
/// opened anew, never read through the old mapping. Device memory the
/// legacy IPC cannot share (`cudaMallocAsync` pools, managed memory) is not
/// shared (`share` says false, after a one-line notice the first time):
/// its messages go through `shared_scratch`, allocated here with
/// `cudaMalloc` (`allocate_shared`). A buffer in an allocation shared
/// before and freed since (its pointer no longer device memory) is an
/// `invalid_argument`, never a read of freed memory.
///
/// The driver's range and buffer-id queries come through the runtime's
/// entry points (`cudaGetDriverEntryPointByVersion`), so nothing links
/// `libcuda` itself.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "ddl/core/error.hpp"
#include "ddl/cuda/runtime.hpp"
#include "ddl/staged/device_region.hpp"

namespace ddl {
namespace cuda {
namespace detail {

class ipc_memory {
  static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(device_region::handle), "ddl: a CUDA IPC handle must fit");

 public:
  /// Mappings kept open per peer (the oldest closed beyond).
  static constexpr std::size_t max_open = 64;

  explicit ipc_memory(int device) : device_(device) {
    cudaDriverEntryPointQueryResult q{};
    void* f = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      range_ = reinterpret_cast<range_fn>(f);
    f = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      attribute_ = reinterpret_cast<attribute_fn>(f);
    (void)cudaGetLastError();
  }
  ipc_memory(const ipc_memory&) = delete;
  ipc_memory& operator=(const ipc_memory&) = delete;
  ~ipc_memory() {
    device_guard g(device_);
    for (auto& o : opened_) (void)cudaIpcCloseMemHandle(const_cast<std::byte*>(o.second.base));
    if (probe_) (void)cudaFree(probe_);
  }

  /// Where `[p, p + n)` lies in a device allocation peers may open: fills
  /// `r`; false for memory that cannot be shared this way.
  bool share(const std::byte* p, std::size_t n, device_region& r) {
    if (!range_ || !attribute_) return false;
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    if (a.type == cudaMemoryTypeManaged) {
      notice(p, "managed memory");
      return false;
    }
    if (a.type != cudaMemoryTypeDevice) {
      refuse_if_freed(p);
      return false;
    }
    const auto at = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
    CUdeviceptr base = 0;
    std::size_t size = 0;
    unsigned long long id = 0;
    if (range_(&base, &size, at) != CUDA_SUCCESS || attribute_(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, at) != CUDA_SUCCESS)
      return false;
    const std::uint64_t offset = at - base;
    if (offset + n > size)
      throw invalid_argument("cuda: a buffer of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                             " of a device allocation of " + std::to_string(size) + " bytes runs past its end");
    if (refused_.count(id)) return false;
    auto it = handles_.find(id);
    if (it == handles_.end()) {
      int capable = 0;  // the driver writes a boolean: the int's first byte
      if (attribute_(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, at) != CUDA_SUCCESS) capable = 1;
      cudaIpcMemHandle_t h{};
      cudaError_t e = cudaErrorInvalidValue;
      if (capable) e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(static_cast<std::uintptr_t>(base)));
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (refused_.size() >= 4096) refused_.clear();
        refused_.insert(id);
        notice(p, capable ? cudaGetErrorString(e) : "a cudaMallocAsync pool's memory");
        return false;
      }
      if (handles_.size() >= 4096) {  // ids are never reused: old ones only cost memory
        handles_.clear();
        ranges_.clear();
      }
      it = handles_.emplace(id, h).first;
      ranges_[base] = std::make_pair(size, id);  // a new allocation at an old address replaces it
    }
    r = device_region{};
    r.id = id;
    r.offset = offset;
    r.size = size;
    std::memcpy(r.handle, &it->second, sizeof(cudaIpcMemHandle_t));
    return true;
  }

  /// Rank `peer`'s allocation `r`, mapped here (its first byte).
  const std::byte* open(int peer, const device_region& r) {
    const auto key = std::make_pair(peer, r.id);
    auto it = opened_.find(key);
    if (it != opened_.end()) {
      it->second.used = ++uses_;
      return it->second.base;
    }
    device_guard g(device_);
    close_oldest(peer);
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, r.handle, sizeof h);
    void* p = nullptr;
    const cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw transport_error(std::string("cudaIpcOpenMemHandle: ") + cudaGetErrorString(e));
    }
    opened_.emplace(key, mapping{static_cast<const std::byte*>(p), ++uses_});
    return static_cast<const std::byte*>(p);
  }

  /// Whether `p` is device memory (managed memory too): what a reduction
  /// into it runs on.
  static bool on_device(const std::byte* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  }
  /// Device memory `share` accepts (`cudaMalloc`), and its release.
  std::byte* allocate_shared(std::size_t n) {
    device_guard g(device_);
    void* p = nullptr;
    DDL_CUDA_CHECK(cudaMalloc(&p, n ? n : 1));
    return static_cast<std::byte*>(p);
  }
  void release_shared(std::byte* p, std::size_t) {
    device_guard g(device_);
    (void)cudaFree(p);
  }

  /// A small allocation of this device's, shared: what the peers try to open.
  device_region probe() {
    device_guard g(device_);
    if (!probe_) DDL_CUDA_CHECK(cudaMalloc(&probe_, 256));
    device_region r;
    if (!share(static_cast<const std::byte*>(probe_), 256, r)) return device_region{};
    return r;
  }

 private:
  using range_fn = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
  using attribute_fn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  struct mapping {
    const std::byte* base;
    std::uint64_t used;
  };
  // `p` is no device memory now: if it lies in an allocation shared
  // before, that allocation has been freed (its buffer freed while
  // registered), and the call names it instead of reading freed memory.
  void refuse_if_freed(const std::byte* p) {
    const auto at = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
    auto it = ranges_.upper_bound(at);
    if (it == ranges_.begin()) return;
    --it;
    if (at >= it->first + it->second.first) return;
    const std::size_t size = it->second.first;
    ranges_.erase(it);
    throw invalid_argument(std::string("cuda: a buffer at ") + address(p) + " lies in a device allocation of " +
                           std::to_string(size) +
                           " bytes that was shared with this host's ranks and has been freed since: "
                           "a collective's buffers must stay allocated until it returns");
  }
  // Says once that this process's device memory is not shared in place.
  void notice(const std::byte* p, const char* why) {
    if (noticed_) return;
    noticed_ = true;
    std::fprintf(stderr,
                 "ddl: device memory at %s cannot be shared with this host's ranks through CUDA IPC (%s); messages "
                 "from it are copied into shared scratch first (cudaMalloc'd buffers need no copy)\n",
                 address(p).c_str(), why);
  }
  static std::string address(const void* p) {
    char s[32];
    std::snprintf(s, sizeof s, "%p", p);
    return s;
  }
  void close_oldest(int peer) {
    std::size_t held = 0;
    auto oldest = opened_.end();
    for (auto it = opened_.begin(); it != opened_.end(); ++it) {
      if (it->first.first != peer) continue;
      ++held;
      if (oldest == opened_.end() || it->second.used < oldest->second.used) oldest = it;
    }
    if (held < max_open) return;
    (void)cudaIpcCloseMemHandle(const_cast<std::byte*>(oldest->second.base));
    opened_.erase(oldest);
  }

  int device_;
  range_fn range_ = nullptr;
  attribute_fn attribute_ = nullptr;
  std::map<unsigned long long, cudaIpcMemHandle_t> handles_;  // this process's allocations, by buffer id
  std::set<unsigned long long> refused_;  // this process's allocations IPC cannot share, by buffer id
  bool noticed_ = false;
  std::map<CUdeviceptr, std::pair<std::size_t, unsigned long long>> ranges_;  // theirs: base -> (size, id)
  std::map<std::pair<int, std::uint64_t>, mapping> opened_;   // peers' allocations, by (peer, id)
  std::uint64_t uses_ = 0;
  void* probe_ = nullptr;
};

}  // namespace detail
}  // namespace cuda
}  // namespace ddl
