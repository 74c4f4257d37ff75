#pragma once
/// \file
/// Message-free meetings of ranks that share stages (`direct_meetings`):
/// each rank writes a slot of its stage, raises its counter and waits for
/// its peers' counters, checking their calls' stamps against its own, so a
/// mismatch is still a `mismatch_error` naming both ranks. One-way forms
/// serve gathers and scatters.
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
#include "ddl/strategy/direct/peers.hpp"
#include "ddl/transport/stamp.hpp"

namespace ddl {
namespace detail {

/// Meetings through the stages' counters, without a message.
class direct_meetings : public direct_peers {
 protected:
  /// Over stages a transport can wait on (`wait_until`), for calls of at
  /// most `flagged_limit` bytes: one synchronisation without a message
  /// (`flagged_meet`), `src` copied into this rank's slot with streaming
  /// stores when asked (`streamable_copy`: the peers read the slot next).
  /// Afterwards `sources_[p]` is rank p's slot (this rank's own too).
  template <class Transport>
  void flagged_round(Transport& t, const std::byte* src, std::size_t bytes, std::uint64_t call_bytes,
                     const call_context& c) {
    const auto n = static_cast<std::size_t>(t.size());
    if (sources_.size() != n) sources_.assign(n, nullptr);
    flagged_meet_filled(
        t, [&](std::byte* own) { if (bytes > 0) streamable_copy(c, own, src, bytes); }, call_bytes, c,
        [this](int p, const std::byte* slot) { sources_[static_cast<std::size_t>(p)] = slot; });
  }

  /// One synchronisation through the stages' counters, no message. Rank r's
  /// k-th such meeting copies `bytes` (at most `flagged_limit`) of `src`
  /// into slot k % 2 of its stage, writes the call's stamp (its bytes
  /// `call_bytes`, its tag) beside it and raises its counter to k; it then
  /// waits for each peer's counter to reach k and checks the peer's stamp
  /// against its own (`mismatch_error` naming the field and both ranks).
  /// `slot(p, at)` is told where rank p's slot lies (this rank's first). A
  /// rank writes slot k % 2 again in meeting k + 2 only once every peer
  /// raised its counter to k + 1, so after each had finished reading
  /// meeting k (`flagged_meet_filled` waits for that where meeting k + 1
  /// did not).
  template <class Transport, class Slot>
  static void flagged_meet(Transport& t, const std::byte* src, std::size_t bytes, std::uint64_t call_bytes,
                           const call_context& c, Slot&& slot) {
    flagged_meet_filled(
        t, [&](std::byte* own) { if (bytes > 0) local_copy(c, own, src, bytes); }, call_bytes, c,
        std::forward<Slot>(slot));
  }
  /// As `flagged_meet`, with `fill(own)` writing this rank's slot (at most
  /// `flagged_limit` bytes). `watch` says whose counters the meeting waits
  /// for (and whose slots `slot` is told of): every peer (-1), none (this
  /// rank: it leaves once its slot is written), or that rank alone -- the
  /// one-way meetings of a gather (the root watches everyone, the others
  /// no one) and a scatter (the others watch the root). Whatever the last
  /// meeting watched, a rank writes slot k % 2 only once every peer has
  /// raised its counter to k - 1 (left meeting k - 2, whose slot it may have
  /// read): after a meeting that watched everyone that holds already.
  template <class Transport, class Fill, class Slot>
  static void flagged_meet_filled(Transport& t, Fill&& fill, std::uint64_t call_bytes, const call_context& c,
                                  Slot&& slot, int watch = -1) {
    const int n = t.size(), r = t.rank();
    require_host(c);
    std::byte* mine = t.stage(stage_prefix);
    auto* counter = reinterpret_cast<std::uint64_t*>(mine);
    const std::uint64_t k = __atomic_load_n(counter, __ATOMIC_RELAXED) + 1;
    const std::size_t s = k % 2;
    const deadline until = phase_deadline(c);
    auto counter_of = [&](int p) { return reinterpret_cast<const std::uint64_t*>(t.peer_stage(p, stage_header)); };
    for (int d = 1; d < n && k > 1; ++d) {
      const int p = (r + d) % n;
      const auto* theirs = counter_of(p);
      if (__atomic_load_n(theirs, __ATOMIC_ACQUIRE) + 1 < k)
        wait_on_peer(t, p, [theirs, k] { return __atomic_load_n(theirs, __ATOMIC_ACQUIRE) + 1 >= k; }, until, c,
                     phase_name{"peers' stages (reading the last meeting)", 0, 1});
    }
    const std::uint64_t stamp[2] = {call_bytes, c.base_tag};
    std::memcpy(mine + 64 * (s + 1), stamp, sizeof stamp);
    std::byte* own = mine + stage_header + s * flagged_limit;
    fill(own);
    __atomic_store_n(counter, k, __ATOMIC_RELEASE);
    raised(t);
    slot(r, own);
    for (int d = 1; d < n; ++d) {
      const int p = (r + d) % n;
      if (watch >= 0 && p != watch) continue;
      const auto* theirs = counter_of(p);
      wait_on_peer(t, p, [theirs, k] { return __atomic_load_n(theirs, __ATOMIC_ACQUIRE) >= k; }, until, c,
                   phase_name{"peers' stages", 0, 1});
      const std::byte* at = t.peer_stage(p, stage_prefix);  // grown that far before it raised its counter
      std::uint64_t their[2];
      std::memcpy(their, at + 64 * (s + 1), sizeof their);
      check_stamp(r, stamp, p, their, size_of(c.red.type), c);
      slot(p, at + stage_header + s * flagged_limit);
    }
  }

