#pragma once
/// \file
/// Boxes of ranks: extents that are static or dynamic per dimension (like
/// `std::mdspan`'s `extents<4, dynamic, 4>`), and the rank <-> coordinate map.
///
/// Dimension 0 varies fastest: rank = c0 + d0 * (c1 + d1 * (c2 + ...)). So in
/// `extents<4, 16, 4>` (GPUs x nodes x racks) ranks 0..3 share a node, which
/// is how launchers number ranks, and dimension 0 is the innermost level.
#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "ddl/core/error.hpp"

namespace ddl {

/// Marks an extent known only at run time.
inline constexpr int dynamic = -1;

/// Most dimensions a box may have.
inline constexpr std::size_t max_dims = 8;

/// A box of ranks with `sizeof...(E)` dimensions; each extent is a positive
/// constant or `ddl::dynamic`.
/// \tparam E extents, innermost (fastest-varying) first
/// Example:
/// \code
///   ddl::extents<4, ddl::dynamic, 4> box(16);   // 4 x 16 x 4 = 256 ranks
///   auto c = ddl::coord_of(box, 77);            // {1, 3, 1}
///   assert(ddl::rank_of(box, c) == 77);
/// \endcode
template <int... E>
class extents {
  static_assert(sizeof...(E) >= 1, "ddl: extents needs at least one dimension");
  static_assert(sizeof...(E) <= max_dims, "ddl: extents has more than ddl::max_dims dimensions");
  static_assert(((E > 0 || E == dynamic) && ...),
                "ddl: every extent must be positive or ddl::dynamic (a box with a zero or negative extent can "
                "never match a group of ranks)");

 public:
  static constexpr std::size_t dims = sizeof...(E);
  static constexpr std::size_t dynamic_dims = ((E == dynamic ? 1 : 0) + ...);
  static constexpr bool is_static = dynamic_dims == 0;
  static constexpr std::array<int, dims> static_extents{E...};

  /// A fully static box.
  template <bool S = is_static, std::enable_if_t<S, int> = 0>
  constexpr extents() : e_{E...} {}

  /// Gives the dynamic extents, in order. Throws `topology_error` if one is not positive.
  template <class... I, std::enable_if_t<sizeof...(I) == dynamic_dims && (sizeof...(I) > 0), int> = 0>
  explicit extents(I... dyn) : e_{E...} {
    const int values[] = {static_cast<int>(dyn)...};
    std::size_t k = 0;
    for (std::size_t d = 0; d < dims; ++d)
      if (e_[d] == dynamic) {
        if (values[k] < 1)
          throw topology_error("extent " + std::to_string(d) + " is " + std::to_string(values[k]) +
                               "; extents must be positive");
        e_[d] = values[k++];
      }
  }

  constexpr int extent(std::size_t d) const { return e_[d]; }
  /// Number of ranks in the box.
  constexpr int size() const {
    int p = 1;
    for (int v : e_) p *= v;
    return p;
  }
  /// Product of extents of dimensions below `d`: the rank distance between neighbours in dimension d.
  constexpr int stride(std::size_t d) const {
    int p = 1;
    for (std::size_t i = 0; i < d; ++i) p *= e_[i];
    return p;
  }

 private:
  std::array<int, dims> e_;
};

/// Every extent given at run time, any number of dimensions (<= max_dims).
class dynamic_extents {
 public:
  dynamic_extents() = default;
  template <class It>
  dynamic_extents(It first, It last) {
    for (; first != last; ++first) push(static_cast<int>(*first));
    if (dims_ == 0) throw topology_error("a box needs at least one dimension");
  }
  dynamic_extents(std::initializer_list<int> e) : dynamic_extents(e.begin(), e.end()) {}
  template <int... E, std::enable_if_t<(sizeof...(E) > 0), int> = 0>  // never deduced from a braced list
  dynamic_extents(const extents<E...>& b) {
    for (std::size_t d = 0; d < b.dims; ++d) push(b.extent(d));
  }

  std::size_t dims() const noexcept { return dims_; }
  int extent(std::size_t d) const { return e_[d]; }
  int size() const {
    int p = 1;
    for (std::size_t d = 0; d < dims_; ++d) p *= e_[d];
    return p;
  }
  int stride(std::size_t d) const {
    int p = 1;
    for (std::size_t i = 0; i < d; ++i) p *= e_[i];
    return p;
  }
  std::string str() const {
    std::string s;
    for (std::size_t d = 0; d < dims_; ++d) s += (d ? "x" : "") + std::to_string(e_[d]);
    return s;
  }

 private:
  void push(int v) {
    if (dims_ == max_dims) throw topology_error("a box has more than ddl::max_dims dimensions");
    if (v < 1) throw topology_error("extent " + std::to_string(dims_) + " is " + std::to_string(v) + "; extents must be positive");
    e_[dims_++] = v;
  }
  std::array<int, max_dims> e_{};
  std::size_t dims_ = 0;
};

/// Coordinates of a rank: one per dimension.
using coord = std::array<int, max_dims>;

/// Number of dimensions of a static or dynamic box.
template <int... E>
constexpr std::size_t box_dims(const extents<E...>&) { return sizeof...(E); }
inline std::size_t box_dims(const dynamic_extents& b) { return b.dims(); }

/// Coordinates of `rank` in `box` (dimension 0 fastest).
template <class Box>
constexpr coord coord_of(const Box& box, int rank) {
  coord c{};
  for (std::size_t d = 0; d < box_dims(box); ++d) {
    c[d] = rank % box.extent(d);
    rank /= box.extent(d);
  }
  return c;
}

/// Rank at coordinates `c` of `box`.
template <class Box>
constexpr int rank_of(const Box& box, const coord& c) {
  int r = 0;
  for (std::size_t d = box_dims(box); d-- > 0;) r = r * box.extent(d) + c[d];
  return r;
}

/// Throws `topology_error` unless `box` holds exactly `ranks` ranks. Every
/// rank runs the same check on the same values, so all of them throw.
template <class Box>
void check_box(const Box& box, int ranks) {
  if (box.size() != ranks) {
    std::string s;
    for (std::size_t d = 0; d < box_dims(box); ++d) s += (d ? "x" : "") + std::to_string(box.extent(d));
    throw topology_error("box " + s + " holds " + std::to_string(box.size()) + " ranks but the group has " +
                         std::to_string(ranks));
  }
}

}  // namespace ddl
