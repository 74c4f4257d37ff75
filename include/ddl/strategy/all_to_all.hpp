#pragma once
/// \file
/// All-to-all over any transport: rank r's part k goes to rank k, where it
/// lands as part r of the output (MPI's `MPI_Alltoall` and, with parts of any
/// size, `MPI_Alltoallv`; PyTorch's `all_to_all_single`: the exchange of
/// expert parallelism). It reduces nothing, so every strategy shares it.
///
/// Pairwise exchange: a rank copies its own part locally and trades one
/// message with every peer, in rounds of at most 16 peers (round k: send to
/// r + d, receive from r - d; `detail::exchange_parts`). For S bytes per
/// rank in equal parts over n ranks, per-step latency a and per-flow
/// bandwidth B:
///     t = ceil((n - 1) / 16) a + (n - 1) S / (n B)
/// -- every byte that leaves a rank crosses one link once, the least any
/// all-to-all moves, so nothing is gained by trees or rings (those trade
/// latency for bytes and suit only tiny parts at many ranks). In place, the
/// ranks trade parts in pairs through a part-sized copy
/// (`pairwise_all_to_all_in_place`): n rounds of one exchange each. Ranks
/// that share stages (threads, MPI ranks of one machine) take even calls of
/// up to 128 KiB a rank (2 ranks) or 256 KiB (more) through them instead,
/// a meeting per 64 KiB and no message (`direct_base::all_to_all`);
/// `all_to_all_choice` picks.
#include <cstddef>
#include <numeric>
#include <vector>

#include "ddl/strategy/step.hpp"

namespace ddl {

/// How an all-to-all runs (`all_to_all_choice`); every rank of a call takes
/// the same (the even form's sizes are the same everywhere, and so must its
/// placement be).
enum class all_to_all_schedule {
  flagged,   ///< through the stages, a meeting per 64 KiB, no message
  paired,    ///< in place: parts traded in pairs through a part-sized copy, n rounds
  exchange,  ///< one message to and from every peer (in place: the input set aside first)
};

/// An even all-to-all in host memory between ranks that share stages goes
/// through them up to 128 KiB a rank at 2 ranks and 256 KiB at more (the
/// stages' two copies and a meeting per 64 KiB beat the messages' single
/// copy there); an even one in
/// place of at least `all_to_all_paired_bytes` trades its parts in pairs;
/// the rest, and the form with counts, exchange with every peer at once.
inline constexpr std::size_t all_to_all_paired_bytes = std::size_t{256} << 10;
inline constexpr std::size_t all_to_all_flagged_bytes(int ranks) noexcept {
  return (ranks == 2 ? std::size_t{128} : std::size_t{256}) << 10;
}
inline all_to_all_schedule all_to_all_choice(std::size_t bytes, bool in_place, bool even, int ranks,
                                             bool shares_stages) noexcept {
  if (!even) return all_to_all_schedule::exchange;
  if (shares_stages && ranks > 1 && bytes <= all_to_all_flagged_bytes(ranks)) return all_to_all_schedule::flagged;
  return in_place && bytes >= all_to_all_paired_bytes ? all_to_all_schedule::paired : all_to_all_schedule::exchange;
}

}  // namespace ddl

namespace ddl::detail {

/// Where each part of a buffer cut into parts of `counts` elements starts
/// (in elements): the running sum, `counts.size() + 1` entries.
inline std::vector<std::size_t> part_offsets(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> at(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), at.begin() + 1);
  return at;
}

/// `in` in parts of `send_counts[k]` elements of `elem` bytes, part k for
/// rank k; `out` receives `recv_counts[j]` elements from rank j, in rank
/// order. `in` and `out` do not overlap.
template <class Transport>
void pairwise_all_to_all(Transport& t, const std::byte* in, const std::vector<std::size_t>& send_counts, std::byte* out,
                         const std::vector<std::size_t>& recv_counts, std::size_t elem, const call_context& c, tag tg) {
  const std::vector<std::size_t> from = part_offsets(send_counts), to = part_offsets(recv_counts);
  const auto r = static_cast<std::size_t>(t.rank());
  local_copy(c, out + to[r] * elem, in + from[r] * elem, send_counts[r] * elem);
  exchange_parts(
      t,
      [&](int p) {
        const auto k = static_cast<std::size_t>(p);
        return const_bytes{in + from[k] * elem, send_counts[k] * elem};
      },
      [&](int p) {
        const auto k = static_cast<std::size_t>(p);
        return mutable_bytes{out + to[k] * elem, recv_counts[k] * elem};
      },
      c, tg, "pairwise all-to-all");
}

/// In place, with every part where the answer for it lands (`counts` the
/// same both ways, as in the even form): the ranks meet in pairs, round d
/// pairing r with (d - r) mod n (every pair meets once in n rounds; a rank
/// paired with itself sits the round out), and each copies its part for the
/// partner into `temp` (as long as the longest part) and trades it for the
/// partner's part for it. (n - 1) S / n bytes copied once more, where
/// copying the input aside first would copy S and then the own part again.
template <class Transport>
void pairwise_all_to_all_in_place(Transport& t, std::byte* data, const std::vector<std::size_t>& counts,
                                  std::byte* temp, std::size_t elem, const call_context& c, tag tg) {
  const std::vector<std::size_t> at = part_offsets(counts);
  const int n = t.size(), r = t.rank();
  for (int d = 0; d < n; ++d) {
    const int p = ((d - r) % n + n) % n;
    if (p == r) continue;
    const auto k = static_cast<std::size_t>(p);
    std::byte* part = data + at[k] * elem;
    local_copy(c, temp, part, counts[k] * elem);
    steps::send_recv(t, p, temp, p, part, counts[k] * elem, c, tg, {"pairwise all-to-all in place", d, n});
  }
}

}  // namespace ddl::detail
