#pragma once
/// \file
/// Direct collectives for ranks that can read each other's buffers in place
/// (a transport with `peer_memory`: threads of one process). Instead of
/// passing slices around a ring, a rank reads what it needs straight out of
/// its peers' buffers, all n at once:
///
///  * `ddl::one_shot` all-reduce: every rank reads every rank's whole input
///    and reduces it itself. Two synchronisations; (n+1) S bytes of memory
///    traffic per rank (n S read, S written; in place 2 S more through the
///    workspace). Least latency: for small messages.
///  * `ddl::two_shot` all-reduce: rank j reduces block j (`ddl::block_of`)
///    reading block j of all n inputs at once (a direct reduce-scatter), then
///    every rank copies each reduced block from its owner (a direct
///    all-gather). Three synchronisations; (3n-1) S / n bytes per rank, where
///    the ring moves 5 (n-1) S / n: for large messages.
///  * `reduce_scatter` and `all_gather` (both strategies): the direct forms,
///    one synchronisation each besides the address exchange.
///
/// Synchronisation is by messages over the transport, so group views and
/// the transport's deadlines, aborts and error messages all apply: ranks
/// trade buffer addresses (one small message to every peer), and zero-byte
/// messages to every peer mark the end of a phase, so no rank overwrites a
/// block or returns while a peer may still read it.
///
/// Bit-identical results: one_shot combines rank 0's value, then rank 1's,
/// ... on every rank (`memory_ops::reduce_many`); two_shot reduces each block
/// once, on its owner, in that same order, and the others copy it.
///
/// Cost model (`cost::price_direct`, calibrated in
/// bench/results/shared-memory.md): with M the memory bandwidth one rank
/// gets and sigma one synchronisation round,
///     one_shot: 2 sigma + (n+1) S / M          two_shot: 3 sigma + (3n-1) S / (n M)
#include <cstddef>
#include <string>
#include <vector>

#include "ddl/core/error.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {

/// What the direct strategies share: the address table, the checks, and the
/// direct reduce-scatter and all-gather.
class direct_base {
 public:
  template <class Transport>
  void validate(const Transport& t) {
    require_peer_memory<Transport>();
    (void)t;
  }
  static std::size_t reduce_scatter_workspace(std::size_t, dtype, int) { return 0; }

  /// `out` = this rank's block of the reduction, read from every rank's `in`.
  template <class Transport>
  void reduce_scatter(Transport& t, const std::byte* in, std::byte*, std::byte* out, std::size_t count,
                      const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    const block mine = block_of(count, n, r);
    if (n == 1) {
      local_copy(c, out, in, count * es);
      local_finalize(c, out, count, 1);
      return;
    }
    share_addresses(t, in, out, "direct reduce-scatter", c);
    reduce_block(mine, out, c);
    local_finalize(c, out, mine.size, n);
    end_of_phase(t, c, tag_offset::call_done, "direct reduce-scatter: peers reading");
  }

