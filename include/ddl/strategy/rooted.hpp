#pragma once
/// \file
/// Gather and scatter over any transport (MPI's `MPI_Gather` and
/// `MPI_Scatter`; PyTorch's `gather` and `scatter`): rank r's part lands as
/// part r of the root's buffer, or part r of the root's buffer lands in rank
/// r's. They reduce nothing, so every strategy shares them; a reduce to a
/// root gathers its reduced blocks so (`communicator::reduce_on`).
///
/// Linear: the root trades one message with every peer, in rounds of at most
/// 16 peers; every other rank sends or receives one message. For parts of
/// P bytes over n ranks, per-step latency a and per-flow bandwidth B:
///     t = ceil((n - 1) / 16) a + (n - 1) P / B
/// -- the root's link carries (n - 1) P whatever the algorithm, and a tree
/// (MPI's binomial gather) saves latency only at many ranks with tiny parts,
/// at the price of copying parts through the ranks between. Ranks that share
/// stages (threads, MPI ranks of one machine) take small calls through them
/// instead, one one-way meeting and no message (`direct_base::gather`,
/// `direct_base::scatter`), and a reduce a meeting per 64 KiB
/// (`direct_base::reduce`): `gather_choice`, `scatter_choice` and
/// `reduce_choice` say when.
#include <array>
#include <cstddef>

#include "ddl/strategy/direct/layout.hpp"
#include "ddl/strategy/step.hpp"

namespace ddl {

/// How a gather, scatter or reduce runs (`gather_choice`, `scatter_choice`,
/// `reduce_choice`): the same on every rank of a call (its part's size is).
enum class rooted_path {
  stages,    ///< through the stages ranks share: one-way meetings, no message
  messages,  ///< a message a rank (a reduce: the strategy's reduce-scatter, then a gather of the blocks)
};

/// Between ranks that share stages (host memory), a gather goes through
/// them up to 32 KiB a rank and a scatter up to what the root's slot holds
/// for all the parts (`direct_layout::flagged_limit`): there the stages win
/// over one message a rank, above they lose.
inline constexpr std::size_t gather_stages_bytes = std::size_t{32} << 10;
inline rooted_path gather_choice(std::size_t part_bytes, bool shares_stages) noexcept {
  return shares_stages && part_bytes <= gather_stages_bytes ? rooted_path::stages : rooted_path::messages;
}
inline rooted_path scatter_choice(std::size_t part_bytes, int ranks, bool shares_stages) noexcept {
  return shares_stages && part_bytes * static_cast<std::size_t>(ranks) <= detail::direct_layout::flagged_limit
             ? rooted_path::stages
             : rooted_path::messages;
}
/// A reduce goes through the stages up to `reduce_stages_bytes`, the root
/// reducing every rank's input in rank order: it beat the reduce-scatter and
/// gather at every size measured on 2 cores; where more cores share the
/// reduction, the root's single one would lose sooner.
inline constexpr std::size_t reduce_stages_bytes = std::size_t{4} << 20;
inline rooted_path reduce_choice(std::size_t bytes, bool shares_stages) noexcept {
  return shares_stages && bytes <= reduce_stages_bytes ? rooted_path::stages : rooted_path::messages;
}

}  // namespace ddl

namespace ddl::detail {

/// The root sends `part(p)` to or receives it from every other rank p (16 at
/// a time), every other rank receives or sends `own` once: the messages of a
/// linear scatter (`to_root` false) or gather (`to_root` true).
template <class Transport, class Part>
void linear_rooted(Transport& t, int root, bool to_root, Part&& part, mutable_bytes own, const call_context& c, tag tg,
                   const char* what) {
  using request = typename Transport::request;
  const int n = t.size(), r = t.rank();
  if (r != root) {
    request q = to_root ? t.isend(root, const_bytes{own.data, own.size}, tg) : t.irecv(root, own, tg);
    wait_in_phase(t, q, c, phase_name{what, 0, 1});
    return;
  }
  constexpr int batch = 16;
  const int rounds = (n - 1 + batch - 1) / batch;
  std::array<request, batch> reqs;
  for (int d0 = 1, round = 0; d0 < n; d0 += batch, ++round) {
    const int d1 = d0 + batch < n ? d0 + batch : n;
    for (int d = d0; d < d1; ++d) {
      const int p = (r + d) % n;
      const mutable_bytes b = part(p);
      reqs[d - d0] = to_root ? t.irecv(p, b, tg) : t.isend(p, const_bytes{b.data, b.size}, tg);
    }
    const phase_name ph{what, round, rounds};
    for (int d = d0; d < d1; ++d) wait_in_phase(t, reqs[d - d0], c, ph);
  }
}

/// Gather: `part` bytes at `in` on every rank land at `out + p * part` on
/// `root` for each rank p (`out` is the root's alone; its own part may
/// already lie there: `in == out + root * part`).
template <class Transport>
void linear_gather(Transport& t, const std::byte* in, std::byte* out, std::size_t part, int root,
                   const call_context& c, tag tg) {
  auto at = [&](int p) { return mutable_bytes{out + static_cast<std::size_t>(p) * part, part}; };
  if (t.rank() == root && in != at(root).data) local_copy(c, at(root).data, in, part);
  linear_rooted(t, root, true, at, mutable_bytes{const_cast<std::byte*>(in), part}, c, tg, "linear gather");
}

/// Scatter: `part` bytes at `in + p * part` on `root` land at `out` on each
/// rank p (`in` is the root's alone; its own part may be left where it lies:
/// `out == in + root * part`).
template <class Transport>
void linear_scatter(Transport& t, const std::byte* in, std::byte* out, std::size_t part, int root,
                    const call_context& c, tag tg) {
  auto at = [&](int p) { return mutable_bytes{const_cast<std::byte*>(in) + static_cast<std::size_t>(p) * part, part}; };
  if (t.rank() == root && out != at(root).data) local_copy(c, out, at(root).data, part);
  linear_rooted(t, root, false, at, mutable_bytes{out, part}, c, tg, "linear scatter");
}

}  // namespace ddl::detail
