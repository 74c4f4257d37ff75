#pragma once
/// \file
/// Broadcast and barrier over any transport, in the step vocabulary of
/// `step.hpp`. They need no reduction, so every strategy shares them; the
/// communicator picks the broadcast algorithm from the transport's link
/// costs (`broadcast_choice`).
///
/// Broadcast algorithms, for S bytes over n ranks, per-step latency a and
/// per-flow bandwidth B:
///   - binomial tree: ceil(log2 n) rounds, each forwarding the whole message;
///       t = ceil(log2 n) (a + S / B)            -- least latency, small S
///   - pipelined chain: the message cut into k segments flowing down the
///     chain root -> root+1 -> ... ; segment s leaves rank i while s+1
///     arrives, so after the chain fills every link is busy:
///       t = (k + n - 2) (a + S / (k B)),  best k = sqrt((n - 2) S / (a B))
///                                               -- ~S / B for large S
/// Barrier: dissemination, ceil(log2 n) rounds; in round j rank r signals
/// r + 2^j and hears from r - 2^j, so after the last round every rank has
/// heard, transitively, from every other.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ddl/strategy/step.hpp"

namespace ddl {

/// How a broadcast of a given size is carried out.
struct broadcast_plan {
  enum class algorithm { binomial, chain } algo = algorithm::binomial;
  std::size_t segments = 1;  ///< chain: how many pieces the message is cut into
  double seconds = 0;        ///< predicted time
};

/// ceil(log2 n) for n >= 1.
constexpr int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

/// The cheaper broadcast for `bytes` over `ranks`, by the formulas above.
/// \param elem_size segments are whole elements of this size.
inline broadcast_plan broadcast_choice(std::size_t bytes, int ranks, double latency, double bandwidth,
                                       std::size_t elem_size = 1) {
  broadcast_plan binomial;
  const double S = static_cast<double>(bytes);
  binomial.seconds = ceil_log2(ranks) * (latency + S / bandwidth);
  if (ranks <= 2 || bytes == 0) return binomial;
  const std::size_t elems = bytes / std::max<std::size_t>(elem_size, 1);
  const double best_k = std::sqrt((ranks - 2) * S / (latency * bandwidth));
  broadcast_plan chain;
  chain.algo = broadcast_plan::algorithm::chain;
  chain.segments = static_cast<std::size_t>(std::clamp(best_k, 1.0, 1024.0));
  chain.segments = std::max<std::size_t>(1, std::min(chain.segments, elems));
  chain.seconds = (static_cast<double>(chain.segments) + ranks - 2) *
                  (latency + S / (static_cast<double>(chain.segments) * bandwidth));
  return chain.seconds < binomial.seconds ? chain : binomial;
}

namespace detail {

/// Binomial-tree broadcast of `bytes` at `data` from `root`. With relative
/// rank v = (rank - root) mod n, in round j the ranks v < 2^j (which hold the
/// data) send to v + 2^j.
template <class Transport>
void binomial_broadcast(Transport& t, std::byte* data, std::size_t bytes, int root, const call_context& c, tag tg) {
  const int n = t.size(), v = (t.rank() - root + n) % n, rounds = ceil_log2(n);
  int round = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++round) {
    step_desc d;
    if (v < mask && v + mask < n) {
      d.send_peer = (v + mask + root) % n;
      d.send = data;
      d.send_bytes = bytes;
    } else if (v >= mask && v < 2 * mask) {
      d.recv_peer = (v - mask + root) % n;
      d.recv = data;
      d.recv_bytes = bytes;
    } else {
      continue;
    }
    run_step(t, d, c, tg, phase_name{"binomial broadcast", round, rounds});
  }
}

/// Pipelined-chain broadcast in `segments` pieces (whole elements of
/// `elem_size`). Step s: receive segment s from the left while sending
/// segment s - 1 to the right, so the segments stream down the chain.
template <class Transport>
void chain_broadcast(Transport& t, std::byte* data, std::size_t bytes, int root, std::size_t segments,
                     std::size_t elem_size, const call_context& c, tag tg) {
  const int n = t.size(), v = (t.rank() - root + n) % n;
  const std::size_t elems = bytes / elem_size;
  segments = std::max<std::size_t>(1, std::min(segments, elems));
  auto seg = [&](std::size_t s) {  // byte range of segment s
    const std::size_t lo = elems * s / segments, hi = elems * (s + 1) / segments;
    return std::pair<std::size_t, std::size_t>(lo * elem_size, (hi - lo) * elem_size);
  };
  const int left = v > 0 ? (v - 1 + root) % n : -1;
  const int right = v + 1 < n ? (v + 1 + root) % n : -1;
  const int steps = static_cast<int>(segments) + 1;
  for (std::size_t s = 0; s <= segments; ++s) {
    step_desc d;
    if (right >= 0) {
      // The root has every segment at once; the others forward the one they
      // received the step before.
      const std::size_t out = v == 0 ? s : s - 1;
      if ((v == 0 && s < segments) || (v > 0 && s >= 1)) {
        auto [off, len] = seg(out);
        d.send_peer = right;
        d.send = data + off;
        d.send_bytes = len;
      }
    }
    if (left >= 0 && s < segments) {
      auto [off, len] = seg(s);
      d.recv_peer = left;
      d.recv = data + off;
      d.recv_bytes = len;
    }
    if (d.send_peer < 0 && d.recv_peer < 0) continue;
    run_step(t, d, c, tg, phase_name{"chain broadcast", static_cast<int>(s), steps});
  }
}

/// Dissemination barrier; `token` is a few bytes of scratch of the call's dtype.
template <class Transport>
void dissemination_barrier(Transport& t, std::byte* token, std::size_t token_bytes, const call_context& c, tag tg) {
  const int n = t.size(), r = t.rank(), rounds = ceil_log2(n);
  int round = 0;
  for (int k = 1; k < n; k <<= 1, ++round) {
    step_desc d;
    d.send_peer = (r + k) % n;
    d.send = token;
    d.send_bytes = token_bytes;
    d.recv_peer = (r - k + n) % n;
    d.recv = token + token_bytes;
    d.recv_bytes = token_bytes;
    run_step(t, d, c, tg, phase_name{"barrier", round, rounds});
  }
}

}  // namespace detail
}  // namespace ddl
