#pragma once
/// \file
/// A collective's argument checks, run on the caller's thread before
/// anything is queued: a clear `invalid_argument` naming the call and the
/// problem (counts that do not fit the group, overlapping buffers, a root or
/// peer outside it, device memory handed to a host-only transport).
#include <cstddef>
#include <string>
#include <vector>

#include "ddl/core/buffer.hpp"
#include "ddl/core/error.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {

/// The largest tag a point-to-point transfer takes: every MPI keeps tags up
/// to 2^14 - 1 of a program's own apart (`MPI_TAG_UB` >= 32767, and
/// `mpi_transport` gives the collectives' stamped tags the top bit).
inline constexpr int max_message_tag = (1 << 14) - 1;

/// The checks for one group: this rank, the group's size, and whether its
/// transport takes device memory.
struct call_arguments {
  int rank = 0;
  int size = 1;
  bool device = false;

  void check_all_reduce(const const_buffer_view& in, const const_buffer_view& out) const {
    check_pair("all_reduce", in, out);
    if (in.count != out.count)
      throw invalid_argument("all_reduce: input has " + std::to_string(in.count) + " elements, output " +
                             std::to_string(out.count));
    check_disjoint_or_same("all_reduce", in.byte_data(), in.bytes(), out.byte_data(), out.bytes());
  }
  void check_reduce_scatter(const const_buffer_view& in, const const_buffer_view& out) const {
    check_pair("reduce_scatter", in, out);
    const block mine = block_of(in.count, size, rank);
    if (out.count != mine.size)
      throw invalid_argument("reduce_scatter: output has " + std::to_string(out.count) + " elements, rank " +
                             std::to_string(rank) + "'s block of " + std::to_string(in.count) + " over " +
                             std::to_string(size) + " ranks has " + std::to_string(mine.size));
    if (out.byte_data() != in.byte_data() + mine.offset * size_of(in.type))
      check_disjoint_or_same("reduce_scatter", in.byte_data(), in.bytes(), out.byte_data(), out.bytes());
  }
  void check_all_gather(const const_buffer_view& in, const const_buffer_view& out) const {
    check_pair("all_gather", in, out);
    const block mine = block_of(out.count, size, rank);
    if (in.count != mine.size)
      throw invalid_argument("all_gather: input has " + std::to_string(in.count) + " elements, rank " +
                             std::to_string(rank) + "'s block of " + std::to_string(out.count) + " over " +
                             std::to_string(size) + " ranks has " + std::to_string(mine.size));
    if (in.byte_data() != out.byte_data() + mine.offset * size_of(in.type))
      check_disjoint_or_same("all_gather", in.byte_data(), in.bytes(), out.byte_data(), out.bytes());
  }
  // The even form's parts (`size` blocks of `in.count / size`).
  std::vector<std::size_t> equal_parts(const const_buffer_view& in, const const_buffer_view& out) const {
    const auto n = static_cast<std::size_t>(size);
    if (in.count % n != 0 || out.count != in.count)
      throw invalid_argument("all_to_all: input has " + std::to_string(in.count) + " elements, output " +
                             std::to_string(out.count) + "; both must be the same multiple of the group's " +
                             std::to_string(n) + " ranks (parts of other sizes: the form with counts)");
    std::vector<std::size_t> parts(n, in.count / n);
    check_all_to_all(in, parts, out, parts);
    return parts;
  }
  void check_all_to_all(const const_buffer_view& in, const std::vector<std::size_t>& sends,
                        const const_buffer_view& out, const std::vector<std::size_t>& recvs) const {
    check_pair("all_to_all", in, out);
    const auto n = static_cast<std::size_t>(size), r = static_cast<std::size_t>(rank);
    auto total = [&](const char* which, const std::vector<std::size_t>& counts, std::size_t expected) {
      if (counts.size() != n)
        throw invalid_argument(std::string("all_to_all: ") + std::to_string(counts.size()) + " " + which +
                               " counts for a group of " + std::to_string(n) + " ranks");
      std::size_t sum = 0;
      for (std::size_t c : counts) sum += c;
      if (sum != expected)
        throw invalid_argument(std::string("all_to_all: the ") + which + " counts add up to " + std::to_string(sum) +
                               " elements, the " + (which[0] == 's' ? "input" : "output") + " has " +
                               std::to_string(expected));
    };
    total("send", sends, in.count);
    total("receive", recvs, out.count);
    if (sends[r] != recvs[r])
      throw invalid_argument("all_to_all: rank " + std::to_string(r) + " sends itself " + std::to_string(sends[r]) +
                             " elements and expects " + std::to_string(recvs[r]));
    check_disjoint_or_same("all_to_all", in.byte_data(), in.bytes(), out.byte_data(), out.bytes());
  }
  void check_root(const char* what, int root) const {
    if (root < 0 || root >= size)
      throw invalid_argument(std::string(what) + ": root " + std::to_string(root) + " is not a rank of this group of " +
                             std::to_string(size));
  }
  // A gather's or scatter's arguments: `part`, a rank's block (its input or
  // output), on every rank; `whole`, the root's `size` blocks, on the root
  // alone.
  void check_rooted(const char* what, const const_buffer_view& in, const const_buffer_view& out, int root,
                    bool gather) const {
    check_root(what, root);
    const const_buffer_view& part = gather ? in : out;
    const const_buffer_view& whole = gather ? out : in;
    if (rank != root) return check_pair(what, part, part);
    check_pair(what, in, out);
    if (whole.count != static_cast<std::size_t>(size) * part.count)
      throw invalid_argument(std::string(what) + ": the root's " + (gather ? "output" : "input") + " has " +
                             std::to_string(whole.count) + " elements, not " + std::to_string(size) + " x the " +
                             (gather ? "input" : "output") + "'s " + std::to_string(part.count));
    const std::byte* own = whole.byte_data() + static_cast<std::size_t>(root) * part.bytes();
    if (part.byte_data() != own)
      check_disjoint_or_same(what, part.byte_data(), part.bytes(), whole.byte_data(), whole.bytes());
  }
  void check_gather(const const_buffer_view& in, const const_buffer_view& out, int root) const {
    check_rooted("gather", in, out, root, true);
  }
  void check_scatter(const const_buffer_view& in, const const_buffer_view& out, int root) const {
    check_rooted("scatter", in, out, root, false);
  }
  void check_reduce(const const_buffer_view& in, const const_buffer_view& out, int root) const {
    check_root("reduce", root);
    if (rank != root) return check_pair("reduce", in, in);
    check_all_reduce(in, out);
  }
  void check_transfer(const char* what, const const_buffer_view& data, int peer, int message_tag) const {
    if (peer < 0 || peer >= size || peer == rank)
      throw invalid_argument(std::string(what) + ": peer " + std::to_string(peer) +
                             (peer == rank ? " is this rank" : " is not a rank of the group of " +
                                                                     std::to_string(size)) +
                             " (a transfer goes to or from another rank)");
    check_message(what, data, message_tag);
  }
  // A transfer's tag and memory (whatever its peer).
  void check_message(const char* what, const const_buffer_view& data, int message_tag) const {
    if (message_tag < 0 || message_tag > max_message_tag)
      throw invalid_argument(std::string(what) + ": tag " + std::to_string(message_tag) + " is outside [0, " +
                             std::to_string(max_message_tag) + "]");
    if (!data.data && data.count)
      throw invalid_argument(std::string(what) + ": data is null with " + std::to_string(data.count) + " elements");
    check_pair(what, data, data);  // the memory it lies in
  }
  void check_broadcast(const const_buffer_view& data, int root) const {
    check_pair("broadcast", data, data);
    check_root("broadcast", root);
  }

  void check_pair(const char* what, const const_buffer_view& in, const const_buffer_view& out) const {
    if (in.type != out.type)
      throw invalid_argument(std::string(what) + ": input is " + name_of(in.type) + ", output is " +
                             name_of(out.type));
    if (!in.data && in.count)
      throw invalid_argument(std::string(what) + ": input data is null with " + std::to_string(in.count) +
                             " elements");
    if (!out.data && out.count)
      throw invalid_argument(std::string(what) + ": output data is null with " + std::to_string(out.count) +
                             " elements");
    for (const auto* v : {&in, &out})
      if (v->where.space != memory_space::host && !device)
        throw invalid_argument(std::string(what) + ": a " + name_of(v->where.space) +
                               " buffer was handed to a host-only transport");
  }

  static void check_disjoint_or_same(const char* what, const std::byte* a, std::size_t an, const std::byte* b,
                                     std::size_t bn) {
    if (a == b || an == 0 || bn == 0) return;
    if (detail::overlaps(a, an, b, bn))
      throw invalid_argument(std::string(what) +
                             ": input and output overlap without being the same buffer (pass the same view "
                             "for in-place, or disjoint buffers)");
  }
};

}  // namespace detail
}  // namespace ddl