  /// Tells `t` this rank raised a counter its peers may wait on
  /// (`stage_raised`, where the transport has it).
  template <class Transport>
  static void raised(Transport& t) {
    if constexpr (has_stage_raised_v<Transport>) t.stage_raised();
    else (void)t;
  }

  /// `t.wait_until(p, ready, ...)` in phase `ph` (`in_phase`).
  template <class Transport, class Ready>
  static void wait_on_peer(Transport& t, int p, Ready&& ready, deadline until, const call_context& c,
                           const phase_name& ph) {
    in_phase(c, ph, [&] { t.wait_until(p, std::forward<Ready>(ready), until, c.base_tag); });
  }

  // A flagged call's stamps, this rank's (`me`) against peer `p`'s: the
  // same tag (collective, dtype, op, a hash of the count, root and strategy,
  // the call's number) and the same bytes, else `mismatch_error` naming the
  // field (as the messages' stamps do) and both ranks.
  static void check_stamp(int me, const std::uint64_t (&mine)[2], int p, const std::uint64_t (&theirs)[2],
                          std::size_t esize, const call_context& c) {
    const bool same_call = detail::call_of(mine[1]) == detail::call_of(theirs[1]);
    const unsigned differ = detail::stamp_of(mine[1]) ^ detail::stamp_of(theirs[1]);
    const bool fields_differ = (differ & detail::stamp_fields_mask) != 0;
    std::string why;
    if (same_call && fields_differ)  // the collective, dtype or op
      why = detail::stamp_mismatch(me, mine[1], p, theirs[1]);
    else if (theirs[0] != mine[0])
      why = std::string(detail::mismatch_words) + detail::describe_tag(mine[1]) +
            ": ranks disagree on the input count: rank " + std::to_string(me) + " passed " +
            std::to_string(mine[0] / esize) + ", rank " + std::to_string(p) + " passed " +
            std::to_string(theirs[0] / esize);
    else if (detail::stamps_disagree(mine[1], theirs[1]))
      why = detail::stamp_mismatch(me, mine[1], p, theirs[1]);
    else if (theirs[1] != mine[1])
      why = std::string(detail::mismatch_words) + "rank " + std::to_string(me) + " is in " +
            detail::describe_tag(mine[1]) + ", rank " + std::to_string(p) + " in " + detail::describe_tag(theirs[1]) +
            " (communicators sharing a transport called in different orders?)";
    if (!why.empty()) throw mismatch_error(std::string(c.strategy) + ": " + why);
  }

};

}  // namespace detail
}  // namespace ddl
