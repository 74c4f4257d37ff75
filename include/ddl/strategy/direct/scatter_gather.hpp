#pragma once
/// \file
/// The direct reduce-scatter and all-gather (`direct_base`, the base of
/// `one_shot` and `two_shot`): one synchronisation each besides the
/// address exchange; their message-synchronised cores take any partition
/// into one contiguous part per rank (`reduce_scatter_parts`,
/// `all_gather_parts`), which a multi-ring's `direct_first` level runs.
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

#include "ddl/strategy/direct/device_peers.hpp"
#include "ddl/strategy/partition.hpp"

namespace ddl {
namespace detail {

/// What the direct strategies share: the direct reduce-scatter and
/// all-gather over the peers' memory, and everything below them.
class direct_base : public direct_device {
 public:
  template <class Transport>
  void validate(const Transport& t) {
    if constexpr (device_peers_only_v<Transport>) {
      validate_device(t, "one_shot and two_shot");
    } else {
      require_peer_access<Transport>();
      if (!peers_reachable(t))
        throw invalid_argument("one_shot and two_shot read their peers' memory, and this transport's ranks cannot "
                               "(MPI: ranks on more than one machine, shared memory refused, or DDL_MPI_SHM=0); "
                               "use ring, multi_ring or auto");
    }
  }
  static std::size_t reduce_scatter_workspace(std::size_t, dtype, int) { return 0; }

  /// `out` = this rank's block of the reduction, read from every rank's `in`
  /// (over device peers where it lies on the device: `reduce_scatter_device`).
  template <class Transport>
  void reduce_scatter(Transport& t, const std::byte* in, std::byte*, std::byte* out, std::size_t count,
                      const call_context& c) {
    if (t.size() == 1) {
      local_copy(c, out, in, count * size_of(c.red.type));
      local_finalize(c, out, count, 1);
    } else if constexpr (device_peers_only_v<Transport>) {
      reduce_scatter_device(t, blocks{count, t.size()}, in, out, count, c);
      local_finalize(c, out, block_of(count, t.size(), t.rank()).size, t.size());
    } else {
      reduce_scatter_shared(t, in, out, count, c);
    }
  }

  /// `block_of(count, n, j)` as a partition (`reduce_scatter_parts`).
  struct blocks {
    std::size_t count;
    int n;
    block operator()(int j) const noexcept { return block_of(count, n, j); }
  };

  /// The direct reduce-scatter over any partition of `count` elements into
  /// one contiguous part per rank (`part(j)`, element offsets; a multi-ring
  /// level's `ring_slices`): `own` = part `part(rank)` of every rank's `in`
  /// reduced in rank order, not finalised. Synchronised by messages (no
  /// counters in stages): runs on group views too, and over device peers
  /// (`reduce_scatter_device`).
  template <class Transport, class Part>
  void reduce_scatter_parts(Transport& t, const Part& part, const std::byte* in, std::byte* own, std::size_t count,
                            const call_context& c) {
    const block mine = part(t.rank());
    if (t.size() == 1) {  // a group of one (a first dimension of extent 1): nothing to read, no stage needed
      local_copy(c, own, in + mine.offset * size_of(c.red.type), mine.size * size_of(c.red.type));
    } else if constexpr (device_peers_only_v<Transport>) {
      reduce_scatter_device(t, part, in, own, count, c);
    } else {
      reduce_scatter_shared_parts(t, part, in, own, count, c);
    }
  }

  /// `out` = every rank's block, copied from where each rank holds it (over
  /// device peers where it lies on the device: `all_gather_device`).
  template <class Transport>
  void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count, const call_context& c) {
    if (t.size() == 1) {
      local_copy(c, out, own, count * size_of(c.red.type));
    } else if constexpr (device_peers_only_v<Transport>) {
      all_gather_device(t, blocks{count, t.size()}, own, out, count, c);
    } else {
      all_gather_shared(t, own, out, count, c);
    }
  }

  /// The direct all-gather over any partition (`reduce_scatter_parts`):
  /// `out` = every rank's part, copied from where it holds it (`own`).
  template <class Transport, class Part>
  void all_gather_parts(Transport& t, const Part& part, const std::byte* own, std::byte* out, std::size_t count,
                        const call_context& c) {
    const std::size_t es = size_of(c.red.type);
    if (t.size() == 1) {  // a group of one: its own part only, no stage needed
      const block mine = part(0);
      local_copy(c, out + mine.offset * es, own, mine.size * es);
    } else if constexpr (device_peers_only_v<Transport>) {
      all_gather_device(t, part, own, out, count, c);
    } else {
      all_gather_shared_parts(t, part, own, out, count, c);
    }
  }

