#pragma once
/// \file
/// The peers of a direct call (`direct_peers`): the address exchange, after
/// which each rank knows where every peer's `in` and `out` can be read
/// (in place over `peer_memory`, mapped where they lie in a `shared_buffer`,
/// in the peer's stage, or in its own process through `read_peer`); what a
/// rank copies into its stage for them; and the reads, copies and n-way
/// reductions out of the peers' memory the strategies are built from.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"
#include "ddl/strategy/direct/layout.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {

/// The peers' buffers in a direct call: their addresses traded, what this
/// rank stages for them, and their data read, copied and reduced.
class direct_peers : public direct_layout {
 public:
  /// Whether this call copies the peers' plain buffers where they lie
  /// (`read_peer`) instead of through the stages: asked for
  /// (`reading_peers`) and possible (`memory_readable`, the same answer on
  /// every rank).
  template <class Transport>
  bool reads_memory(const Transport& t) const {
    if constexpr (has_read_peer_v<Transport>) return reads_ && t.memory_readable();
    (void)t;
    return false;
  }
  /// Whether `[p, p + bytes)` lies in a `shared_buffer` on every rank (its
  /// peers then read it in place, and no segments are needed): one round,
  /// the same answer on every rank.
  template <class Transport>
  static bool every_rank_shared(Transport& t, const std::byte* p, std::size_t bytes, const call_context& c,
                                const char* what) {
    std::vector<std::byte> shared(static_cast<std::size_t>(t.size()));
    shared[static_cast<std::size_t>(t.rank())] = region_of<Transport>(p, bytes) ? std::byte{1} : std::byte{0};
    exchange_with_all(t, shared.data(), 1, c, c.base_tag + tag_offset::addresses, what);
    return std::none_of(shared.begin(), shared.end(), [](std::byte b) { return b == std::byte{0}; });
  }


 protected:
  struct addresses {
    const std::byte* in;
    const std::byte* out;
    const std::byte* staged;   // one_shot: this call's input, copied into the rank's stage; null: none
    std::uint64_t generation;  // one_shot: which staged call this is (the same on every rank in step)
    std::atomic<std::uint64_t>* done;  // one_shot: bumped by each peer once it has read `staged`
    std::uint64_t bytes;               // over `peer_stage`: the call's bytes
    std::uint64_t stage_read;          // over `peer_stage`: whether the rank's stage holds what its peers read
    shared_region in_at, out_at;       // over `peer_stage`: `in`, `out` in a `shared_buffer` (peers read them there)
    const std::atomic<std::uint64_t>* read;  // one_shot over `peer_memory`: how far the rank has read (`read_progress`)
  };

  /// Trades (in, out, staged, generation, done, read) with every peer; afterwards
  /// `peers_[p]` holds rank p's. Over `peer_stage` transports, the peers'
  /// `in` and `out` then point, as mapped here, into their `shared_buffer`s
  /// where `in_at` / `out_at` said they lie (read in place, as over
  /// `peer_memory`, `reads_in_place`), else into their stages (this rank's
  /// own stay its buffers), once every rank says the same size.
  template <class Transport>
  void share_addresses(Transport& t, const std::byte* in, std::byte* out, const char* what, const call_context& c,
                       const shared_region& in_at = {}, const shared_region& out_at = {},
                       const std::byte* staged = nullptr, std::uint64_t generation = 0,
                       std::atomic<std::uint64_t>* done = nullptr, const std::atomic<std::uint64_t>* read = nullptr) {
    require_peer_access<Transport>();
    if (!c.mem->reduce_many)
      throw invalid_argument(std::string(c.strategy) + ": buffers in " + c.mem->name +
                             " memory offer no n-way reduction (memory_ops::reduce_many); use ring or auto");
    const auto n = static_cast<std::size_t>(t.size());
    if (peers_.size() != n) {
      peers_.assign(n, addresses{nullptr, nullptr, nullptr, 0, nullptr, 0, 0, {}, {}, nullptr});
      sources_.assign(n, nullptr);
    }
    peers_[static_cast<std::size_t>(t.rank())] =
        addresses{in, out, staged, generation, done, stage_bytes_, staged_ ? 1u : 0u, in_at, out_at, read};
    exchange_with_all(t, reinterpret_cast<std::byte*>(peers_.data()), sizeof(addresses), c,
                      c.base_tag + tag_offset::addresses, what);
    if constexpr (!has_peer_memory_v<Transport>) {
      for (std::size_t p = 0; p < n; ++p) {
        if (p == static_cast<std::size_t>(t.rank())) continue;
        if (peers_[p].bytes != stage_bytes_)
          throw mismatch_error(std::string(what) + ": rank " + std::to_string(p) + " called with " +
                               std::to_string(peers_[p].bytes) + " bytes and rank " + std::to_string(t.rank()) +
                               " with " + std::to_string(stage_bytes_) + " (count or dtype)");
        addresses& a = peers_[p];
        const std::byte* at =
            a.stage_read ? t.peer_stage(static_cast<int>(p), stage_prefix + stage_bytes_) + stage_prefix : nullptr;
        // Neither mapped nor staged (`remote`): the peer's own addresses, for `read_peer`.
        a.in = a.in_at ? peer_buffer_of(t, static_cast<int>(p), a.in_at) : remote(t, p) ? a.in : at;
        a.out = a.out_at ? peer_buffer_of(t, static_cast<int>(p), a.out_at) : remote(t, p, true) ? a.out : at;
      }
    }
  }

