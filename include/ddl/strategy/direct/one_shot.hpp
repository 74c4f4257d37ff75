#pragma once
/// \file
/// `ddl::one_shot`: every rank reads every rank's whole input and reduces
/// it itself (strategy/direct.hpp has the model).
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

#include "ddl/strategy/direct/scatter_gather.hpp"
#include "ddl/strategy/direct/stage_memory.hpp"

namespace ddl {

/// One-shot all-reduce: each rank reduces every rank's whole input itself.
/// For small messages on ranks that share memory. Up to `stage_limit` bytes
/// in place (`stage_limit_out_of_place` out of place) a call is one
/// synchronisation: each rank copies its input into its stage
/// (two slots, used in turn), the ranks trade addresses, and each reduces
/// the stages into its own output. A rank writes a slot again only two calls
/// later, when every peer has entered the call in between and so finished
/// reading it. Larger calls (and the first, and any whose ranks' stages are
/// not in step) read the inputs in place and synchronise once more before
/// returning; they need `count` elements of workspace in place (the result
/// is built there and copied back once no peer reads the input any more:
/// over threads segment by segment, `all_reduce_landed`).
/// Example:
/// \code
///   ddl::communicator<ddl::one_shot, ddl::local_transport> comm(t);
///   comm.all_reduce(ddl::host_view(g), ddl::op::sum);
/// \endcode
struct one_shot : detail::direct_base {
  static constexpr const char* name = "one_shot";  ///< its name in plans and errors
  /// The largest message (bytes per rank) that goes through the stage. In
  /// place the stage stands in for the workspace the result would be built
  /// in (the same copy, one synchronisation fewer); out of place it adds a
  /// copy of freshly written memory that every peer then reads, which costs
  /// more than the synchronisation it saves above a few KiB.
  static constexpr std::size_t stage_limit = std::size_t{256} << 10;
  static constexpr std::size_t stage_limit_out_of_place = std::size_t{16} << 10;
  /// Whether a call of `bytes` per rank goes through the stage.
  static constexpr bool through_stage(std::size_t bytes, bool in_place) {
    return bytes > 0 && bytes <= (in_place ? stage_limit : stage_limit_out_of_place);
  }
  /// In place, over `peer_memory` with counters a rank can wait on
  /// (threads), a call above the stage: the buffer is read in segments of
  /// `land_segment` bytes, each reduced into one of `land_slots` slots at the
  /// start of the workspace (they stay in cache) and, once every peer has
  /// read that segment of every buffer (its `read_progress` counter), copied
  /// to its place in the buffer. So the result is not built whole in the
  /// workspace and copied back after a round (2 S more memory traffic).
  static constexpr std::size_t land_segment = std::size_t{64} << 10;
  static constexpr std::size_t land_slots = 4;
  static constexpr std::size_t land_elements(std::size_t es) noexcept {
    return land_segment / es > 0 ? land_segment / es : 1;
  }
  std::string describe() const { return name; }  ///< its name
  /// Workspace its all-reduce needs: `count` elements (an in-place result is built there).
  static std::size_t all_reduce_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }

