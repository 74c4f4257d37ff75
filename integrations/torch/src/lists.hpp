#pragma once
// The argument checks and layouts of the calls that take lists of tensors
// or split sizes (whatever the group's transport): a root in range, one part
// per rank, an all-to-all's split sizes as element counts, the coalesced
// forms' pairs. `n` is the group's size; errors name the call.
#include <cstdint>
#include <vector>

#include "tensors.hpp"

namespace ddl_torch {

inline int root_of(int64_t root, int n, const char* call) {
  TORCH_CHECK(root >= 0 && root < n, "ddl backend: ", call, " to root ", root, " in a group of ", n, " ranks");
  return static_cast<int>(root);
}

// The list forms' parts, one per rank, each the size and dtype of `like`
// (the call's `what`: its input or output tensor).
inline void check_parts(const at::Tensor& like, const std::vector<at::Tensor>& parts, int n, const char* call,
                        const char* what) {
  TORCH_CHECK(static_cast<int>(parts.size()) == n, "ddl backend: ", call, " needs a list of ", n, " tensors, got ",
              parts.size());
  for (const auto& p : parts)
    TORCH_CHECK(p.numel() == like.numel() && p.scalar_type() == like.scalar_type(), "ddl backend: ", call,
                ": every tensor of the list must have the ", what, "'s size and dtype");
}

// An all-to-all's parts as element counts, one per rank: `split` rows of
// `t`'s dim 0 each, or equal parts where `split` is empty.
inline std::vector<int64_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& split, int64_t n,
                                         const char* call, const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0), row = rows ? t.numel() / rows : 0;
  if (split.empty()) {
    TORCH_CHECK(rows % n == 0, "ddl backend: ", call, ": the ", what, "'s ", rows, " rows do not split into ", n,
                " equal parts (pass split sizes)");
    return std::vector<int64_t>(static_cast<std::size_t>(n), rows / n * row);
  }
  TORCH_CHECK(static_cast<int64_t>(split.size()) == n, "ddl backend: ", call, ": ", split.size(), " ", what,
              " split sizes for a group of ", n, " ranks");
  int64_t sum = 0;
  std::vector<int64_t> counts;
  for (int64_t s : split) {
    TORCH_CHECK(s >= 0, "ddl backend: ", call, ": a negative ", what, " split size (", s, ")");
    sum += s;
    counts.push_back(s * row);
  }
  TORCH_CHECK(sum == rows, "ddl backend: ", call, ": the ", what, " split sizes add up to ", sum, " rows, the ", what,
              " has ", rows);
  return counts;
}
inline std::vector<std::size_t> sizes_of(const std::vector<int64_t>& counts) {
  return std::vector<std::size_t>(counts.begin(), counts.end());
}
// `t` flattened and cut into parts of `counts` elements.
inline std::vector<at::Tensor> parts_of(const at::Tensor& t, const std::vector<int64_t>& counts) {
  std::vector<at::Tensor> parts;
  int64_t at = 0;
  for (int64_t c : counts) {
    parts.push_back(t.reshape({-1}).narrow(0, at, c));
    at += c;
  }
  return parts;
}

// The coalesced forms' lists: pairs of `big` (n times the `small` one's
// elements), dense, of one dtype ddl takes; returns the `small` ones'
// elements in all.
inline int64_t coalesced_total(const std::vector<at::Tensor>& big, const std::vector<at::Tensor>& small, int64_t n,
                               const char* call) {
  TORCH_CHECK(!small.empty() && big.size() == small.size(), "ddl backend: ", call, " needs lists of equal length, got ",
              big.size(), " and ", small.size());
  int64_t total = 0;
  for (std::size_t i = 0; i < small.size(); ++i) {
    for (const at::Tensor* t : {&big[i], &small[i]}) {
      check_dense(*t, call);
      TORCH_CHECK(t->scalar_type() == small[0].scalar_type(), "ddl backend: ", call, " needs tensors of one dtype, got ",
                  small[0].scalar_type(), " and ", t->scalar_type());
    }
    TORCH_CHECK(big[i].numel() == n * small[i].numel(), "ddl backend: ", call, ": tensor ", i, " has ", big[i].numel(),
                " elements where ", n, " x ", small[i].numel(), " were expected");
    total += small[i].numel();
  }
  dtype_of(small[0], call);  // one ddl takes (a clear error otherwise)
  return total;
}

}  // namespace ddl_torch
