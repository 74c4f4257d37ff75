#pragma once
/// \file
/// How a range of `count` elements is split into `parts` blocks: the first
/// `count % parts` blocks hold one element more. Every strategy and the
/// `reduce_scatter` / `all_gather` interfaces use this one split, so block
/// `j` of a rank means the same elements everywhere.
#include <cstddef>

namespace ddl {

/// Block `j` of `count` elements split over `parts` ranks.
struct block {
  std::size_t offset = 0;  ///< first element
  std::size_t size = 0;    ///< number of elements
};

/// Example: `block_of(10, 4, 1)` is `{3, 3}`; `block_of(10, 4, 3)` is `{8, 2}`.
constexpr block block_of(std::size_t count, int parts, int j) noexcept {
  const std::size_t p = static_cast<std::size_t>(parts);
  const std::size_t q = count / p, r = count % p;
  const std::size_t uj = static_cast<std::size_t>(j);
  return {uj * q + (uj < r ? uj : r), q + (uj < r ? 1 : 0)};
}

}  // namespace ddl
