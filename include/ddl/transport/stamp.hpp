#pragma once
/// \file
/// Call stamps: a collective's fingerprint folded into the tags of its
/// messages, so ranks that disagree about a call never combine each other's
/// bytes (a message only matches a receive of the same stamp) and a
/// transport that sees a peer's message of the same call with another stamp
/// can say so at once instead of waiting out its deadline.
///
/// A communicator's call tags (`call_tag`), 64 bits:
///
///     bit 63: 1 (a stamped call tag) | bits 40-55: stamp | bits 8-39: call
///     number | bits 0-7: the phase (`tag_offset`)
///
/// The 16-bit stamp: collective (4 bits), dtype (3), op (3), and 6 bits of a
/// hash of the counts, the root and the strategy's name (and, in
/// `auto_strategy`'s all-reduces and in broadcasts, the plan run:
/// `strategy/tuning.hpp`). Collective, dtype
/// and op are named exactly when they differ; the hash catches other
/// disagreements 63 times in 64 (`DDL_CHECK=1` compares every field before
/// each call, at the price of an extra round). Tags without bit 63 (a
/// program driving a transport itself) are never compared.
///
/// A transport that can look at a peer's unmatched messages (the in-process
/// mailbox, MPI's `MPI_Iprobe`) calls `stamps_disagree(awaited, found)` while
/// a receive from that peer waits, or a send to it (the peer, under another
/// stamp, does not receive from this rank: a broadcast with different
/// roots), and throws `mismatch_error(stamp_mismatch(...))`; the
/// communicator then gives the group up, so every rank of the call ends with
/// a `mismatch_error` naming the two ranks and the field.
#include <cstdint>
#include <cstring>
#include <string>

#include "ddl/core/dtype.hpp"
#include "ddl/core/hash.hpp"
#include "ddl/core/op.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl::detail {

/// What a stamp records of the collective (0: a call of ddl's own, e.g. the
/// `DDL_CHECK` trade, which every rank makes alike).
enum class call_kind : std::uint8_t {
  internal = 0,
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  barrier,
  all_to_all,
  gather,
  scatter,
  reduce
};

inline const char* name_of(call_kind k) noexcept {
  switch (k) {
    case call_kind::all_reduce: return "all_reduce";
    case call_kind::reduce_scatter: return "reduce_scatter";
    case call_kind::all_gather: return "all_gather";
    case call_kind::broadcast: return "broadcast";
    case call_kind::barrier: return "barrier";
    case call_kind::all_to_all: return "all_to_all";
    case call_kind::gather: return "gather";
    case call_kind::scatter: return "scatter";
    case call_kind::reduce: return "reduce";
    default: return "internal call";
  }
}

inline constexpr tag stamped_bit = tag(1) << 63;
inline constexpr int stamp_shift = 40, call_shift = 8;
inline constexpr int stamp_bits = 16;
/// The stamp's named fields (collective, dtype, op) fill its low
/// `stamp_field_bits`; the hash the rest.
inline constexpr int stamp_field_bits = 10;
inline constexpr unsigned stamp_fields_mask = (1u << stamp_field_bits) - 1;
inline constexpr unsigned stamp_hash_mask = (1u << (stamp_bits - stamp_field_bits)) - 1;
constexpr call_kind kind_field(unsigned stamp) { return static_cast<call_kind>(stamp & 15u); }
constexpr dtype dtype_field(unsigned stamp) { return static_cast<dtype>((stamp >> 4) & 7u); }
constexpr op op_field(unsigned stamp) { return static_cast<op>((stamp >> 7) & 7u); }

/// The 16-bit stamp of one call.
inline std::uint16_t make_stamp(call_kind k, dtype t, op o, std::uint64_t count_in, std::uint64_t count_out, int root,
                                const char* strategy) {
  std::uint64_t h = fnv1a_u64(count_in, fnv1a_basis);  // the rest, hashed
  h = fnv1a_u64(count_out, h);
  h = fnv1a_u64(static_cast<std::uint64_t>(static_cast<std::int64_t>(root)), h);
  for (const char* s = strategy ? strategy : ""; *s; ++s) h = fnv1a_u64(static_cast<unsigned char>(*s), h);
  h ^= h >> 29;
  return static_cast<std::uint16_t>((static_cast<unsigned>(k) & 15u) | (static_cast<unsigned>(t) & 7u) << 4 |
                                    (static_cast<unsigned>(o) & 7u) << 7 | (h & stamp_hash_mask) << stamp_field_bits);
}

/// Flipped in the stamp of a call that runs whole on a staged transport's
/// host transport (`staged_transport::bounces`): a rank that bounces a call
/// and one that stages it never combine messages.
inline constexpr std::uint16_t bounce_stamp_bit = 0x8000u;

/// The base tag of call number `call` with `stamp` (phases add `tag_offset`s).
constexpr tag call_tag(std::uint64_t call, std::uint16_t stamp) {
  return stamped_bit | tag(stamp) << stamp_shift | (call & 0xffffffffu) << call_shift;
}
constexpr bool is_stamped(tag t) { return (t & stamped_bit) != 0; }
constexpr std::uint16_t stamp_of(tag t) { return static_cast<std::uint16_t>(t >> stamp_shift); }
constexpr std::uint64_t call_of(tag t) { return (t >> call_shift) & 0xffffffffu; }