  /// `out` = every rank's block, copied from where each rank holds it.
  template <class Transport>
  void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    const block mine = block_of(count, n, r);
    if (n == 1) {
      local_copy(c, out + mine.offset * es, own, mine.size * es);
      return;
    }
    share_addresses(t, own, out, "direct all-gather", c);
    for (int k = 0; k < n; ++k) {
      const int p = (r + k) % n;
      const block b = block_of(count, n, p);
      local_copy(c, out + b.offset * es, peers_[static_cast<std::size_t>(p)].in, b.size * es);
    }
    end_of_phase(t, c, tag_offset::call_done, "direct all-gather: peers reading");
  }

 protected:
  template <class Transport>
  static constexpr void require_peer_memory() {
    static_assert(has_peer_memory_v<Transport>,
                  "ddl: one_shot and two_shot read their peers' buffers in place and need a transport whose ranks "
                  "share memory ('static constexpr bool peer_memory = true', e.g. ddl::local_transport); over "
                  "other transports use ring, multi_ring or auto");
  }

  struct addresses {
    const std::byte* in;
    std::byte* out;
  };

  /// Trades (in, out) with every peer; afterwards `peers_[p]` holds rank p's.
  template <class Transport>
  void share_addresses(Transport& t, const std::byte* in, std::byte* out, const char* what, const call_context& c) {
    require_peer_memory<Transport>();
    if (!c.mem->reduce_many)
      throw invalid_argument(std::string(c.strategy) + ": buffers in " + c.mem->name +
                             " memory offer no n-way reduction (memory_ops::reduce_many); use ring or auto");
    const auto n = static_cast<std::size_t>(t.size());
    if (peers_.size() != n) {
      peers_.assign(n, addresses{nullptr, nullptr});
      sources_.assign(n, nullptr);
    }
    peers_[static_cast<std::size_t>(t.rank())] = addresses{in, out};
    exchange_with_all(t, reinterpret_cast<std::byte*>(peers_.data()), sizeof(addresses), c,
                      c.base_tag + tag_offset::addresses, what);
  }

  /// Block `b` of every rank's input, reduced in rank order into `dst`.
  void reduce_block(const block& b, std::byte* dst, const call_context& c) {
    const std::size_t es = size_of(c.red.type);
    for (std::size_t p = 0; p < peers_.size(); ++p) sources_[p] = peers_[p].in + b.offset * es;
    c.mem->reduce_many(c.mem->ctx, dst, sources_.data(), static_cast<int>(sources_.size()), b.size, c.red);
  }

  /// Returns once every rank has reached this point.
  template <class Transport>
  static void end_of_phase(Transport& t, const call_context& c, tag offset, const char* what) {
    exchange_with_all(t, nullptr, 0, c, c.base_tag + offset, what);
  }

  std::vector<addresses> peers_;
  std::vector<const std::byte*> sources_;
};

}  // namespace detail

/// One-shot all-reduce: each rank reduces every rank's whole input itself.
/// For small messages on ranks that share memory. Needs `count` elements of
/// workspace (in place, the result is built there and copied back once no
/// peer reads the input any more).
/// Example:
/// \code
///   ddl::communicator<ddl::one_shot, ddl::local_transport> comm(t);
///   comm.all_reduce(ddl::host_view(g), ddl::op::sum);
/// \endcode
struct one_shot : detail::direct_base {
  static constexpr const char* name = "one_shot";
  std::string describe() const { return name; }
  static std::size_t all_reduce_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }

  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    const int n = t.size();
    const std::size_t bytes = count * size_of(c.red.type);
    if (n == 1) {
      local_copy(c, out, in, bytes);
      return;
    }
    share_addresses(t, in, out, "one-shot: addresses", c);
    const bool in_place = in == out;
    std::byte* dst = in_place ? c.work : out;
    reduce_block(block{0, count}, dst, c);
    end_of_phase(t, c, in_place ? tag_offset::reduced : tag_offset::call_done, "one-shot: peers reading");
    if (in_place) local_copy(c, out, dst, bytes);
    local_finalize(c, out, count, n);
  }
};

/// Two-shot all-reduce: a direct reduce-scatter (each rank reduces its block
/// from all n inputs at once), then a direct all-gather of the reduced
/// blocks. For large messages on ranks that share memory; in place needs no
/// workspace.
struct two_shot : detail::direct_base {
  static constexpr const char* name = "two_shot";
  std::string describe() const { return name; }
  static std::size_t all_reduce_workspace(std::size_t, dtype, int) { return 0; }

  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    if (n == 1) {
      local_copy(c, out, in, count * es);
      return;
    }
    share_addresses(t, in, out, "two-shot: addresses", c);
    const block mine = block_of(count, n, r);
    // Only rank r reads block r of any buffer until the phase ends, so the
    // result may overwrite block r of an in-place buffer.
    reduce_block(mine, out + mine.offset * es, c);
    local_finalize(c, out + mine.offset * es, mine.size, n);
    end_of_phase(t, c, tag_offset::reduced, "two-shot: reduce phase");
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      const block b = block_of(count, n, p);
      local_copy(c, out + b.offset * es, peers_[static_cast<std::size_t>(p)].out + b.offset * es, b.size * es);
    }
    end_of_phase(t, c, tag_offset::call_done, "two-shot: peers reading");
  }
};

}  // namespace ddl
