#pragma once
/// \file
/// A group view: the members `base + i * stride` (i = 0..size-1) of a
/// transport, seen as a transport of their own. In a box, the ranks that
/// differ only in one coordinate form such a group; rings run on group
/// views, and that is how a multi-ring composes from rings.
#include "ddl/core/error.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {
/// The parent's `direct_read_factor` and `copy_step_factor` where it
/// declares them (a group view's bases, so that the planner prices a group
/// as its parent).
template <class T, class = void>
struct forwards_direct_read {};
template <class T>
struct forwards_direct_read<T, std::enable_if_t<has_direct_read_factor<T>::value>> {
  static constexpr double direct_read_factor = T::direct_read_factor;
};
template <class T, class = void>
struct forwards_copy_step {};
template <class T>
struct forwards_copy_step<T, std::enable_if_t<has_copy_step_factor<T>::value>> {
  static constexpr double copy_step_factor = T::copy_step_factor;
};
}  // namespace detail

/// \tparam Transport the parent transport (a group view of a group view works too).
template <class Transport>
class group_view : public detail::forwards_direct_read<Transport>, public detail::forwards_copy_step<Transport> {
 public:
  using request = typename Transport::request;  ///< the parent's
  static constexpr bool device_memory = accepts_device_memory_v<Transport>;  ///< the parent's
  static constexpr bool stream_ordered = is_stream_ordered_v<Transport>;  ///< the parent's
  static constexpr bool peer_memory = has_peer_memory_v<Transport>;       ///< the parent's
  static constexpr bool direct_reads_over_links = direct_reads_over_links_v<Transport>;  ///< the parent's
  static constexpr bool direct_round_one_step = direct_round_one_step_v<Transport>;      ///< the parent's
  static constexpr double default_bandwidth = default_link<Transport>::bandwidth;        ///< the parent's
  static constexpr double default_latency = default_link<Transport>::latency;            ///< the parent's

  group_view() = default;
  /// \pre `parent.rank()` is one of the members.
  group_view(Transport& parent, int base, int stride, int size) : parent_(&parent), base_(base), stride_(stride), size_(size) {
    const int off = parent.rank() - base;
    if (size < 1 || stride < 1 || off < 0 || off % stride != 0 || off / stride >= size ||
        base + (size - 1) * stride >= parent.size())
      throw topology_error("group view base " + std::to_string(base) + " stride " + std::to_string(stride) + " size " +
                           std::to_string(size) + " does not contain rank " + std::to_string(parent.rank()) +
                           " of " + std::to_string(parent.size()));
    rank_ = off / stride;
  }

  /// This rank's index among the members.
  int rank() const noexcept { return rank_; }
  /// Members.
  int size() const noexcept { return size_; }
  /// The parent's rank of member `i`.
  int parent_rank(int i) const noexcept { return base_ + i * stride_; }

  /// The parent's eager limit to member `peer` (`eager_bytes`).
  template <class T = Transport, std::enable_if_t<has_eager_bytes_v<T>, int> = 0>
  std::size_t eager_bytes(int peer) const {
    return parent_->eager_bytes(parent_rank(peer));
  }
  /// The parent's cap on the messages to member `peer` (`piece_bytes`).
  template <class T = Transport, std::enable_if_t<has_piece_bytes_v<T>, int> = 0>
  std::size_t piece_bytes(int peer) const {
    return parent_->piece_bytes(parent_rank(peer));
  }