  /// Over `peer_stage`: where `[p, p + bytes)` lies in a `shared_buffer` its
  /// peers can map (`peer_buffer`); none on transports that cannot.
  template <class Transport>
  static shared_region region_of(const std::byte* p, std::size_t bytes) noexcept {
    if constexpr (has_peer_buffer_v<Transport>) return shared_registry::find(p, bytes);
    (void)p;
    (void)bytes;
    return {};
  }
  template <class Transport>
  static const std::byte* peer_buffer_of(Transport& t, int p, const shared_region& r) {
    if constexpr (has_peer_buffer_v<Transport>) return t.peer_buffer(p, r);
    (void)t;
    (void)p;
    (void)r;
    throw invalid_argument("a peer named a shared buffer over a transport that cannot map one");
  }
  /// Whether rank `p`'s `in` (after `share_addresses`) is its buffer itself
  /// (`peer_memory`, or a `shared_buffer`), not its stage.
  template <class Transport>
  bool reads_in_place(int p) const noexcept {
    return has_peer_memory_v<Transport> || static_cast<bool>(peers_[static_cast<std::size_t>(p)].in_at);
  }

  /// Over `peer_stage`: this rank's stage for a call of `bytes` (`shared_stage_`,
  /// `stage_bytes_`); its buffers must be host memory.
  template <class Transport>
  void open_stage(Transport& t, std::size_t bytes, const call_context& c) {
    require_host(c);
    stage_bytes_ = bytes;
    staged_ = true;
    shared_stage_ = t.stage(stage_prefix + bytes) + stage_prefix;
  }
  /// `bytes` of `src` into memory this rank's peers read next (over
  /// `peer_stage`: its stage; over `peer_memory`: a block it gathers into
  /// its own buffer, which they read where it lies in the next call) or that
  /// it gathers from them into its result: with streaming stores when asked
  /// (`streams_`) and the memory has them (`memory_ops::stream_copy`), else
  /// `local_copy`.
  void streamable_copy(const call_context& c, std::byte* dst, const std::byte* src, std::size_t bytes) const {
    if (streams_) streaming_copy(c, dst, src, bytes);
    else local_copy(c, dst, src, bytes);
  }
  /// `bytes` of `src` into `dst` (ranges apart) with streaming stores where
  /// the memory has them (`memory_ops::stream_copy`), else `local_copy`.
  static void streaming_copy(const call_context& c, std::byte* dst, const std::byte* src, std::size_t bytes) {
    if (!c.mem->stream_copy) return local_copy(c, dst, src, bytes);
    if (bytes && dst != src) c.mem->stream_copy(c.mem->ctx, dst, src, bytes);
  }
  /// Over `peer_stage`: a call of `bytes` whose peers read nothing from this
  /// rank's stage (its buffers lie in a `shared_buffer`).
  void skip_stage(std::size_t bytes, const call_context& c) {
    require_host(c);
    stage_bytes_ = bytes;
    staged_ = false;
  }