/// True when `found`, a message from the peer a receive tagged `awaited` is
/// waiting for, belongs to the same call under another stamp: the two ranks
/// called different collectives (or the same with other arguments).
constexpr bool stamps_disagree(tag awaited, tag found) {
  return is_stamped(awaited) && is_stamped(found) && call_of(awaited) == call_of(found) &&
         stamp_of(awaited) != stamp_of(found);
}

/// How a tag reads in an error message ("all_reduce call 12, phase 4", or
/// the number for a program's own tags).
inline std::string describe_tag(tag t) {
  if (!is_stamped(t)) return "tag " + std::to_string(t);
  return std::string(name_of(kind_field(stamp_of(t)))) + " call " + std::to_string(call_of(t)) +
         ", phase " + std::to_string(t & 0xffu);
}

/// A communicator's 64-bit tags folded into a transport's narrower tag
/// space of `bits` bits (MPI: up to `MPI_TAG_UB`; UCX: what its 64-bit tags
/// leave beside the sender's rank). A stamped tag keeps its flag (the top
/// bit), its 16-bit stamp, the phase and the low `call_bits` bits of the
/// call number; calls on one communicator run one at a time, so wrapping the
/// call number is safe. Below 26 bits the stamp does not fit and is left out
/// (`stamps()` is false: mismatched calls are then not told apart by their
/// tags). A program's own tags (the communicator's `send`/`recv`) keep the
/// top bit clear, so they never meet a call's.
struct narrow_tags {
  int bits = 15, call_bits = 0;
  narrow_tags() = default;
  explicit narrow_tags(int b) noexcept : bits(b), call_bits(b - 1 - stamp_bits - 8) {}
  /// Whether the stamps survive (`call_bits` >= 1).
  bool stamps() const noexcept { return call_bits >= 1; }
  std::uint64_t pack(tag t) const noexcept {
    const std::uint64_t phase = t & 0xffu, top = std::uint64_t{1} << (bits - 1);
    if (is_stamped(t) && stamps())
      return top | std::uint64_t{stamp_of(t)} << (8 + call_bits) |
             (call_of(t) & ((std::uint64_t{1} << call_bits) - 1)) << 8 | phase;
    if (is_stamped(t)) return top | ((call_of(t) << 8) | phase) % top;
    return t % top;  // a program's own tag: top bit clear
  }
  /// The inverse, as far as it goes: a stamped tag with the call number's low bits.
  tag unpack(std::uint64_t v) const noexcept {
    if (!stamps() || !((v >> (bits - 1)) & 1u)) return v;
    const auto stamp = static_cast<std::uint16_t>(v >> (8 + call_bits));
    return call_tag((v >> 8) & ((std::uint64_t{1} << call_bits) - 1), stamp) | (v & 0xffu);
  }
};

/// Start of every stamp mismatch's text (the communicator recognises a
/// peer's notice by it and reports a `mismatch_error` too).
inline constexpr const char* mismatch_words = "call mismatch: ";

/// The text of a mismatch seen on rank `me` (awaiting `mine`) in a message of
/// rank `peer` (tagged `theirs`), naming the first field that differs.
inline std::string stamp_mismatch(int me, tag mine, int peer, tag theirs) {
  const unsigned a = stamp_of(mine), b = stamp_of(theirs);
  const std::string who_a = "rank " + std::to_string(me), who_b = "rank " + std::to_string(peer);
  std::string s = std::string(mismatch_words) + describe_tag(mine) + ": ";
  if (kind_field(a) != kind_field(b)) {
    s += "ranks disagree on the collective: " + who_a + " called " + name_of(kind_field(a)) + ", " + who_b +
         " called " + name_of(kind_field(b));
  } else if (dtype_field(a) != dtype_field(b)) {
    s += std::string("ranks disagree on the dtype: ") + who_a + " passed " + name_of(dtype_field(a)) + ", " + who_b +
         " passed " + name_of(dtype_field(b));
  } else if (op_field(a) != op_field(b)) {
    s += std::string("ranks disagree on the op: ") + who_a + " passed " + name_of(op_field(a)) + ", " + who_b +
         " passed " + name_of(op_field(b));
  } else if ((a ^ b) == bounce_stamp_bit) {
    s += who_a + " and " + who_b +
         " disagree on whether the call runs through host memory (staging_options::bounce_bytes, "
         "DDL_STAGING_BOUNCE; or on the count, the root or the strategy)";
  } else {
    s += who_a + " and " + who_b +
         " disagree on the count, the root or the strategy (or, under auto, the plan: the placement or what was "
         "measured; DDL_CHECK=1 names the first three)";
  }
  return s;
}

/// True when an error text carries a stamp mismatch (this rank's or a peer's notice of one).
inline bool is_mismatch_text(const char* what) { return std::strstr(what, mismatch_words) != nullptr; }

}  // namespace ddl::detail