 private:
  // The forms over memory the ranks reach (threads' buffers, stages).
  template <class Transport>
  void reduce_scatter_shared(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                             const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    const block mine = block_of(count, n, r);
    if constexpr (has_wait_until_v<Transport>) {
      if (count * es <= flagged_limit) {  // one round through the stages' counters
        flagged_round(t, in, count * es, count * es, c);
        for (auto& from : sources_) from += mine.offset * es;
        if (mine.size > 0) c.mem->reduce_many(c.mem->ctx, out, sources_.data(), n, mine.size, c.red);
        local_finalize(c, out, mine.size, n);
        return;
      }
    }
    reduce_scatter_parts(t, blocks{count, n}, in, out, count, c);
    local_finalize(c, out, mine.size, n);
  }

  template <class Transport, class Part>
  void reduce_scatter_shared_parts(Transport& t, const Part& part, const std::byte* in, std::byte* own,
                                   std::size_t count, const call_context& c) {
    const block mine = part(t.rank());
    shared_region in_at;
    if constexpr (!has_peer_memory_v<Transport>) {  // peers read `in` where it lies (a shared buffer) or staged
      in_at = region_of<Transport>(in, count * size_of(c.red.type));
      if (in_at || reads_memory(t)) skip_stage(count * size_of(c.red.type), c);
      else stage_input(t, in, count, mine, c);
    }
    share_addresses(t, in, own, "direct reduce-scatter", c, in_at);
    reduce_block_reading(t, mine, own, c);
    end_of_phase(t, c, tag_offset::call_done, "direct reduce-scatter: peers reading");
  }

  template <class Transport>
  void all_gather_shared(Transport& t, const std::byte* own, std::byte* out, std::size_t count,
                         const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    const block mine = block_of(count, n, r);
    if constexpr (has_wait_until_v<Transport>) {
      if (count * es <= flagged_limit) {  // one round through the stages' counters: each slot holds its block
        flagged_round(t, own, mine.size * es, count * es, c);
        for (int k = 0; k < n; ++k) {
          const int p = (r + k) % n;
          const block b = block_of(count, n, p);
          local_copy(c, out + b.offset * es, k == 0 ? own : sources_[static_cast<std::size_t>(p)], b.size * es);
        }
        return;
      }
    }
    if constexpr (stages_in_segments_v<Transport>) {
      const std::size_t per = segment_elements(es);
      if (block_of(count, n, 0).size > per && !reads_memory(t) &&  // block 0 is the largest
          !every_rank_shared(t, own, block_of(count, n, r).size * es, c, "direct all-gather: shared buffers")) {
        stream_result(own, mine.size * es, out, count * es);  // (all_gather_parts sets it itself)
        all_gather_segments(t, own, out, count, per, c);
        return;
      }
    }
    all_gather_parts(t, blocks{count, n}, own, out, count, c);
  }

  template <class Transport, class Part>
  void all_gather_shared_parts(Transport& t, const Part& part, const std::byte* own, std::byte* out,
                               std::size_t count, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    stream_result(own, part(r).size * es, out, count * es);
    shared_region own_at;
    if constexpr (!has_peer_memory_v<Transport>) {  // peers read this rank's part where it lies: a shared buffer, or its stage
      const block mine = part(r);
      own_at = region_of<Transport>(own, mine.size * es);
      if (own_at || reads_memory(t)) {
        skip_stage(count * es, c);
      } else {
        open_stage(t, count * es, c);
        streamable_copy(c, shared_stage_ + mine.offset * es, own, mine.size * es);
      }
    }
    share_addresses(t, own, out, "direct all-gather", c, own_at);
    for (int k = 0; k < n; ++k) {
      const int p = (r + k) % n;
      const block b = part(p);
      const std::byte* from = peers_[static_cast<std::size_t>(p)].in;  // its part where it lies, or its stage
      if (k > 0 && !reads_in_place<Transport>(p) && !remote(t, static_cast<std::size_t>(p))) from += b.offset * es;
      copy_from(t, p, out + b.offset * es, from, b.size * es, c);
    }
    end_of_phase(t, c, tag_offset::call_done, "direct all-gather: peers reading");
  }

  /// The direct all-gather through the stages, `per` elements of every
  /// rank's block at a time (`stage_segment`): each segment its own stage
  /// copy, address exchange and end of phase.
  template <class Transport>
  void all_gather_segments(Transport& t, const std::byte* own, std::byte* out, std::size_t count, std::size_t per,
                           const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    const auto length = [&](const block& b, std::size_t from) { return b.size > from ? std::min(per, b.size - from) : 0; };
    for (std::size_t from = 0; from < block_of(count, n, 0).size; from += per) {
      open_stage(t, per * es, c);
      streamable_copy(c, shared_stage_, own + from * es, length(block_of(count, n, r), from) * es);
      share_addresses(t, own, out, "direct all-gather: addresses", c);  // the peers' `in`: their stages
      for (int k = 0; k < n; ++k) {
        const int p = (r + k) % n;
        const block b = block_of(count, n, p);
        const std::byte* src = k == 0 ? own + from * es : peers_[static_cast<std::size_t>(p)].in;
        gathered_copy<Transport>(c, out + (b.offset + from) * es, src, length(b, from) * es);
      }
      end_of_phase(t, c, tag_offset::call_done, "direct all-gather: peers reading");
    }
  }
};

}  // namespace detail
}  // namespace ddl
