#pragma once
/// \file
/// A message posted to a `staged_transport`, as its caller gave it: what
/// the staging pipeline's records (`staged/transport.hpp`) and the near
/// ranks' records (`staged/near.hpp`) both start from.
#include <cstddef>
#include <cstdint>

#include "ddl/core/op.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {

struct staged_message {
  enum class kind : std::uint8_t { send, recv, reduce };
  std::uint64_t id = 0;
  kind k = kind::send;
  int peer = 0;
  tag tg = 0;
  std::byte* data = nullptr;         // send: source; receive: destination
  const std::byte* local = nullptr;  // reduce: the local operand
  std::size_t bytes = 0;
  reduction red{};
};

}  // namespace detail
}  // namespace ddl
