#pragma once
/// \file
/// `ddl::two_shot`: a direct reduce-scatter, then a direct all-gather
/// (strategy/direct.hpp has the model).
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

namespace ddl {

/// Whether two_shot over `T` writes each reduced block into every rank's
/// result itself (`two_shot`, "pushed"): ranks of one process that reduce
/// on the host (`peer_memory` without a two_shot of the transport's own on
/// a device, `flagged_two_shot`: threads); the call's memory must be the
/// host's too.
template <class T>
inline constexpr bool two_shot_pushes_v = has_peer_memory_v<T> && !has_flagged_two_shot_v<T>;

/// Two-shot all-reduce: a direct reduce-scatter (each rank reduces its block
/// from all n inputs at once), then a direct all-gather of the reduced
/// blocks. For large messages on ranks that share memory; in place needs no
/// workspace. Over threads (`two_shot_pushes_v`, host memory) the reducer
/// of a block writes it into every rank's result, `push_piece` bytes at a
/// time as it reduces them (only the block's reducer reads or writes block
/// r of any buffer during the call, so in place too), and one
/// synchronisation ends the call where pulling the blocks took one more
/// between the phases and a second pass over the reduced block.
struct two_shot : detail::direct_base {
  static constexpr const char* name = "two_shot";  ///< its name in plans and errors
  /// Its name and form (reading the peers, streamed stages).
  std::string describe() const {
    return std::string(name) + (reads_ ? reading_suffix : streams_ ? streaming_suffix : "");
  }
  /// Over stages whose ranks copy from each other's memory (`read_peer`,
  /// `memory_readable`: MPI ranks of one machine that the kernel lets
  /// attach to each other), read the peers' plain buffers where they lie,
  /// whole, instead of through the stages in segments; elsewhere nothing
  /// changes. Off by default: on this project's 2-core VM it won at 2 ranks
  /// and 2-16 MiB and lost at 4 and 8 ranks and at 128 MiB; `auto` measures
  /// both (`plan::reads`). Covers the direct reduce-scatter and all-gather too.
  two_shot& reading_peers(bool on = true) noexcept {
    reads_ = on;
    return *this;
  }
  /// Over stages (`peer_stage`, host memory), write them with streaming
  /// stores (`memory_ops::stream_copy`): the copies in go to memory, and the
  /// peers read them from there, not from this core's cache. Where the
  /// ranks' cores lie far apart (a VM's vCPUs placed apart by the host) a
  /// cached write waits to take each line back from the peer that read it,
  /// and streamed stages win; close, streamed ones lose. The blocks
  /// a rank gathers from its peers into its result are streamed too, over
  /// stages from `stream_result_from` bytes of result (`gathered_copy`: a
  /// write that need not first read the line); over threads (no stages) the
  /// blocks it writes into its peers' results (`all_reduce_pushed`), at any
  /// size (when threads pulled the blocks instead, streamed won at the
  /// largest sizes and lost at a few MiB). Off by
  /// default; `auto` measures both (`plan::streams`). Covers the direct
  /// all-gather too, and the reduce-scatter over stages, and the slot a call
  /// of up to `flagged_limit` bytes writes (`flagged_round`); nothing changes
  /// when reading the peers (`reading_peers`).
  two_shot& streaming_stages(bool on = true) noexcept {
    streams_ = on;
    return *this;
  }
  /// Workspace its all-reduce needs: none.
  static std::size_t all_reduce_workspace(std::size_t, dtype, int) { return 0; }

  /// `out` = the reduction of every rank's `in` (`count` elements; in place when equal).
  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    if (t.size() == 1) {
      local_copy(c, out, in, count * size_of(c.red.type));
      local_finalize(c, out, count, 1);
    } else if constexpr (detail::device_peers_only_v<Transport>) {
      all_reduce_device(t, in, out, count, c);
    } else {
      all_reduce_shared(t, in, out, count, c);
    }
  }

 private:
  template <class Transport>
  void all_reduce_shared(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    const std::size_t es = size_of(c.red.type);
    stream_result(in, count * es, out, count * es);
    if constexpr (has_flagged_two_shot_v<Transport>) {  // the transport's own counters (CUDA: device memory)
      if (t.size() > 1 && count > 0 && t.flagged_ready()) {
        t.flagged_two_shot(in, out, count, c.red, c.base_tag,
                           std::chrono::duration_cast<std::chrono::nanoseconds>(c.opts->timeout));
        return;
      }
    }
    if constexpr (stages_in_segments_v<Transport>) {
      const std::size_t per = segment_elements(es);
      if (t.size() > 1 && count > per && !reads_memory(t) &&
          !every_rank_shared(t, in, count * es, c, "two-shot: shared buffers")) {
        for (std::size_t off = 0; off < count; off += per)
          all_reduce_whole(t, in + off * es, out + off * es, std::min(per, count - off), c);
        return;
      }
    }
    all_reduce_whole(t, in, out, count, c);
  }

