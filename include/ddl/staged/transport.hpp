#pragma once
/// \file
/// `staged_transport<Inner, Device>`: device buffers over a host transport
/// (S-Caffe's multi-stage idea). Messages are cut into pieces of
/// `staging_options::slot_bytes`; each piece goes through a small pool of
/// staging slots (pinned host memory for CUDA):
///   send: device -> slot copy (async) | inner isend from the slot | slot free
///   recv: inner irecv into a slot | slot -> device copy, or a reduction that
///         reads the slot directly (async) | slot free
/// Every stage of every piece in flight advances whenever any request is
/// waited on, so the copy of piece k+1 overlaps the network transfer of
/// piece k and the copy back of piece k-1. Inner messages are posted in
/// request order, so matching keeps the Inner transport's FIFO guarantee.
///
/// Calls of up to `staging_options::bounce_bytes` per rank skip the pipeline
/// (`bounces`): a communicator copies the call's device buffer into host
/// memory once (`bounce_buffer`, `bounce_copy`), runs the whole call on the
/// host transport (`host()`) and copies the result back: two copies and the
/// host's own collective instead of a copy, an event and a kernel per piece
/// and step (the pipeline's fixed cost, milliseconds a call). The bounce
/// buffer is a
/// `ddl::shared_buffer`, so MPI peers of one machine read it in place, and is
/// pinned for the device where the device can (`Device::pin`).
///
/// A `Device` whose `direct` is true (a CUDA-aware MPI) skips the slots for
/// sends and plain receives: the inner transport gets device pointers, once
/// the stream has produced the data.
///
/// `Device` (see `cuda::staging_device`, and the host one in the tests):
///   `static constexpr bool direct`; `struct event` (default-constructible);
///   `std::byte* allocate_slot(std::size_t)`, `void release_slot(std::byte*, std::size_t)`;
///   `event copy(std::byte* dst, const std::byte* src, std::size_t)` — async;
///   `event reduce(std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, reduction)`;
///   `event mark()` — an event after the work queued so far;
///   `bool ready(event&)`; `memory_ops memory(const location&)` — also picks the stream;
///   optionally `bool pin(std::byte*, std::size_t)` and `void unpin(std::byte*)`
///   (page-lock host memory for fast copies; false where it cannot).
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ddl/core/config.hpp"
#include "ddl/core/error.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/topology/topology.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/request.hpp"
#include "ddl/shm/shared_buffer.hpp"
#include "ddl/staged/message.hpp"
#include "ddl/staged/near.hpp"
#include "ddl/staged/options.hpp"

namespace ddl {

namespace detail {
template <class D, class = void>
struct can_pin : std::false_type {};
template <class D>
struct can_pin<D, std::void_t<decltype(std::declval<D&>().pin(std::declval<std::byte*>(), std::size_t{})),
                              decltype(std::declval<D&>().unpin(std::declval<std::byte*>()))>> : std::true_type {};
}  // namespace detail

/// Device buffers over host transport `Inner`, the device side done by
/// `Device` (the file's comment has the pipeline; `mpi_staged_transport`
/// is the one over MPI with CUDA).
template <class Inner, class Device>
class staged_transport {
  static_assert(check_transport<Inner>(), "ddl: staged_transport needs an Inner transport");
  static_assert(has_test_v<Inner>, "ddl: staged_transport needs an Inner transport with 'bool test(request&)'");
  using inner_request = typename Inner::request;
  using event = typename Device::event;

 public:
  /// Its messages may lie in device memory (`transport/concept.hpp`).
  static constexpr bool device_memory = true;

  /// What a request refers to (`transport/request.hpp`).
  struct request_fields {
    staged_transport* owner_ = nullptr;  ///< the transport; null: finished
    std::uint64_t id_ = 0;               ///< the message's id there
    /// Whether the message is still in flight.
    bool active() const noexcept { return owner_ != nullptr; }
    /// Gives the message up (its request was dropped unfinished).
    void withdraw() noexcept { owner_->abandon(id_); }
  };
  /// A message in flight (move-only; dropping it unfinished withdraws it).
  class request : public detail::request_handle<request_fields> {
    friend class staged_transport;
  };