  /// Over `peer_stage`: this call's `count` elements of `in` into this
  /// rank's stage at their own offsets, all but block `skip` (which only
  /// this rank reads, from `in`).
  template <class Transport>
  void stage_input(Transport& t, const std::byte* in, std::size_t count, const block& skip, const call_context& c) {
    const std::size_t es = size_of(c.red.type);
    open_stage(t, count * es, c);
    const std::size_t from = skip.offset * es, to = (skip.offset + skip.size) * es;
    if (from > 0) streamable_copy(c, shared_stage_, in, from);
    if (to < stage_bytes_) streamable_copy(c, shared_stage_ + to, in + to, stage_bytes_ - to);
  }
  /// Block `b` of every rank's input (its staged copy with `staged`), reduced
  /// in rank order into `dst`.
  void reduce_block(const block& b, std::byte* dst, const call_context& c, bool staged = false) {
    const std::size_t es = size_of(c.red.type);
    for (std::size_t p = 0; p < peers_.size(); ++p)
      sources_[p] = (staged ? peers_[p].staged : peers_[p].in) + b.offset * es;
    c.mem->reduce_many(c.mem->ctx, dst, sources_.data(), static_cast<int>(sources_.size()), b.size, c.red);
  }
  /// Over `read_peer` (after `share_addresses`): whether rank `p`'s `in`
  /// (its `out` with `out`) in `peers_` is an address in its own process,
  /// neither mapped here (a shared buffer) nor staged, so read with
  /// `read_peer`. Never this rank's own.
  template <class Transport>
  bool remote(const Transport& t, std::size_t p, bool out = false) const {
    if constexpr (has_read_peer_v<Transport> && !has_peer_memory_v<Transport>) {
      const addresses& a = peers_[p];
      return p != static_cast<std::size_t>(t.rank()) && !a.stage_read && !(out ? a.out_at : a.in_at);
    }
    (void)t;
    (void)p;
    (void)out;
    return false;
  }
  /// `reduce_block` of the peers' `in` (after `share_addresses`), reading
  /// the peers whose `in` lies in their own process (`remote`) with
  /// `read_peer`, `read_piece` bytes of each at a time.
  template <class Transport>
  void reduce_block_reading(Transport& t, const block& b, std::byte* dst, const call_context& c) {
    const std::size_t n = peers_.size();
    std::size_t reads = 0;
    for (std::size_t p = 0; p < n; ++p) reads += remote(t, p) ? 1 : 0;
    if (reads == 0) {
      reduce_block(b, dst, c);
      return;
    }
    if constexpr (has_read_peer_v<Transport>) {
      const std::size_t es = size_of(c.red.type);
      const std::size_t per = std::max<std::size_t>(read_piece / es, 1);
      if (pieces_.size() < reads * per * es) pieces_.resize(reads * per * es);  // once: fresh pages are slow to write
      for (std::size_t off = 0; off < b.size; off += per) {
        const std::size_t len = std::min(per, b.size - off);
        std::byte* piece = pieces_.data();
        for (std::size_t p = 0; p < n; ++p) {
          const std::byte* at = peers_[p].in + (b.offset + off) * es;
          if (!remote(t, p)) {
            sources_[p] = at;
            continue;
          }
          t.read_peer(static_cast<int>(p), at, piece, len * es);
          sources_[p] = piece;
          piece += per * es;
        }
        c.mem->reduce_many(c.mem->ctx, dst + off * es, sources_.data(), static_cast<int>(n), len, c.red);
      }
    }
  }
  /// `bytes` of rank `p` at `from` (as `share_addresses` left it) into
  /// `dst`: with `read_peer` where `from` lies in the peer's process.
  template <class Transport>
  void copy_from(Transport& t, int p, std::byte* dst, const std::byte* from, std::size_t bytes, const call_context& c,
                 bool out = false) {
    if constexpr (has_read_peer_v<Transport>) {
      if (remote(t, static_cast<std::size_t>(p), out)) {
        t.read_peer(p, from, dst, bytes);
        return;
      }
    }
    (void)t;
    (void)p;
    (void)out;
    gathered_copy<Transport>(c, dst, from, bytes);
  }
  /// `bytes` of a peer's part (or this rank's own) at `src` into this
  /// call's result at `dst`: streamed when asked (`streams_`) over
  /// `peer_memory`, where the result's lines are what the peers read next
  /// call, and elsewhere out of place from `stream_result_from` bytes of
  /// result (`stream_result`): too large to stay in cache and not just read
  /// by this rank, so a write that need not first read the line pays (out
  /// of place it did, in place and below it did not); else `local_copy`.
  template <class Transport>
  void gathered_copy(const call_context& c, std::byte* dst, const std::byte* src, std::size_t bytes) const {
    if (has_peer_memory_v<Transport> || streams_result_) streamable_copy(c, dst, src, bytes);
    else local_copy(c, dst, src, bytes);
  }
  /// Sets `streams_result_` for a call whose result `out` of `bytes` is
  /// gathered from its input (or own part) of `in_bytes` at `in`.
  void stream_result(const std::byte* in, std::size_t in_bytes, const std::byte* out, std::size_t bytes) noexcept {
    streams_result_ = bytes >= stream_result_from && !detail::overlaps(in, in_bytes, out, bytes);
  }

  /// Returns once every rank has reached this point.
  template <class Transport>
  static void end_of_phase(Transport& t, const call_context& c, tag offset, const char* what) {
    exchange_with_all(t, nullptr, 0, c, c.base_tag + offset, what);
  }

  bool reads_ = false;    // see `reads_memory`
  bool streams_ = false;  // see `streamable_copy`
  bool streams_result_ = false;  // see `gathered_copy`
  std::vector<addresses> peers_;
  std::vector<const std::byte*> sources_;
  std::vector<std::byte> pieces_;  // over `read_peer`: `read_piece` bytes per peer read (`reduce_block_reading`)
  std::byte* shared_stage_ = nullptr;  // over `peer_stage`: this call's stage (the transport's memory)
  std::size_t stage_bytes_ = 0;        // over `peer_stage`: the call's bytes; 0 otherwise
  bool staged_ = false;                // over `peer_stage`: whether this call's peers read this rank's stage
};

}  // namespace detail
}  // namespace ddl
