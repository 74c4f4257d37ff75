#pragma once
/// \file
/// The Transport concept's stage members (`stage`, `peer_stage`,
/// `stages_shared`, `read_peer`, `write_peer`, `peer_buffer`, `wait_until`,
/// `stage_raised`, ...) for a transport whose ranks are processes sharing
/// memory through `detail::shared_stages` (the ranks of one machine over MPI
/// or UCX), written once. The transport derives from
/// `stage_access<Transport>`, fills `stages_` at construction (each its own
/// way of trading the stage files), befriends this class and provides:
///   - `static constexpr const char* transport_name` — its name in error texts;
///   - `int rank() const`, `int size() const`, `int cores() const`;
///   - `void refuse_if_broken()`, `void require_rank(int)`,
///     `std::string process_of(int)`, `std::int64_t pid_of(int) const`;
///   - a `request` with the fields `peer_` and `tag_`, and
///     `look_around(request&, Ready&)` and `timed_out(request&, start, now)`
///     as its own waits use them.
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>

#include "ddl/core/error.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/shm/shared_stages.hpp"

namespace ddl::detail {

template <class Transport>
class stage_access {
 public:
  /// Whether every rank maps every other's stage (the ranks agreed at construction).
  bool stages_shared() const noexcept { return stages_.shared(); }
  /// Whether the ranks `base + i * stride` (i < `size`) all map each
  /// other's stages: the ranks of one machine when the job spans several.
  bool stages_shared_among(int base, int stride, int size) const noexcept {
    return stages_.shared_among(base, stride, size);
  }
  /// This rank's stage, at least `bytes` long: an anonymous shared-memory
  /// file (`memfd`), grown, never shrunk. One collective at a time uses it.
  std::byte* stage(std::size_t bytes) {
    self().refuse_if_broken();
    if (std::byte* s = stages_.own_mapped(bytes)) return s;
    return stages_.own(bytes, who());
  }
  /// Rank `peer`'s stage as mapped here, its first `bytes` (it has grown
  /// its stage that far and said so). Mapped once, again only when longer.
  const std::byte* peer_stage(int peer, std::size_t bytes) {
    self().refuse_if_broken();
    self().require_rank(peer);
    if (const std::byte* s = stages_.peer_mapped(peer, bytes)) return s;
    return stages_.peer(peer, bytes, who() + ": " + self().process_of(peer));
  }
  /// Whether every rank reads every other's memory at any address (Linux
  /// cross-memory attach, tried on every pair at construction).
  bool memory_readable() const noexcept { return stages_.readable(); }
  /// `memory_readable` for the ranks `base + i * stride` (i < `size`).
  bool memory_readable_among(int base, int stride, int size) const noexcept {
    return stages_.readable_among(base, stride, size);
  }
  /// Copies `bytes` at address `at` of rank `peer`'s process into `dst`.
  void read_peer(int peer, const std::byte* at, std::byte* dst, std::size_t bytes) {
    self().refuse_if_broken();
    self().require_rank(peer);
    if (const int err = stages_.read(peer, at, dst, bytes))
      throw transport_error(who() + " cannot read " + std::to_string(bytes) + " bytes of " + self().process_of(peer) +
                            "'s memory: " + std::strerror(err));
  }
  /// Copies `bytes` at `src` to address `at` of rank `peer`'s process.
  void write_peer(int peer, const std::byte* src, std::byte* at, std::size_t bytes) {
    self().refuse_if_broken();
    self().require_rank(peer);
    if (const int err = stages_.write(peer, src, at, bytes))
      throw transport_error(who() + " cannot write " + std::to_string(bytes) + " bytes into " +
                            self().process_of(peer) + "'s memory: " + std::strerror(err));
  }
  /// Region `r` of rank `peer`'s `ddl::shared_buffer`, mapped here for
  /// reading: opened through the peer's process, mapped once, kept.
  const std::byte* peer_buffer(int peer, const shared_region& r) {
    self().refuse_if_broken();
    self().require_rank(peer);
    if (const std::byte* s = stages_.peer_buffer_mapped(peer, r)) return s;
    return stages_.peer_buffer(peer, self().pid_of(peer), r, who() + ": " + self().process_of(peer));
  }
  /// Polls `ready()` (a look at rank `peer`'s stage) until it returns true,
  /// as the transport's `wait` waits for a message of `peer` tagged
  /// `awaited`: the same deadline and `timeout_error`, and every 16th poll
  /// the transport's look around (a peer's notice, a dead peer, the peer's
  /// message of this call under another stamp). Ranks that outnumber their
  /// cores yield at once, then sleep on the peer's doorbell, 2 ms at most
  /// at a time (`backoff::stage_wait`).
  template <class Ready>
  void wait_until(int peer, Ready&& ready, deadline until, tag awaited) {
    self().refuse_if_broken();
    typename Transport::request req;  // looked around with, never posted
    req.peer_ = peer;
    req.tag_ = awaited;
    const auto start = std::chrono::steady_clock::now();
    backoff wait_more = backoff::stage_wait(self().cores() < self().size());
    for (unsigned polls = 0;; ++polls) {
      if (ready()) return;
      if (polls % 16 == 15) self().look_around(req, ready);
      if (const auto now = std::chrono::steady_clock::now(); now >= until) self().timed_out(req, start, now);
      wait_more.sleep_with([&](std::chrono::steady_clock::time_point u) { stages_.sleep_on(peer, ready, u); }, until);
    }
  }
  /// Wakes the peers asleep in `wait_until` on this rank's stage.
  void stage_raised() noexcept { stages_.ring(self().rank()); }

 protected:
  stage_access() = default;
  shared_stages stages_;  // filled by the transport's constructor

 private:
  Transport& self() noexcept { return static_cast<Transport&>(*this); }
  const Transport& self() const noexcept { return static_cast<const Transport&>(*this); }
  std::string who() const { return std::string(Transport::transport_name) + ": rank " + std::to_string(self().rank()); }
};

}  // namespace ddl::detail