  /// \param inner moves the bytes (must outlive this); \param dev does the device side;
  /// \param o the pipeline's settings.
  staged_transport(Inner& inner, Device& dev, staging_options o = staging_options::from_env())
      : inner_(&inner), dev_(&dev), opts_(o) {
    if (o.slot_bytes < 64 || o.slots < 1) throw invalid_argument("staging_options: slot_bytes >= 64 and slots >= 1");
    for (int d = 0; d < 2; ++d)
      for (int k = 0; k < o.slots; ++k) free_[d].push_back(dev.allocate_slot(o.slot_bytes));
    if constexpr (detail::has_device_ipc_v<Device>)
      near_ = std::make_unique<near_type>(inner, dev, o.near, options::from_env().timeout);
  }
  staged_transport(const staged_transport&) = delete;
  staged_transport& operator=(const staged_transport&) = delete;
  ~staged_transport() {
    // Device work in flight (a copy into or out of a slot, a reduction)
    // finishes before its slot goes back (bounded). Pieces that wait on the
    // inner transport are cancelled by destroying their requests (the
    // Transport concept's rule), before the slots they name go back: a peer
    // that never sends costs no wait here.
    try {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      for (auto& p : pieces_)
        if (p.st == stage::copying || p.st == stage::landing)
          while (!dev_->ready(p.ev) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    } catch (...) {
    }
    std::vector<std::byte*> held;
    for (auto& p : pieces_)
      if (p.slot) held.push_back(p.slot);
    pieces_.clear();
    for (std::byte* s : held) dev_->release_slot(s, opts_.slot_bytes);
    for (int d = 0; d < 2; ++d)
      for (std::byte* s : free_[d]) dev_->release_slot(s, opts_.slot_bytes);
    unpin_bounce();
  }

  /// This rank, as `Inner` numbers it.
  int rank() const { return inner_->rank(); }
  /// Ranks in the group.
  int size() const { return inner_->size(); }
  /// The host transport's `abort`, where it has one.
  template <class I = Inner, std::enable_if_t<has_abort_v<I>, int> = 0>
  void abort(const std::string& why) {
    inner_->abort(why);
  }
  /// Copies and reductions for buffers at `where` (the device's, on its stream).
  memory_ops memory(const location& where) { return dev_->memory(where); }
  /// Whether the call stamps survive in the host transport's tags (`stamps_in_tags_of`).
  bool stamps_in_tags() const { return stamps_in_tags_of(*inner_); }

  /// The host transport: calls that `bounces` accepts run on it.
  Inner& host() noexcept { return *inner_; }
  /// Whether a call of `bytes` per rank runs whole on `host()` (at most
  /// `staging_options::bounce_bytes`): the same answer on every rank.
  bool bounces(std::size_t bytes) const noexcept {
    return bytes <= (some_near() ? std::min(opts_.bounce_bytes, opts_.near_bounce_bytes) : opts_.bounce_bytes);
  }
  /// Whether messages between `peer` and this rank go device to device
  /// (`staged/near.hpp`): the same answer on both.
  bool near(int peer) const noexcept {
    if constexpr (detail::has_device_ipc_v<Device>) return near_->near(peer);
    (void)peer;
    return false;
  }
  /// Link costs `auto_strategy` prices device buffers on where the device
  /// shares memory (`topology()`): a step between near ranks (a note each
  /// way over the host transport, one device pass at device-memory speed)
  /// and a step staged through host memory. Not yet fitted on a GPU.
  static constexpr double near_bandwidth = 200e9;   ///< bytes/s of a step between near ranks
  static constexpr double near_latency = 30e-6;     ///< seconds a step between near ranks starts in
  static constexpr double staged_bandwidth = 10e9;  ///< bytes/s of a step staged through host memory
  static constexpr double staged_latency = 30e-6;   ///< seconds a staged step starts in
  /// The levels `auto_strategy` plans on (where the device shares memory):
  /// `DDL_TOPOLOGY` where set; else, where the near ranks are blocks of g
  /// consecutive ranks (the ranks of a host), a level of g near ranks under
  /// one of n / g staged through host memory, so the multi-ring and the
  /// direct-first plans reduce between near ranks first; else one level.
  template <class D = Device, std::enable_if_t<detail::has_device_ipc_v<D>, int> = 0>
  ddl::topology topology() const {
    const int n = size(), g = near_->block();
    ddl::topology t;
    if (g == n) {
      t = ddl::topology::uniform(n, near_bandwidth, near_latency);
    } else if (g > 1) {
      t.add(level{g, near_bandwidth, near_latency, 0});
      t.add(level{n / g, staged_bandwidth, staged_latency, 0});
    } else {
      t = ddl::topology::uniform(n, staged_bandwidth, staged_latency);
    }
    return ddl::topology::from_env(n, t);
  }
  /// Whether any two ranks of the group are near: the same answer on every rank.
  bool some_near() const noexcept {
    if constexpr (detail::has_device_ipc_v<Device>) return near_->any();
    return false;
  }
  /// Device memory mapped between the processes (`device_peers` in
  /// `transport/peer_access.hpp`; `ddl::one_shot` and `ddl::two_shot` read
  /// it in place): whether every pair of ranks is near, where a buffer lies
  /// for them, a peer's region mapped here, and scratch they map.
  template <class D = Device, std::enable_if_t<detail::has_device_ipc_v<D>, int> = 0>
  bool device_peers() const noexcept {
    return device_peers_among(0, 1, size());
  }
  /// Whether every pair of ranks `base + i * stride` (i < `size`) is near:
  /// the same answer on every rank (a `group_view`'s `device_peers`).
  template <class D = Device, std::enable_if_t<detail::has_device_ipc_v<D>, int> = 0>
  bool device_peers_among(int base, int stride, int size) const noexcept {
    for (int i = 0; i < size; ++i)
      for (int j = i + 1; j < size; ++j)
        if (!near_->near(base + i * stride, base + j * stride)) return false;
    return true;
  }
  /// Fills `r` with where `[p, p + n)` lies for the peers; false: they cannot map it.
  template <class D = Device, std::enable_if_t<detail::has_device_ipc_v<D>, int> = 0>
  bool share_device(const std::byte* p, std::size_t n, device_region& r) {
    return n > 0 && dev_->share(p, n, r);
  }
  /// Rank `peer`'s region `r`, mapped here (its first byte past `r.offset`).
  template <class D = Device, std::enable_if_t<detail::has_device_ipc_v<D>, int> = 0>
  const std::byte* peer_device(int peer, const device_region& r) {
    return dev_->open(peer, r) + r.offset;
  }
  /// `n` bytes of device memory the peers can map, held until `give_scratch`.
  template <class D = Device, std::enable_if_t<detail::has_device_ipc_v<D>, int> = 0>
  std::byte* take_scratch(std::size_t n) {
    return near_->scratch().take(n);
  }
  /// Gives back what `take_scratch` returned at `p`.
  template <class D = Device, std::enable_if_t<detail::has_device_ipc_v<D>, int> = 0>
  void give_scratch(const std::byte* p) {
    near_->scratch().give(p);
  }
  /// Host memory for a call that bounces, at least `bytes` long: a
  /// `shared_buffer`, pinned where the device can; grown on demand (its
  /// address may then change), kept for the transport's life.
  std::byte* bounce_buffer(std::size_t bytes) {
    if (bytes > bounce_.size()) {
      unpin_bounce();
      bounce_ = shared_buffer{};  // the old one goes first: peak memory is the new size
      bounce_ = shared_buffer(bytes);
      if constexpr (detail::can_pin<Device>::value) pinned_ = dev_->pin(bounce_.data(), bounce_.size());
    }
    return bounce_.data();
  }
  /// Copies `n` bytes between a buffer at `where` (device or host) and host
  /// memory, after the work queued on `where`'s stream, and waits for it
  /// (`timeout_error` when `until` passes first: the stream is held up).
  void bounce_copy(std::byte* dst, const std::byte* src, std::size_t n, const location& where, deadline until) {
    if (n == 0) return;
    (void)dev_->memory(where);  // picks the stream
    event ev = dev_->copy(dst, src, n);
    const auto start = std::chrono::steady_clock::now();
    detail::backoff b;
    while (!dev_->ready(ev)) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= until)
        throw timeout_error(rank(), "this rank's copy between device and host memory (its stream is held up)", "",
                            std::chrono::duration<double>(now - start).count());
      b.pause();
    }
  }

