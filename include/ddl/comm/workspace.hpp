#pragma once
/// \file
/// A communicator's workspace: memory grown on demand and reused
/// (`workspace_memory`), and the host side of calls that bounce through host
/// memory on a staged transport (`bounce_side`).
#include <cstddef>
#include <type_traits>
#include <utility>

#include "ddl/core/memory.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {

/// Workspace memory: grown on demand (uninitialised on purpose: pages are
/// touched by first use, once), never shrunk, reused; allocated with the
/// `memory_ops` of the buffers it serves, released when they change.
class workspace_memory {
 public:
  workspace_memory() = default;
  workspace_memory(const workspace_memory&) = delete;
  workspace_memory& operator=(const workspace_memory&) = delete;
  /// Takes the other's memory (it keeps none).
  void take(workspace_memory& o) noexcept {
    release();
    mem_ = o.mem_;
    at_ = std::exchange(o.at_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  ~workspace_memory() { release(); }

  /// The memory the next `get` allocates in: another kind than the current
  /// (host after device) releases what is held first.
  void use(const memory_ops& m) {
    if (m.allocate != mem_.allocate || m.ctx != mem_.ctx) release();
    mem_ = m;
  }
  const memory_ops& ops() const noexcept { return mem_; }
  /// At least `bytes` (the held memory, or larger memory in its place).
  std::byte* get(std::size_t bytes) {
    if (bytes > size_) {
      release();  // release first: peak memory is the new size, not both
      at_ = mem_.allocate(mem_.ctx, bytes);
      size_ = bytes;
    }
    return at_;
  }
  std::size_t size() const noexcept { return size_; }
  void release() noexcept {
    if (at_) mem_.release(mem_.ctx, at_, size_);
    at_ = nullptr;
    size_ = 0;
  }

 private:
  memory_ops mem_ = host_memory_ops();
  std::byte* at_ = nullptr;
  std::size_t size_ = 0;
};

/// A communicator's state for calls that bounce (`has_host_bounce_v`): its
/// strategy as validated on the host transport, and a host workspace.
template <class Strategy, class Transport, class = void>
struct bounce_side {
  static constexpr bool on = false;
};
template <class Strategy, class Transport>
struct bounce_side<Strategy, Transport, std::enable_if_t<has_host_bounce_v<Transport>>> {
  static constexpr bool on = true;
  using host_transport = std::remove_reference_t<decltype(std::declval<Transport&>().host())>;
  explicit bounce_side(Strategy s) : strategy(std::move(s)) {}
  Strategy strategy;
  workspace_memory work;  // host memory
};

}  // namespace detail
}  // namespace ddl
