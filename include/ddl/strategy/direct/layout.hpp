#pragma once
/// \file
/// The direct strategies' stage layout and sizes (`direct_layout`): what
/// lies where in a rank's stage, how far a message-free call goes, the
/// segments large calls take, and the checks that a transport's ranks can
/// reach each other's memory at all.
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
#include "ddl/strategy/step.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {

/// Where the direct strategies meet: the layout of a rank's stage, the
/// sizes their calls are cut by, and the checks that they can run at all.
class direct_layout {
 public:
  /// How a stage is laid out (over `peer_stage`): first `stage_header`
  /// bytes of counters and stamps, a cache line each: the flagged calls'
  /// counter and the stamps of their two slots (lines 0-2), the broadcast
  /// ring's `ring_pub_at` and `ring_done_at` (lines 3, 4), `ring_seen_at`
  /// (line 5, read by this rank alone) and its entries' stamps (from
  /// `ring_stamps_at`, `ring_stamp` bytes each: 24 of stamp, then up to
  /// `ring_inline` bytes of the entry's data); then the flagged calls' two
  /// slots of `flagged_limit` bytes, then the ring's `ring_entries` entries of
  /// `ring_entry` bytes (at `ring_at`), then from `stage_prefix` on the data
  /// of the calls synchronised by messages. Slots and entries are read by
  /// peers that may still be in a call when this rank has left it, so
  /// nothing else is written there.
  static constexpr std::size_t stage_header = 4096;
  static constexpr std::size_t flagged_limit = std::size_t{64} << 10;
  /// A broadcast of at most `ring_limit` bytes goes through the root's ring
  /// of `ring_entries` entries (`ring_broadcast`): the root writes and goes
  /// on, up to `ring_entries` entries ahead of its slowest reader; entries of
  /// at most `ring_inline` bytes ride in the stamp's own cache lines. The
  /// ring beats one meeting of all ranks a call back to back and is level
  /// between barriers; it loses past `ring_limit`; 28 entries (as many
  /// stamps as the header holds) let the root run further ahead of readers
  /// waiting to be scheduled.
  static constexpr std::size_t ring_entries = 28;
  static constexpr std::size_t ring_entry = std::size_t{4} << 10;
  static constexpr std::size_t ring_limit = 4 * ring_entry;
  static constexpr std::size_t ring_pub_at = 64 * 3, ring_done_at = 64 * 4, ring_seen_at = 64 * 5;
  static constexpr std::size_t ring_stamps_at = 64 * 8, ring_stamp = 128, ring_inline = ring_stamp - 24;
  static constexpr std::size_t ring_at = stage_header + 2 * flagged_limit;
  static constexpr std::size_t stage_prefix = ring_at + ring_entries * ring_entry;
  static_assert(ring_stamps_at + ring_stamp * ring_entries <= stage_header, "ddl: the ring's stamps fit in the header");
  /// Over stages (real memory: not the simulator's, whose reads cross
  /// links), a two_shot whose inputs are not all shared buffers, and an
  /// all-gather whose parts are not, go through the stages in segments of at
  /// most this many bytes per part, one after another, each a call of its
  /// own: the stage stays in cache, so its copies cost cache traffic, not
  /// memory's; 1 MiB was the best of the segment sizes tried.
  static constexpr std::size_t stage_segment = std::size_t{1} << 20;
  /// Over `read_peer`: bytes of each peer's part read at a time for a
  /// reduction (into `pieces_`, a buffer that stays in cache; 64 KiB and
  /// 1 MiB ran 5-15% slower than 256 KiB at 2 ranks).
  static constexpr std::size_t read_piece = std::size_t{256} << 10;
  /// What a plan's or strategy's name gains when it reads its peers
  /// (`describe`: `two_shot (read_peer)`).
  static constexpr const char* reading_suffix = " (read_peer)";
  /// What a plan's or strategy's name gains when it writes its stage with
  /// streaming stores (`two_shot (streamed)`).
  static constexpr const char* streaming_suffix = " (streamed)";
  /// Over stages, a streamed call (`streams_`) out of place streams what it
  /// gathers into its result too from this many bytes of result
  /// (`gathered_copy`).
  static constexpr std::size_t stream_result_from = std::size_t{8} << 20;
  template <class Transport>
  static constexpr bool stages_in_segments_v =
      !has_peer_memory_v<Transport> && !direct_reads_over_links_v<Transport>;
  /// Elements of `es` bytes in one segment.
  static constexpr std::size_t segment_elements(std::size_t es) noexcept {
    return stage_segment / es > 0 ? stage_segment / es : 1;
  }

 protected:
  template <class Transport>
  static constexpr void require_peer_access() {
    static_assert(reaches_peers_v<Transport>,
                  "ddl: one_shot and two_shot read their peers' buffers in place and need a transport whose ranks "
                  "share memory ('static constexpr bool peer_memory = true', e.g. ddl::local_transport) or "
                  "stages ('peer_stage', e.g. ddl::mpi_transport); over other transports use ring, multi_ring "
                  "or auto");
  }

  static void require_host(const call_context& c) {
    if (std::strcmp(c.mem->name, "host") != 0)
      throw invalid_argument(std::string(c.strategy) + ": stages hold host memory only (buffers in " + c.mem->name +
                             " memory); use ring or auto");
  }
};

}  // namespace detail
}  // namespace ddl