  /// Sends `data` (device or host memory) to `peer` under tag `t`.
  request isend(int peer, const_bytes data, tag t) { return post(kind::send, peer, const_cast<std::byte*>(data.data), nullptr, data.size, {}, t); }
  /// Receives `data` from `peer` under tag `t`.
  request irecv(int peer, mutable_bytes data, tag t) { return post(kind::recv, peer, data.data, nullptr, data.size, {}, t); }
  /// `dst = local (op) received`; the device reduces straight from the slot.
  request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t) {
    return post(kind::reduce, peer, dst.data, local.data, dst.size, r, t);
  }

  /// Whether `r` has finished (then retired); advances every message in flight.
  bool test(request& r) {
    progress();
    return finished(r);
  }
  /// Waits for `r`; `timeout_error` naming its peer once `until` passes.
  void wait(request& r, deadline until) {
    if (!r.active()) return;
    const auto start = std::chrono::steady_clock::now();
    detail::backoff b;
    for (;;) {
      progress();
      if (finished(r)) return;
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) {
        const int peer = is_near(r.id_) ? near_peer_of(r.id_) : op_of(r.id_).peer;
        throw timeout_error(peer, "", "", std::chrono::duration<double>(now - start).count());
      }
      b.pause();
    }
  }

  /// Pieces in flight now (tests look at it).
  std::size_t pieces_in_flight() const noexcept { return pieces_.size(); }

 private:
  using kind = detail::staged_message::kind;
  enum class stage : std::uint8_t { need_slot, copying, ready_to_post, posted, landing, done };
  struct op : detail::staged_message {
    std::size_t pieces = 0, started = 0, finished = 0;
    bool abandoned = false;
  };
  struct piece {
    std::uint64_t op = 0;
    std::size_t index = 0, offset = 0, len = 0;
    stage st = stage::need_slot;
    std::byte* slot = nullptr;
    event ev{};
    inner_request req;
  };

  // Messages to and from near peers carry this bit in their id (`near_`).
  static constexpr std::uint64_t near_bit = std::uint64_t{1} << 63;
  static bool is_near(std::uint64_t id) noexcept { return (id & near_bit) != 0; }
  int near_peer_of(std::uint64_t id) const {
    if constexpr (detail::has_device_ipc_v<Device>) return near_->peer_of(id & ~near_bit);
    (void)id;
    return -1;
  }

  request post(kind k, int peer, std::byte* data, const std::byte* local, std::size_t bytes, reduction red, tag t) {
    const detail::staged_message m{0, k, peer, t, data, local, bytes, red};
    if constexpr (detail::has_device_ipc_v<Device>) {
      if (near_->near(peer)) {
        request r;
        r.owner_ = this;
        r.id_ = near_bit | near_->post(m);
        return r;
      }
    }
    op o;
    static_cast<detail::staged_message&>(o) = m;
    o.id = ++next_id_;
    o.pieces = bytes == 0 ? 1 : (bytes + opts_.slot_bytes - 1) / opts_.slot_bytes;
    ops_.push_back(o);
    request r;
    r.owner_ = this;
    r.id_ = o.id;
    progress();
    return r;
  }

  op& op_of(std::uint64_t id) {
    for (auto& o : ops_)
      if (o.id == id) return o;
    throw invalid_argument("staged_transport: unknown request");
  }
  bool finished(request& r) {
    if constexpr (detail::has_device_ipc_v<Device>) {
      if (is_near(r.id_)) {
        if (!near_->finished(r.id_ & ~near_bit)) return false;
        r.owner_ = nullptr;
        return true;
      }
    }
    for (auto it = ops_.begin(); it != ops_.end(); ++it)
      if (it->id == r.id_) {
        if (it->finished < it->pieces) return false;
        ops_.erase(it);
        r.owner_ = nullptr;
        return true;
      }
    r.owner_ = nullptr;
    return true;
  }
  void abandon(std::uint64_t id) noexcept {
    if constexpr (detail::has_device_ipc_v<Device>) {
      if (is_near(id)) return near_->abandon(id & ~near_bit);
    }
    for (auto it = ops_.begin(); it != ops_.end(); ++it)
      if (it->id == id) {
        // Pieces already handed to the inner transport run to completion
        // (their slots are ours); pieces not started never will be.
        it->pieces = it->started;
        it->abandoned = true;
        if (it->finished >= it->pieces) ops_.erase(it);
        return;
      }
  }

  bool needs_slot(const op& o) const {
    if (o.k == kind::reduce) return true;
    return !Device::direct;
  }
  int dir(const op& o) const { return o.k == kind::send ? 0 : 1; }

  // Starts pieces in request order while slots last, then advances every
  // piece in flight as far as it can go.
  void progress() {
    if constexpr (detail::has_device_ipc_v<Device>) near_->progress();
    // Per direction, pieces start in request order: once a request waits
    // for a slot, later requests of that direction wait too (so inner
    // messages keep their order), but the other direction goes on.
    bool out_of_slots[2] = {false, false};
    for (auto& o : ops_) {
      const int d = dir(o);
      while (!out_of_slots[d] && o.started < o.pieces) {
        if (needs_slot(o) && free_[d].empty()) {
          out_of_slots[d] = true;
          break;
        }
        piece p;
        p.op = o.id;
        p.index = o.started;
        p.offset = o.started * opts_.slot_bytes;
        p.len = o.bytes == 0 ? 0 : std::min(opts_.slot_bytes, o.bytes - p.offset);
        if (needs_slot(o)) {
          p.slot = free_[d].back();
          free_[d].pop_back();
        }
        if (o.k == kind::send) {  // the data is what the stream has produced by now
          p.ev = needs_slot(o) ? dev_->copy(p.slot, o.data + p.offset, p.len) : dev_->mark();
          p.st = stage::copying;
        } else {
          p.st = stage::ready_to_post;
        }
        ++o.started;
        pieces_.push_back(std::move(p));
      }
    }
    // Inner sends are posted in piece order: stop at the first send piece
    // whose copy is not done yet. Receives are posted at once.
    bool sends_blocked = false;
    for (auto& p : pieces_) {
      op& o = op_of(p.op);
      if (p.st == stage::copying && !sends_blocked) {
        if (dev_->ready(p.ev)) p.st = stage::ready_to_post;
        else sends_blocked = true;
      }
      if (p.st == stage::ready_to_post && (o.k != kind::send || !sends_blocked)) {
        if (o.k == kind::send) {
          const std::byte* src = p.slot ? p.slot : o.data + p.offset;
          p.req = inner_->isend(o.peer, const_bytes{src, p.len}, o.tg);
        } else {
          std::byte* dst = p.slot ? p.slot : o.data + p.offset;
          p.req = inner_->irecv(o.peer, mutable_bytes{dst, p.len}, o.tg);
        }
        p.st = stage::posted;
      }
    }
    for (auto& p : pieces_) {
      op& o = op_of(p.op);
      if (p.st == stage::posted && inner_->test(p.req)) {
        if (o.k == kind::send || (o.k == kind::recv && !p.slot) || o.abandoned) {
          p.st = stage::done;
        } else if (o.k == kind::recv) {
          p.ev = dev_->copy(o.data + p.offset, p.slot, p.len);
          p.st = stage::landing;
        } else {
          const std::size_t es = size_of(o.red.type);
          if (o.red.received_first)
            p.ev = dev_->reduce(o.data + p.offset, p.slot, o.local + p.offset, p.len / es, o.red);
          else
            p.ev = dev_->reduce(o.data + p.offset, o.local + p.offset, p.slot, p.len / es, o.red);
          p.st = stage::landing;
        }
      }
      if (p.st == stage::landing && dev_->ready(p.ev)) p.st = stage::done;
    }
    while (!pieces_.empty()) {
      auto it = pieces_.begin();
      bool any = false;
      for (; it != pieces_.end(); ++it)
        if (it->st == stage::done) {
          any = true;
          break;
        }
      if (!any) break;
      op& o = op_of(it->op);
      if (it->slot) free_[dir(o)].push_back(it->slot);
      ++o.finished;
      const bool drop = o.abandoned && o.finished >= o.pieces;
      const std::uint64_t id = o.id;
      pieces_.erase(it);
      if (drop)
        for (auto oi = ops_.begin(); oi != ops_.end(); ++oi)
          if (oi->id == id) {
            ops_.erase(oi);
            break;
          }
    }
  }

  void unpin_bounce() noexcept {
    if constexpr (detail::can_pin<Device>::value)
      if (pinned_) dev_->unpin(bounce_.data());
    pinned_ = false;
  }

  Inner* inner_;
  Device* dev_;
  staging_options opts_;
  shared_buffer bounce_;  // calls that bounce: the host copy of their buffer
  bool pinned_ = false;
  std::uint64_t next_id_ = 0;
  std::deque<op> ops_;
  std::deque<piece> pieces_;
  std::vector<std::byte*> free_[2];
  struct no_near {};  // a Device that shares no memory
  using near_type = std::conditional_t<detail::has_device_ipc_v<Device>, detail::near_peers<Inner, Device>, no_near>;
  std::unique_ptr<near_type> near_;  // where the device shares its memory (`Device::share`)
};

}  // namespace ddl
