#pragma once
/// \file
/// Device memory that processes of one host share (`staged/near.hpp`): a
/// device allocation as its owner describes it to its peers
/// (`ddl::device_region`), and what a `Device` of `staged_transport` offers
/// to share its memory.
///
/// `Device` (optional members; `staged_transport` uses this only when all
/// are there):
///   `bool share(const std::byte* p, std::size_t n, device_region& r)` —
///   where `[p, p + n)` lies in a device allocation peers may open: fills
///   `r` (false: not shareable device memory, e.g. host memory);
///   `const std::byte* open(int peer, const device_region& r)` — rank
///   `peer`'s allocation `r` mapped here (its first byte), cached; throws
///   where it cannot; `device_region probe()` — a small allocation of its
///   own, shared, kept while the device lives.
#include <cstdint>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace ddl {

/// A device allocation as its owner shares it with the processes of its
/// host (`Device::share`): what a peer needs to open it.
struct device_region {
  std::uint64_t id = 0;      ///< the allocation's id in its process, never reused; 0: none
  std::uint64_t offset = 0;  ///< where the bytes begin in the allocation
  std::uint64_t size = 0;    ///< the allocation's bytes
  unsigned char handle[64] = {};  ///< how a peer opens it (CUDA: `cudaIpcMemHandle_t`)
};

namespace detail {
template <class D, class = void>
struct has_device_ipc : std::false_type {};
template <class D>
struct has_device_ipc<
    D, std::void_t<decltype(bool(std::declval<D&>().share(std::declval<const std::byte*>(), std::size_t{},
                                                         std::declval<device_region&>()))),
                   decltype(static_cast<const std::byte*>(std::declval<D&>().open(0, std::declval<const device_region&>()))),
                   decltype(device_region(std::declval<D&>().probe()))>> : std::true_type {};
/// Whether `Device` shares its memory with peer processes (`share`, `open`, `probe`).
template <class D>
inline constexpr bool has_device_ipc_v = has_device_ipc<D>::value;

}  // namespace detail
}  // namespace ddl
