#pragma once
/// \file
/// The direct collectives over processes that map each other's device
/// memory and nothing else (`device_peers` in `transport/peer_access.hpp`:
/// `staged_transport`'s near ranks, CUDA IPC): `direct_device`, whose
/// reduce-scatter and all-gather `one_shot` and `two_shot` run there, and
/// the pieces their all-reduces share. Every pass is a device pass on the
/// caller's stream; every meeting is one of the transport's notes, which go
/// out only once the stream has done the work queued before them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ddl/core/device_region.hpp"
#include "ddl/core/error.hpp"
#include "ddl/strategy/direct/stage_collectives.hpp"
#include "ddl/transport/peer_access.hpp"

namespace ddl {
namespace detail {

/// True when `T`'s ranks map each other's device memory and reach no other
/// memory of their peers (no `peer_memory`, no stages): the direct
/// strategies take their device forms (`direct_device`).
template <class T>
inline constexpr bool device_peers_only_v = has_device_peers_v<T> && !reaches_peers_v<T>;

/// The direct collectives over device peers (`device_peers_only_v`).
class direct_device : public direct_stage_collectives {
 protected:
  /// Scratch a call took (`take_scratch`), given back however the call ends:
  /// after its last meeting the peers are done reading it, or gave up.
  template <class Transport>
  struct held_scratch {
    Transport& t;
    std::vector<const std::byte*> blocks;
    std::byte* take(std::size_t bytes) {
      std::byte* p = t.take_scratch(bytes);
      blocks.push_back(p);
      return p;
    }
    ~held_scratch() {
      for (const std::byte* p : blocks) t.give_scratch(p);
    }
  };

  /// Where a rank's buffers lie for its peers, traded in one meeting, and
  /// the call's bytes (checked alike on every rank).
  struct device_places {
    device_region in, out;
    std::uint64_t bytes = 0;
  };

  /// Every pair of ranks must map each other's device memory.
  template <class Transport>
  static void validate_device(const Transport& t, const char* strategy) {
    if (!t.device_peers())
      throw invalid_argument(std::string(strategy) +
                             " over processes reads its peers' device memory, and these ranks do not all map each "
                             "other's (CUDA IPC maps the devices of one host; DDL_CUDA_IPC=0 turns it off); use ring, "
                             "multi_ring or auto");
  }
  /// Device buffers only: host buffers go over the host transport.
  static void require_device_buffers(const call_context& c) {
    if (std::strcmp(c.mem->name, "host") == 0)
      throw invalid_argument(std::string(c.strategy) +
                             " over processes that map each other's device memory: device buffers only (host "
                             "buffers: over the host transport)");
  }

  /// `bytes` at `p` where the peers can map them: `p` itself (`at` says
  /// where it lies), or a copy in scratch they can (memory such as a
  /// `cudaMallocAsync` pool's). Nothing to share for 0 bytes.
  template <class Transport>
  static const std::byte* shared_copy(Transport& t, const std::byte* p, std::size_t bytes, device_region& at,
                                      held_scratch<Transport>& held, const call_context& c) {
    if (bytes == 0 || t.share_device(p, bytes, at)) return p;
    std::byte* s = held.take(bytes);
    local_copy(c, s, p, bytes);
    share_scratch(t, s, bytes, at);
    return s;
  }
  /// Scratch the peers read (`take_scratch`), said where it lies in `at`.
  template <class Transport>
  static void share_scratch(Transport& t, const std::byte* s, std::size_t bytes, device_region& at) {
    if (!t.share_device(s, bytes, at)) throw transport_error("the peers cannot map scratch memory");
  }

  /// Every rank's `device_places` (this rank's filled in by the caller),
  /// traded in one meeting; a rank whose call has other bytes is a
  /// `mismatch_error` naming both (a backstop: the call's stamps, which
  /// name the ranks as the job numbers them, catch a mismatch first).
  template <class Transport>
  static void trade_places(Transport& t, std::vector<device_places>& all, const call_context& c, const char* what) {
    exchange_with_all(t, reinterpret_cast<std::byte*>(all.data()), sizeof(device_places), c,
                      c.base_tag + tag_offset::addresses, what);
    const int r = t.rank();
    const std::uint64_t bytes = all[static_cast<std::size_t>(r)].bytes;
    for (int p = 0; p < t.size(); ++p)
      if (all[static_cast<std::size_t>(p)].bytes != bytes)
        throw mismatch_error(std::string(c.strategy) + ": rank " + std::to_string(p) + " called with " +
                             std::to_string(all[static_cast<std::size_t>(p)].bytes) + " bytes and rank " +
                             std::to_string(r) + " with " + std::to_string(bytes) + " (count or dtype)");
  }