  /// Over processes that map each other's device memory (`device_peers`):
  /// each rank says where its input and result lie (`share_device`; a
  /// buffer the peers cannot map is copied into scratch they can, and a
  /// result they cannot map is reduced there first), reduces its block from
  /// every rank's input where it lies, and copies the other blocks from
  /// their reducers' results: device passes on the caller's stream, the
  /// three meetings messages the transport sends once the stream has done
  /// what came before them (`staged/near.hpp`).
  template <class Transport>
  void all_reduce_device(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                         const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type), bytes = count * es;
    const block mine = block_of(count, n, r);
    require_device_buffers(c);
    held_scratch<Transport> held{t, {}};
    std::vector<device_places> all(static_cast<std::size_t>(n));
    device_places& own = all[static_cast<std::size_t>(r)];
    own.bytes = bytes;
    const std::byte* src = shared_copy(t, in, bytes, own.in, held, c);
    std::byte* reduced = out;  // where the peers read this rank's block
    if (!t.share_device(out, bytes, own.out)) {
      // In place, the input's copy holds block r for nobody else: reduce it there.
      reduced = in == out && src != in ? const_cast<std::byte*>(src) : held.take(bytes);
      share_scratch(t, reduced, bytes, own.out);
    }
    trade_places(t, all, c, "two-shot: device addresses");
    sources_.assign(static_cast<std::size_t>(n), nullptr);
    std::vector<const std::byte*> results(static_cast<std::size_t>(n));
    for (int p = 0; p < n; ++p) {
      const auto q = static_cast<std::size_t>(p);
      sources_[q] = place_of(t, p, all[q].in, src) + mine.offset * es;
      results[q] = place_of(t, p, all[q].out, reduced);
    }
    // Only rank r reads or writes block r of any buffer until the phase ends.
    c.mem->reduce_many(c.mem->ctx, reduced + mine.offset * es, sources_.data(), n, mine.size, c.red);
    local_finalize(c, reduced + mine.offset * es, mine.size, n);
    end_of_phase(t, c, tag_offset::reduced, "two-shot: reduce phase");
    for (int k = 0; k < n; ++k) {
      const int p = (r + k) % n;
      const block b = block_of(count, n, p);
      if (p != r || reduced != out)
        local_copy(c, out + b.offset * es, results[static_cast<std::size_t>(p)] + b.offset * es, b.size * es);
    }
    end_of_phase(t, c, tag_offset::call_done, "two-shot: peers reading");
  }

  template <class Transport>
  void all_reduce_whole(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    if (n == 1) {
      local_copy(c, out, in, count * es);
      return;
    }
    const block mine = block_of(count, n, r);
    // Over stages, peers read `in` (phase one) and `out` (phase two) where
    // they lie when they lie in a shared buffer, else copies in the stage.
    detail::shared_region in_at, out_at;
    if constexpr (!has_peer_memory_v<Transport>) {
      in_at = region_of<Transport>(in, count * es);
      out_at = region_of<Transport>(out, count * es);
      if (reads_memory(t)) skip_stage(count * es, c);  // peers read `in` and `out` where they lie
      else if (!in_at) stage_input(t, in, count, mine, c);
      else if (!out_at) open_stage(t, count * es, c);
      else skip_stage(count * es, c);
    }
    share_addresses(t, in, out, "two-shot: addresses", c, in_at, out_at);
    if constexpr (two_shot_pushes_v<Transport>) {
      if (std::strcmp(c.mem->name, "host") == 0) {
        all_reduce_pushed(t, out, mine, c);
        return;
      }
    }
    // Only rank r reads block r of any buffer until the phase ends, so the
    // result may overwrite block r of an in-place buffer.
    reduce_block_reading(t, mine, out + mine.offset * es, c);
    local_finalize(c, out + mine.offset * es, mine.size, n);
    if (!has_peer_memory_v<Transport> && !out_at && staged_)  // where the peers gather it from
      streamable_copy(c, shared_stage_ + mine.offset * es, out + mine.offset * es, mine.size * es);
    end_of_phase(t, c, tag_offset::reduced, "two-shot: reduce phase");
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      const block b = block_of(count, n, p);
      copy_from(t, p, out + b.offset * es, peers_[static_cast<std::size_t>(p)].out + b.offset * es, b.size * es, c,
                true);
    }
    end_of_phase(t, c, tag_offset::call_done, "two-shot: peers reading");
  }

  /// Over threads (`two_shot_pushes_v`), after the address exchange: block
  /// `mine` reduced from every rank's input `push_piece` bytes at a time,
  /// each piece written into this rank's result and then into every peer's
  /// (streamed with `streaming_stages`), while still in cache. Only this
  /// rank reads or writes block `mine` of any buffer until the phase ends,
  /// and a piece is read from every input before it is written anywhere.
  template <class Transport>
  void all_reduce_pushed(Transport& t, std::byte* out, const block& mine, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type), per = std::max<std::size_t>(push_piece / es, 1);
    for (std::size_t off = 0; off < mine.size; off += per) {
      const block b{mine.offset + off, std::min(per, mine.size - off)};
      std::byte* piece = out + b.offset * es;
      reduce_block_reading(t, b, piece, c);
      local_finalize(c, piece, b.size, n);
      for (int k = 1; k < n; ++k) {
        const int p = (r + k) % n;
        std::byte* theirs = const_cast<std::byte*>(peers_[static_cast<std::size_t>(p)].out);  // peer memory: writable
        streamable_copy(c, theirs + b.offset * es, piece, b.size * es);
      }
    }
    end_of_phase(t, c, tag_offset::call_done, "two-shot: peers writing");
  }
  static constexpr std::size_t push_piece = std::size_t{64} << 10;
};

}  // namespace ddl
