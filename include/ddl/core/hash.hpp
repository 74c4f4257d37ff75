#pragma once
/// \file
/// FNV-1a (64-bit): the one hash ddl uses to compare what ranks hold
/// (call stamps, topology texts) without sending it whole.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddl {
namespace detail {

inline constexpr std::uint64_t fnv1a_basis = 1469598103934665603ull;

/// Mixes `n` bytes at `data` into `h`.
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = fnv1a_basis) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
inline std::uint64_t fnv1a(const std::string& s) noexcept { return fnv1a(s.data(), s.size()); }
/// Mixes `v` into `h`, least significant byte first (the same on every host).
inline std::uint64_t fnv1a_u64(std::uint64_t v, std::uint64_t h) noexcept {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  return h;
}

}  // namespace detail
}  // namespace ddl
