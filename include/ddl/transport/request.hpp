#pragma once
/// \file
/// The request handle every transport hands out: one move-only shell around
/// a transport's own fields, so no transport writes its moves, its
/// destructor or its "withdraw if unfinished" twice; the one error a
/// transport gives when a message meets a receive of another size; and what
/// transports share to name the silent ranks after a timeout.
#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ddl/transport/concept.hpp"
#include "ddl/transport/stamp.hpp"

namespace ddl::detail {

/// `Fields` is a transport's description of one operation: default-constructed
/// it means "no operation", and it provides
///   - `bool active() const noexcept` — refers to an operation not yet waited for;
///   - `void withdraw() noexcept` — cancels that operation (called only when
///     active, by the destructor and by move-assignment over it).
/// The transport's `request` derives from `request_handle<Fields>` and
/// befriends the transport, which reads and writes the fields directly.
template <class Fields>
class request_handle : protected Fields {
 public:
  request_handle() = default;
  request_handle(request_handle&& o) noexcept : Fields(std::move(static_cast<Fields&>(o))) { o.clear(); }
  request_handle& operator=(request_handle&& o) noexcept {
    if (this != &o) {
      release();
      static_cast<Fields&>(*this) = std::move(static_cast<Fields&>(o));
      o.clear();
    }
    return *this;
  }
  request_handle(const request_handle&) = delete;
  request_handle& operator=(const request_handle&) = delete;
  ~request_handle() { release(); }

  /// True until waited on (or withdrawn).
  bool active() const noexcept { return Fields::active(); }

 protected:
  /// Withdraws an unfinished operation and empties the handle.
  void release() noexcept {
    if (Fields::active()) Fields::withdraw();
    clear();
  }
  void clear() noexcept { static_cast<Fields&>(*this) = Fields{}; }
};

/// The text of a collective's message (stamped tag `t`) of `sent` bytes from
/// rank `from` met by a receive of `expected` bytes on rank `to`: a call
/// mismatch (`is_mismatch_text`), so every rank of the call ends with a
/// `mismatch_error`. Ranks whose stamps agree and whose messages differ in
/// size disagree on the count (or, in the 1 in 64 cases the stamp's hash
/// misses, on the strategy).
inline std::string count_mismatch(int from, const std::string& sent, int to, std::size_t expected, tag t) {
  return std::string(mismatch_words) + describe_tag(t) + ": ranks disagree on the count: rank " + std::to_string(from) +
         " sent " + sent + " bytes, rank " + std::to_string(to) + " expected " + std::to_string(expected) +
         " (message size mismatch; or they disagree on the strategy)";
}

/// The error text of a send of `sent` bytes from rank `from` matched by a
/// receive of `expected` bytes on rank `to` (tag `t`), the same from every
/// transport: `who` names the transport. A collective's message (a stamped
/// tag) is a call mismatch (`count_mismatch`).
inline std::string size_mismatch(const char* who, int from, std::size_t sent, int to, std::size_t expected, tag t) {
  if (is_stamped(t)) return std::string(who) + ": " + count_mismatch(from, std::to_string(sent), to, expected, t);
  return std::string(who) + ": message size mismatch: rank " + std::to_string(from) + " sent " +
         std::to_string(sent) + " bytes, rank " + std::to_string(to) + " expected " + std::to_string(expected) +
         " (" + describe_tag(t) + "; did every rank call the same collective with the same count?)";
}

/// How long a rank that timed out waits to hear of its peers' timeouts
/// before naming the ones that reported none (`timeout_error::silent`): a
/// quarter of its wait, at most half a second.
inline double timeout_grace(double waited_s) { return waited_s * 0.25 < 0.5 ? waited_s * 0.25 : 0.5; }

/// Seconds on the steady clock (for timestamps compared across threads).
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The ranks other than `me` whose last reported timeout (`reported[q]`,
/// steady seconds) is not within `grace` before `at` or any time after.
template <class Reported>
std::vector<int> silent_ranks(const Reported& reported, int n, int me, double at, double grace) {
  std::vector<int> silent;
  for (int q = 0; q < n; ++q)
    if (q != me && !(reported(q) >= at - grace)) silent.push_back(q);
  return silent;
}

}  // namespace ddl::detail