  /// `out` = the reduction of every rank's `in` (`count` elements; in place when equal).
  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    if (t.size() == 1) local_copy(c, out, in, count * size_of(c.red.type));
    else if constexpr (detail::device_peers_only_v<Transport>) all_reduce_device(t, in, out, count, c);
    else all_reduce_shared(t, in, out, count, c);
  }

 private:
  /// Over processes that map each other's device memory (`device_peers`):
  /// the ranks trade where their inputs lie (an input the peers cannot map
  /// is copied into scratch they can), each reduces all n inputs in one
  /// `reduce_many` reading them where they lie, and a second meeting says
  /// every peer is done reading. In place, with the input read where it
  /// lies, the result is built in the workspace and copied back after it.
  template <class Transport>
  void all_reduce_device(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                         const call_context& c) {
    const int n = t.size();
    const std::size_t bytes = count * size_of(c.red.type);
    require_device_buffers(c);
    held_scratch<Transport> held{t, {}};
    std::vector<device_places> all;
    const std::byte* src = trade_input(t, in, bytes, bytes, held, all, c, "one-shot: device addresses");
    sources_.assign(static_cast<std::size_t>(n), nullptr);
    for (int p = 0; p < n; ++p)
      sources_[static_cast<std::size_t>(p)] = place_of(t, p, all[static_cast<std::size_t>(p)].in, src);
    const bool through_work = in == out && src == in;  // the peers read `out` until the phase ends
    std::byte* dst = through_work ? c.work : out;
    c.mem->reduce_many(c.mem->ctx, dst, sources_.data(), n, count, c.red);
    end_of_phase(t, c, tag_offset::call_done, "one-shot: peers reading");
    if (through_work) local_copy(c, out, dst, bytes);
    local_finalize(c, out, count, n);
  }

  template <class Transport>
  void all_reduce_shared(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    const int n = t.size();
    const std::size_t bytes = count * size_of(c.red.type);
    if constexpr (has_wait_until_v<Transport>) {
      if (bytes <= flagged_limit) {
        all_reduce_flagged(t, in, out, count, c);
        return;
      }
    }
    if constexpr (has_flagged_all_reduce_v<Transport>) {  // the transport's own counters (CUDA: device memory)
      if (bytes <= Transport::flagged_bytes && t.flagged_ready()) {
        t.flagged_all_reduce(in, out, count, c.red, c.base_tag,
                             std::chrono::duration_cast<std::chrono::nanoseconds>(c.opts->timeout));
        return;
      }
    }
    if constexpr (!has_peer_memory_v<Transport>) {
      // Through the transport's stages: the whole input copied in, read by
      // every peer from there, so the result may go straight to `out`. Out
      // of place an input in a shared buffer is read where it lies (in
      // place it would be overwritten while peers read it).
      const detail::shared_region in_at = in != out ? region_of<Transport>(in, bytes) : detail::shared_region{};
      if (in_at) skip_stage(bytes, c);
      else stage_input(t, in, count, block{0, 0}, c);
      share_addresses(t, in, out, "one-shot: addresses", c, in_at);
      reduce_block(block{0, count}, out, c);
      end_of_phase(t, c, tag_offset::call_done, "one-shot: peers reading");
      local_finalize(c, out, count, n);
    } else {
      try {
        // Stage this call's input: slot `generation_ % 2`, its counter reset
        // (no peer reads it now: each finished with it before entering the
        // call this rank has seen them all in since).
        const std::byte* staged = nullptr;
        detail::stage_memory::counter* done = nullptr;
        const std::size_t slot = generation_ % 2;
        if (through_stage(bytes, in == out) && std::strcmp(c.mem->name, "host") == 0) {
          stage_.reserve(bytes, stage_limit);
          done = stage_.done(slot);
          done->store(0, std::memory_order_relaxed);
          local_copy(c, stage_.slot(slot), in, bytes);
          staged = stage_.slot(slot);
        }
        // No peer reads this counter now: each read the last call's before
        // its end of phase, and the address exchange below orders this.
        read_.value.store(0, std::memory_order_relaxed);
        share_addresses(t, in, out, "one-shot: addresses", c, {}, {}, staged, generation_, done, &read_.value);
        stage_.reads_over();  // every peer has entered this call: no read of an earlier one is pending
        bool all_staged = true;
        std::uint64_t latest = 0;
        for (const auto& a : peers_) {
          all_staged = all_staged && a.staged && a.generation == generation_;
          latest = std::max(latest, a.generation);
        }
        if (all_staged) {
          reduce_block(block{0, count}, out, c, true);
          for (std::size_t p = 0; p < peers_.size(); ++p)
            if (p != static_cast<std::size_t>(t.rank())) peers_[p].done->fetch_add(1, std::memory_order_release);
          stage_.expect_reads(slot, static_cast<std::uint64_t>(n - 1));
          local_finalize(c, out, count, n);
          ++generation_;
          return;
        }
        const bool in_place = in == out;
        if constexpr (has_wait_until_v<Transport>) {
          if (in_place && count > land_elements(size_of(c.red.type)) && std::strcmp(c.mem->name, "host") == 0) {
            all_reduce_landed(t, out, count, c);
            generation_ = latest + 1;
            return;
          }
        }
        std::byte* dst = in_place ? c.work : out;
        reduce_block(block{0, count}, dst, c);
        // Every segment read, for peers that land theirs (`all_reduce_landed`).
        read_.value.store(read_progress::all, std::memory_order_release);
        raised(t);
        // One tag whether in place or not: ranks may differ in that.
        end_of_phase(t, c, tag_offset::call_done, "one-shot: peers reading");
        if (in_place) local_copy(c, out, dst, bytes);
        local_finalize(c, out, count, n);
        // Every rank saw the same table and has left it behind (the phase's
        // end): they all continue from the same generation, any slot free.
        generation_ = latest + 1;
      } catch (...) {
        stage_.retire();
        throw;
      }
    }
  }

  /// A call of at most `flagged_limit` bytes over stages a transport can
  /// wait on: one round through the stages' counters (`flagged_round`),
  /// then every rank's slot reduced, in rank order, into `out`.
  template <class Transport>
  void all_reduce_flagged(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                          const call_context& c) {
    const std::size_t bytes = count * size_of(c.red.type);
    flagged_round(t, in, bytes, bytes, c);
    if (bytes > 0) c.mem->reduce_many(c.mem->ctx, out, sources_.data(), t.size(), count, c.red);
    local_finalize(c, out, count, t.size());
  }

  /// How far a rank has read its peers' buffers in the current call: the
  /// segments done (`all`: the whole call), on a cache line of its own. Its
  /// peers wait on it before they overwrite those segments of their own
  /// buffers. A copy of the strategy starts at 0.
  struct alignas(64) read_progress {
    static constexpr std::uint64_t all = ~std::uint64_t{0};
    std::atomic<std::uint64_t> value{0};
    read_progress() = default;
    read_progress(const read_progress&) noexcept {}
    read_progress& operator=(const read_progress&) noexcept { return *this; }
  };

  template <class Transport>
  void all_reduce_landed(Transport& t, std::byte* buf, std::size_t count, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type), per = land_elements(es);
    const std::size_t segments = (count + per - 1) / per;
    const auto segment = [&](std::size_t k) { return block{k * per, std::min(per, count - k * per)}; };
    // Slot k % land_slots; ends within the workspace (`count` elements), as k * per + its size does.
    const auto slot = [&](std::size_t k) { return c.work + (k % land_slots) * per * es; };
    // Landed with streaming stores where the memory has them: every peer
    // has just read these lines, and a cached write must first take each
    // back from their caches.
    const auto land = [&](std::size_t k) {
      const block b = segment(k);
      streaming_copy(c, buf + b.offset * es, slot(k), b.size * es);
    };
    const deadline until = phase_deadline(c);
    for (std::size_t k = 0; k < segments; ++k) {
      if (k >= land_slots) {  // slot k's last segment lands once every peer has read that far
        const std::uint64_t needed = k - land_slots + 1;
        for (int d = 1; d < n; ++d) {
          const int p = (r + d) % n;
          const auto* theirs = peers_[static_cast<std::size_t>(p)].read;
          wait_on_peer(t, p, [theirs, needed] { return theirs->load(std::memory_order_acquire) >= needed; }, until,
                       c, phase_name{"one-shot: peers reading segments", static_cast<int>(needed - 1),
                                     static_cast<int>(segments)});
        }
        land(k - land_slots);
      }
      const block b = segment(k);
      reduce_block(b, slot(k), c);
      local_finalize(c, slot(k), b.size, n);
      read_.value.store(k + 1, std::memory_order_release);
      raised(t);
    }
    end_of_phase(t, c, tag_offset::call_done, "one-shot: peers reading");
    for (std::size_t k = segments > land_slots ? segments - land_slots : 0; k < segments; ++k) land(k);
  }

  detail::stage_memory stage_;
  std::uint64_t generation_ = 0;  // staged calls in step so far
  read_progress read_;
};


}  // namespace ddl
