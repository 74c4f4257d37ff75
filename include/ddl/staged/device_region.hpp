#pragma once
/// \file
/// Device memory that processes of one host share (`staged/near.hpp`): what
/// a `Device` of `staged_transport` offers to share its memory (the
/// allocations as their owners describe them, `ddl::device_region`:
/// `core/device_region.hpp`), and the scratch of messages whose own memory
/// it does not share.
///
/// `Device` (optional members; `staged_transport` uses this only when all
/// are there):
///   `bool share(const std::byte* p, std::size_t n, device_region& r)` —
///   where `[p, p + n)` lies in a device allocation peers may open: fills
///   `r` (false: memory that cannot be shared so, host memory or device
///   memory the device's IPC refuses, such as a `cudaMallocAsync` pool's);
///   `const std::byte* open(int peer, const device_region& r)` — rank
///   `peer`'s allocation `r` mapped here (its first byte), cached; throws
///   where it cannot; `device_region probe()` — a small allocation of its
///   own, shared, kept while the device lives; `bool on_device(const
///   std::byte* p)` — whether `p` is device memory (shareable or not);
///   `std::byte* allocate_shared(std::size_t n)` and `void
///   release_shared(std::byte* p, std::size_t n)` — device memory that
///   `share` accepts, for `shared_scratch`.
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "ddl/core/device_region.hpp"

namespace ddl {

namespace detail {
template <class D, class = void>
struct has_device_ipc : std::false_type {};
template <class D>
struct has_device_ipc<
    D, std::void_t<decltype(bool(std::declval<D&>().share(std::declval<const std::byte*>(), std::size_t{},
                                                         std::declval<device_region&>()))),
                   decltype(static_cast<const std::byte*>(std::declval<D&>().open(0, std::declval<const device_region&>()))),
                   decltype(device_region(std::declval<D&>().probe())),
                   decltype(bool(std::declval<D&>().on_device(std::declval<const std::byte*>()))),
                   decltype(static_cast<std::byte*>(std::declval<D&>().allocate_shared(std::size_t{}))),
                   decltype(std::declval<D&>().release_shared(std::declval<std::byte*>(), std::size_t{}))>>
    : std::true_type {};
/// Whether `Device` shares its memory with peer processes (`share`, `open`, `probe`, ...).
template <class D>
inline constexpr bool has_device_ipc_v = has_device_ipc<D>::value;

/// Device memory that `Device::share` accepts, for messages whose own
/// memory it refuses (a `cudaMallocAsync` pool's, managed memory, host
/// memory past a note's inline bytes): the sender copies the message in on
/// its stream and shares the copy instead. Blocks are powers of two from
/// `min_bytes`, taken and given back per message, and kept for the owner's
/// life (a peer may hold one mapped: its allocation id, and the peer's
/// cached mapping, stay valid), so a steady stream of calls allocates
/// nothing once warm.
template <class Device>
class shared_scratch {
 public:
  static constexpr std::size_t min_bytes = std::size_t{64} << 10;

  explicit shared_scratch(Device& dev) : dev_(&dev) {}
  shared_scratch(const shared_scratch&) = delete;
  shared_scratch& operator=(const shared_scratch&) = delete;
  ~shared_scratch() {
    for (auto& b : blocks_) dev_->release_shared(b.at, b.bytes);
  }

  /// A free block of at least `n` bytes (the smallest that holds it), now taken.
  std::byte* take(std::size_t n) {
    block* best = nullptr;
    for (auto& b : blocks_)
      if (!b.taken && b.bytes >= n && (!best || b.bytes < best->bytes)) best = &b;
    if (!best) {
      std::size_t size = min_bytes;
      while (size < n) size *= 2;
      blocks_.push_back(block{dev_->allocate_shared(size), size, false});
      best = &blocks_.back();
    }
    best->taken = true;
    return best->at;
  }
  /// Gives back the block `take` returned at `p`.
  void give(const std::byte* p) noexcept {
    for (auto& b : blocks_)
      if (b.at == p) b.taken = false;
  }
  /// Blocks allocated so far.
  std::size_t blocks() const noexcept { return blocks_.size(); }

 private:
  struct block {
    std::byte* at;
    std::size_t bytes;
    bool taken;
  };
  Device* dev_;
  std::vector<block> blocks_;
};

}  // namespace detail
}  // namespace ddl