  /// This rank's `in_bytes` at `in` shared (`shared_copy`) and every
  /// rank's places traded (`trade_places`, `call_bytes` the call's bytes):
  /// `all` filled in, and where this rank's input lies for the peers returned.
  template <class Transport>
  static const std::byte* trade_input(Transport& t, const std::byte* in, std::size_t in_bytes,
                                      std::uint64_t call_bytes, held_scratch<Transport>& held,
                                      std::vector<device_places>& all, const call_context& c, const char* what) {
    all.assign(static_cast<std::size_t>(t.size()), device_places{});
    device_places& own = all[static_cast<std::size_t>(t.rank())];
    own.bytes = call_bytes;
    const std::byte* src = shared_copy(t, in, in_bytes, own.in, held, c);
    trade_places(t, all, c, what);
    return src;
  }

  /// Rank `p`'s region `at` mapped here, or this rank's own `mine`.
  template <class Transport>
  static const std::byte* place_of(Transport& t, int p, const device_region& at, const std::byte* mine) {
    return p == t.rank() ? mine : t.peer_device(p, at);
  }

  /// The direct reduce-scatter over device peers, over any partition of
  /// `count` elements into one contiguous part per rank (`part(j)`, as
  /// `direct_base::reduce_scatter_parts`): `own` = part `part(rank)` of the
  /// reduction, one `reduce_many` reading that part of every rank's `in`
  /// where it lies; not finalised. Two meetings (the places; the peers done
  /// reading); (n + 1) S / n bytes of device memory traffic per rank.
  template <class Transport, class Part>
  void reduce_scatter_device(Transport& t, const Part& part, const std::byte* in, std::byte* own, std::size_t count,
                             const call_context& c) {
    require_device_buffers(c);
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type), bytes = count * es;
    const block mine = part(r);
    held_scratch<Transport> held{t, {}};
    std::vector<device_places> all;
    const std::byte* src = trade_input(t, in, bytes, bytes, held, all, c, "direct reduce-scatter: device addresses");
    sources_.assign(static_cast<std::size_t>(n), nullptr);
    for (int p = 0; p < n; ++p) {
      const auto q = static_cast<std::size_t>(p);
      sources_[q] = place_of(t, p, all[q].in, src) + mine.offset * es;
    }
    // In place `own` is part r of `in`, which only this rank reads.
    if (mine.size > 0) c.mem->reduce_many(c.mem->ctx, own, sources_.data(), n, mine.size, c.red);
    end_of_phase(t, c, tag_offset::call_done, "direct reduce-scatter: peers reading");
  }

  /// The direct all-gather over device peers, over any partition
  /// (`reduce_scatter_device`): `out` = every rank's part, copied from where
  /// it holds it (`own`). Two meetings; (n - 1) S / n bytes read and as
  /// many written per rank.
  template <class Transport, class Part>
  void all_gather_device(Transport& t, const Part& part, const std::byte* own, std::byte* out, std::size_t count,
                         const call_context& c) {
    require_device_buffers(c);
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    held_scratch<Transport> held{t, {}};
    std::vector<device_places> all;
    trade_input(t, own, part(r).size * es, count * es, held, all, c, "direct all-gather: device addresses");
    for (int k = 0; k < n; ++k) {
      const int p = (r + k) % n;
      const block b = part(p);
      std::byte* to = out + b.offset * es;
      if (b.size == 0 || (p == r && to == own)) continue;  // nothing to copy; in place
      local_copy(c, to, place_of(t, p, all[static_cast<std::size_t>(p)].in, own), b.size * es);
    }
    end_of_phase(t, c, tag_offset::call_done, "direct all-gather: peers reading");
  }
};

}  // namespace detail
}  // namespace ddl