  /// The parent's, to member `peer`.
  request isend(int peer, const_bytes b, tag t) { return parent_->isend(parent_rank(peer), b, t); }
  /// The parent's, from member `peer`.
  request irecv(int peer, mutable_bytes b, tag t) { return parent_->irecv(parent_rank(peer), b, t); }
  /// The parent's, from member `peer`.
  template <class T = Transport, std::enable_if_t<has_fused_reduce_v<T>, int> = 0>
  request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t) {
    return parent_->irecv_reduce(parent_rank(peer), dst, local, r, t);
  }
  /// The parent's.
  void wait(request& r, deadline d) { parent_->wait(r, d); }
  /// The parent's local operations (a communicator over the group uses them).
  template <class T = Transport, std::enable_if_t<has_memory_ops_v<T>, int> = 0>
  memory_ops memory(const location& where) {
    return parent_->memory(where);
  }
  /// The parent's stage of this rank.
  template <class T = Transport, std::enable_if_t<has_peer_stage_v<T>, int> = 0>
  std::byte* stage(std::size_t bytes) {
    return parent_->stage(bytes);
  }
  /// The parent's stage of member `peer`.
  template <class T = Transport, std::enable_if_t<has_peer_stage_v<T>, int> = 0>
  const std::byte* peer_stage(int peer, std::size_t bytes) {
    return parent_->peer_stage(parent_rank(peer), bytes);
  }
  /// Member `peer`'s shared buffer region `r`, mapped here (the parent's).
  template <class T = Transport, std::enable_if_t<has_peer_buffer_v<T>, int> = 0>
  const std::byte* peer_buffer(int peer, const detail::shared_region& r) {
    return parent_->peer_buffer(parent_rank(peer), r);
  }
  /// Whether the members read each other's buffers (the parent's word).
  template <class T = Transport, std::enable_if_t<detail::has_peers_readable<T>::value, int> = 0>
  bool peers_readable() const {
    return parent_->peers_readable();
  }
  /// Whether the members read each other's memory (`read_peer`): the
  /// parent's word on this group where it can say, else on all its ranks.
  template <class T = Transport, std::enable_if_t<has_read_peer_v<T>, int> = 0>
  bool memory_readable() const {
    if constexpr (detail::has_memory_readable_among<T>::value)
      return parent_->memory_readable_among(base_, stride_, size_);
    else return parent_->memory_readable();
  }
  /// The parent's word on members `base + i * stride` (i < `size`).
  template <class T = Transport, std::enable_if_t<detail::has_memory_readable_among<T>::value, int> = 0>
  bool memory_readable_among(int base, int stride, int size) const {
    return parent_->memory_readable_among(parent_rank(base), stride * stride_, size);
  }
  /// The parent's copy out of member `peer`'s memory.
  template <class T = Transport, std::enable_if_t<has_read_peer_v<T>, int> = 0>
  void read_peer(int peer, const std::byte* at, std::byte* dst, std::size_t bytes) {
    parent_->read_peer(parent_rank(peer), at, dst, bytes);
  }
  /// The parent's copy into member `peer`'s memory.
  template <class T = Transport, std::enable_if_t<has_write_peer_v<T>, int> = 0>
  void write_peer(int peer, const std::byte* src, std::byte* at, std::size_t bytes) {
    parent_->write_peer(parent_rank(peer), src, at, bytes);
  }
  /// Whether the members map each other's stages: the parent's word on
  /// this group where it can say (`stages_shared_among`: the ranks of one
  /// machine do, though not every rank of the parent), else whether every
  /// rank of the parent maps every other's.
  template <class T = Transport, std::enable_if_t<has_peer_stage_v<T>, int> = 0>
  bool stages_shared() const {
    if constexpr (has_stages_among_v<T>) return parent_->stages_shared_among(base_, stride_, size_);
    else return parent_->stages_shared();
  }
  /// The members `base + i * stride` of this group, as the parent's.
  template <class T = Transport, std::enable_if_t<has_stages_among_v<T>, int> = 0>
  bool stages_shared_among(int base, int stride, int size) const {
    return parent_->stages_shared_among(parent_rank(base), stride * stride_, size);
  }

  /// Whether every pair of members maps each other's device memory
  /// (`device_peers`): the parent's word on this group where it can say
  /// (`device_peers_among`), else on all its ranks. The rest of the
  /// capability is the parent's, members' ranks translated.
  template <class T = Transport, std::enable_if_t<has_device_peers_v<T>, int> = 0>
  bool device_peers() const {
    if constexpr (detail::has_device_peers_among<T>::value) return parent_->device_peers_among(base_, stride_, size_);
    else return parent_->device_peers();
  }
  /// The members `base + i * stride` of this group, as the parent's.
  template <class T = Transport, std::enable_if_t<detail::has_device_peers_among<T>::value, int> = 0>
  bool device_peers_among(int base, int stride, int size) const {
    return parent_->device_peers_among(parent_rank(base), stride * stride_, size);
  }
  /// Where device buffer `[p, p + n)` lies for the members (the parent's `share_device`).
  template <class T = Transport, std::enable_if_t<has_device_peers_v<T>, int> = 0>
  bool share_device(const std::byte* p, std::size_t n, device_region& r) {
    return parent_->share_device(p, n, r);
  }
  /// Member `peer`'s region `r`, mapped here.
  template <class T = Transport, std::enable_if_t<has_device_peers_v<T>, int> = 0>
  const std::byte* peer_device(int peer, const device_region& r) {
    return parent_->peer_device(parent_rank(peer), r);
  }
  /// The parent's `take_scratch`.
  template <class T = Transport, std::enable_if_t<has_device_peers_v<T>, int> = 0>
  std::byte* take_scratch(std::size_t n) {
    return parent_->take_scratch(n);
  }
  /// The parent's `give_scratch`.
  template <class T = Transport, std::enable_if_t<has_device_peers_v<T>, int> = 0>
  void give_scratch(const std::byte* p) {
    parent_->give_scratch(p);
  }

 private:
  Transport* parent_ = nullptr;
  int base_ = 0, stride_ = 1, size_ = 0, rank_ = 0;
};

}  // namespace ddl
