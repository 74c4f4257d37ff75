#pragma once
/// \file
/// DDL objects: a view of a buffer plus the metadata a collective needs
/// (element type, count, memory space and device). Views never own memory.
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ddl/core/dtype.hpp"

namespace ddl {

/// Where a buffer's bytes live.
enum class memory_space : std::uint8_t { host, cuda };

/// "host" or "cuda".
constexpr const char* name_of(memory_space m) noexcept {
  return m == memory_space::host ? "host" : "cuda";
}

/// Memory space plus device id (-1 for host) and, for device memory, the
/// stream that orders work on it (an opaque `cudaStream_t`; null = default).
struct location {
  memory_space space = memory_space::host;  ///< host or device memory
  int device = -1;                          ///< the device's id; -1 for host memory
  void* stream = nullptr;                   ///< the stream work on it is ordered by (`cudaStream_t`)
  /// The same memory (space and device; the stream aside).
  friend bool operator==(const location& a, const location& b) {
    return a.space == b.space && a.device == b.device;
  }
};

/// Raw bytes, read-only: what a transport moves.
struct const_bytes {
  const std::byte* data = nullptr;  ///< the first byte
  std::size_t size = 0;             ///< how many
};
/// Raw bytes, writable.
struct mutable_bytes {
  std::byte* data = nullptr;  ///< the first byte
  std::size_t size = 0;       ///< how many
  /// The same bytes, read-only.
  operator const_bytes() const noexcept { return {data, size}; }
};

/// A read-only DDL object: data, element count, element type, location.
struct const_buffer_view {
  const void* data = nullptr;             ///< the first element
  std::size_t count = 0;                  ///< elements
  ddl::dtype type = ddl::dtype::float32;  ///< their type
  ddl::location where{};                  ///< where they lie

  /// `count` elements' bytes.
  std::size_t bytes() const noexcept { return count * size_of(type); }
  /// `data` as bytes.
  const std::byte* byte_data() const noexcept { return static_cast<const std::byte*>(data); }
};

/// A writable DDL object. Converts to `const_buffer_view`.
struct buffer_view {
  void* data = nullptr;                   ///< the first element
  std::size_t count = 0;                  ///< elements
  ddl::dtype type = ddl::dtype::float32;  ///< their type
  ddl::location where{};                  ///< where they lie

  /// `count` elements' bytes.
  std::size_t bytes() const noexcept { return count * size_of(type); }
  /// `data` as bytes.
  std::byte* byte_data() const noexcept { return static_cast<std::byte*>(data); }
  /// The same view, read-only.
  operator const_buffer_view() const noexcept { return {data, count, type, where}; }
};

/// A view of host memory: `host_view(ptr, n)`, `host_view(vector)`.
/// \tparam T one of the element types (`ddl::is_element`).
/// Example:
/// \code
///   std::vector<float> grads(n);
///   comm.all_reduce(ddl::host_view(grads), ddl::op::sum);
/// \endcode
template <class T>
buffer_view host_view(T* data, std::size_t count) {
  return {data, count, dtype_of_v<T>, location{}};
}
/// A read-only view of `count` elements of host memory at `data`.
template <class T>
const_buffer_view host_view(const T* data, std::size_t count) {
  return {data, count, dtype_of_v<T>, location{}};
}
/// A view of a vector's elements.
template <class T, class A>
buffer_view host_view(std::vector<T, A>& v) {
  return host_view(v.data(), v.size());
}
/// A read-only view of a vector's elements.
template <class T, class A>
const_buffer_view host_view(const std::vector<T, A>& v) {
  return host_view(v.data(), v.size());
}

}  // namespace ddl
