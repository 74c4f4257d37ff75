#pragma once
/// \file
/// One communication step of a collective, split into pipelined chunks.
///
/// A step sends one contiguous slice to one peer and receives one slice from
/// another (or the same) peer, optionally combining what arrives with a local
/// operand. Both slices are cut into chunks of `options::chunk_bytes`; up to
/// `options::pipeline_depth` chunks are in flight, so while chunk k is being
/// combined, chunks k+1... are already moving. On a transport with a fused
/// receive-and-reduce (`irecv_reduce`) the combine happens as the data is
/// read; otherwise chunks land in a small scratch ring and are combined here.
/// A stream-ordered transport (a device stream orders the transfers) gets
/// each slice as one message.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <string>

#include "ddl/core/config.hpp"
#include "ddl/core/error.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {

/// What every step of one collective call shares: handed to a strategy's
/// `all_reduce` / `reduce_scatter` / `all_gather` by the communicator.
struct call_context {
  const char* collective = "";  ///< e.g. "all_reduce", for error messages
  const char* strategy = "";    ///< e.g. "ring"
  reduction red{};              ///< element type and op
  const options* opts = nullptr;
  tag base_tag = 0;             ///< unique per call: the call owns tags base_tag + [0, 256) (see `tag_offset`)
  std::byte* scratch = nullptr; ///< >= pipeline_depth * chunk_bytes when the transport has no fused reduce
  std::size_t scratch_bytes = 0;
  std::byte* work = nullptr;    ///< the strategy's own workspace (`all_reduce_workspace` bytes)
  const memory_ops* mem = nullptr;  ///< local copies and reductions for these buffers
};

/// Where each phase's messages are tagged, as offsets from the call's
/// `base_tag`. Messages of one call between two ranks match in order (FIFO
/// per peer and tag), so phases that could be in flight at once between the
/// same pair need different offsets; everything else may share one. A
/// strategy of your own takes offsets from `user` on.
struct tag_offset {
  /// Multi-ring dimension j's reduce-scatter and all-gather rings.
  static constexpr tag ring_reduce_scatter(int dim) { return tag(4) * tag(dim); }
  static constexpr tag ring_all_gather(int dim) { return tag(4) * tag(dim) + 1; }
  /// Multi-ring block permutation (boxes in a non-natural order): past the
  /// rings of the largest box (`ddl::max_dims` = 8 dimensions).
  static constexpr tag permute = 32;
  /// Stage i of a multi-ring pipelined across levels (`strategy/pipeline.hpp`;
  /// at most 190 stages): 64 + i.
  static constexpr tag pipelined(int stage) { return tag(64) + tag(stage); }
  /// Doubling algorithms: folding extra ranks in and out, the exchanges.
  static constexpr tag fold = 1, exchange = 2, halving = 2, unfold = 3, doubling = 4;
  /// Broadcast and barrier (calls of their own).
  static constexpr tag broadcast = 1, barrier = 1;
  /// Direct strategies (`one_shot`, `two_shot`): the address exchange, the
  /// end of the reduce phase, the end of the call.
  static constexpr tag addresses = 1, reduced = 2, call_done = 3;
  /// First offset free for user-written strategies (up to 254).
  static constexpr tag user = 128;
  /// The call check of `options::check_calls` (`DDL_CHECK=1`), before the call's own messages.
  static constexpr tag check = 255;
};

/// Local copy of `bytes` (ranges may overlap) in the call's memory.
inline void local_copy(const call_context& c, std::byte* dst, const std::byte* src, std::size_t bytes) {
  if (bytes && dst != src) c.mem->copy(c.mem->ctx, dst, src, bytes);
}
/// The op's final touch (`avg` divides) on `count` elements.
inline void local_finalize(const call_context& c, std::byte* data, std::size_t count, int ranks) {
  if (count) c.mem->finalize(c.mem->ctx, data, count, c.red, ranks);
}

/// One step: send `send_bytes` from `send` to `send_peer`, receive
/// `recv_bytes` from `recv_peer` into `recv`, as `local (op) received` when
/// `local` is set (`received (op) local` when `received_first`). A peer of -1
/// means that side is idle.
///
/// `recv` may be `send` itself (a transport without a fused receive-and-reduce,
/// `recv == local == send`): each slice is reduced in place once its own send
/// has completed, so a step needs no second buffer and no copy back.
struct step_desc {
  int send_peer = -1;
  const std::byte* send = nullptr;
  std::size_t send_bytes = 0;
  int recv_peer = -1;
  std::byte* recv = nullptr;
  const std::byte* local = nullptr;
  std::size_t recv_bytes = 0;
  bool received_first = false;
};

/// Names the phase in a timeout (built only when one happens).
struct phase_name {
  const char* what;  ///< e.g. "ring reduce-scatter"
  int step, steps;
  std::string str() const {
    return std::string(what) + " step " + std::to_string(step + 1) + "/" + std::to_string(steps);
  }
};

template <class Transport>
void wait_in_phase(Transport& t, typename Transport::request& r, const call_context& c, const phase_name& ph) {
  try {
    t.wait(r, std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(c.opts->timeout));
  } catch (const timeout_error& e) {
    throw timeout_error(e.peer(), std::string(c.strategy) + " " + ph.str(), c.collective, e.waited(), e.silent());
  }
}

/// Runs one step to completion. Requests still in flight when an exception
/// leaves are cancelled by their destructors, so no transfer outlives the call.
template <class Transport>
void run_step(Transport& t, const step_desc& s, const call_context& c, tag tg, const phase_name& ph) {
  using request = typename Transport::request;
  constexpr std::size_t max_depth = 16;
  constexpr bool fused = has_fused_reduce_v<Transport>;
  static_assert(!is_stream_ordered_v<Transport> || fused, "ddl: a stream-ordered transport must offer irecv_reduce");
  const std::size_t esize = size_of(c.red.type);
  // A stream-ordered transport gets each slice whole (one chunk).
  const std::size_t chunk = is_stream_ordered_v<Transport>
                                ? std::max({esize, s.send_bytes, s.recv_bytes})
                                : std::max<std::size_t>(esize, c.opts->chunk_bytes / esize * esize);
  const std::size_t depth = std::min<std::size_t>(c.opts->pipeline_depth, max_depth);
  const std::size_t sends = s.send_peer >= 0 ? (s.send_bytes + chunk - 1) / chunk : 0;
  const std::size_t recvs = s.recv_peer >= 0 ? (s.recv_bytes + chunk - 1) / chunk : 0;
  const bool combine = s.local != nullptr;
  // The result overwrites what is being sent: slice k is reduced only after
  // send k completed (sends and receives are sliced alike).
  const bool over_send = combine && s.recv == s.send && s.send_peer >= 0 && s.send_bytes > 0 && s.recv_bytes > 0;
  if (fused && over_send)
    throw invalid_argument("internal: a fused receive-and-reduce cannot overwrite the buffer it sends");
  call_context cc = c;  // the step's own operand order
  cc.red.received_first = s.received_first;
  if (!fused && combine && c.scratch_bytes < depth * chunk)
    throw invalid_argument("internal: scratch too small for the pipeline");

  std::array<request, max_depth> sreq, rreq;
  std::size_t s_posted = 0, s_done = 0, r_posted = 0, r_done = 0;

  auto slice = [&](std::size_t k, std::size_t total) {
    const std::size_t off = k * chunk;
    return std::pair<std::size_t, std::size_t>(off, std::min(chunk, total - off));
  };
  auto finish_send = [&] {
    wait_in_phase(t, sreq[s_done % max_depth], c, ph);
    ++s_done;
  };
  auto finish_recv = [&] {
    const std::size_t k = r_done % max_depth;
    wait_in_phase(t, rreq[k], c, ph);
    if (over_send)
      while (s_done <= r_done && s_done < s_posted) finish_send();
    if constexpr (!fused) {
      if (combine) {
        auto [off, len] = slice(r_done, s.recv_bytes);
        const std::byte* got = c.scratch + (r_done % depth) * chunk;
        if (cc.red.received_first)
          c.mem->reduce(c.mem->ctx, s.recv + off, got, s.local + off, len / esize, cc.red);
        else
          c.mem->reduce(c.mem->ctx, s.recv + off, s.local + off, got, len / esize, cc.red);
      }
    }
    ++r_done;
  };

  while (s_posted < sends || r_posted < recvs) {
    if (r_posted < recvs) {
      if (r_posted - r_done == depth) finish_recv();
      auto [off, len] = slice(r_posted, s.recv_bytes);
      mutable_bytes dst{s.recv + off, len};
      request& slot = rreq[r_posted % max_depth];
      if (combine) {
        if constexpr (fused)
          slot = t.irecv_reduce(s.recv_peer, dst, const_bytes{s.local + off, len}, cc.red, tg);
        else
          slot = t.irecv(s.recv_peer, mutable_bytes{c.scratch + (r_posted % depth) * chunk, len}, tg);
      } else {
        slot = t.irecv(s.recv_peer, dst, tg);
      }
      ++r_posted;
    }
    if (s_posted < sends) {
      if (s_posted - s_done == depth) finish_send();
      auto [off, len] = slice(s_posted, s.send_bytes);
      sreq[s_posted % max_depth] = t.isend(s.send_peer, const_bytes{s.send + off, len}, tg);
      ++s_posted;
    }
  }
  while (r_done < r_posted) finish_recv();
  while (s_done < s_posted) finish_send();
}

namespace detail {
/// Every rank sends the `bytes` at `table + rank * bytes` to every other rank;
/// peer p's arrive at `table + p * bytes` (`table` may be null when `bytes`
/// is 0: a barrier). At most 16 peers per round (round k: send to r + d,
/// receive from r - d for the round's distances d), so the transport never
/// holds more than 16 receives of it at once.
template <class Transport>
void exchange_with_all(Transport& t, std::byte* table, std::size_t bytes, const call_context& c, tag tg,
                       const char* what) {
  using request = typename Transport::request;
  constexpr int batch = 16;
  const int n = t.size(), r = t.rank();
  const int rounds = (n - 1 + batch - 1) / batch;
  auto at = [&](int rank) { return table ? table + static_cast<std::size_t>(rank) * bytes : nullptr; };
  std::array<request, batch> sends, recvs;
  for (int d0 = 1, round = 0; d0 < n; d0 += batch, ++round) {
    const int d1 = d0 + batch < n ? d0 + batch : n;
    for (int d = d0; d < d1; ++d) {
      const int from = (r - d + n) % n;
      recvs[d - d0] = t.irecv(from, mutable_bytes{at(from), bytes}, tg);
    }
    for (int d = d0; d < d1; ++d) sends[d - d0] = t.isend((r + d) % n, const_bytes{at(r), bytes}, tg);
    const phase_name ph{what, round, rounds};
    for (int d = d0; d < d1; ++d) wait_in_phase(t, recvs[d - d0], c, ph);
    for (int d = d0; d < d1; ++d) wait_in_phase(t, sends[d - d0], c, ph);
  }
}

}  // namespace detail

/// \name The step vocabulary
/// What a strategy is written in (NCCL's primitives are the model): each
/// call runs one step to completion, pipelined in chunks, with the call's
/// deadline, and names its phase in a timeout. `data` pointers are into the
/// buffers the communicator handed the strategy (or its workspace).
/// Example (a ring all-gather step):
/// \code
///   ddl::steps::send_recv(t, right, block_i, left, block_j, bytes, c, c.base_tag + ddl::tag_offset::user,
///                         {"my all-gather", s, n - 1});
/// \endcode
/// @{
namespace steps {

/// Sends `bytes` from `data` to `peer`.
template <class Transport>
void send(Transport& t, int peer, const std::byte* data, std::size_t bytes, const call_context& c, tag tg,
          const phase_name& ph = {"send", 0, 1}) {
  step_desc d;
  d.send_peer = peer;
  d.send = data;
  d.send_bytes = bytes;
  run_step(t, d, c, tg, ph);
}
/// Receives `bytes` from `peer` into `data`.
template <class Transport>
void recv(Transport& t, int peer, std::byte* data, std::size_t bytes, const call_context& c, tag tg,
          const phase_name& ph = {"recv", 0, 1}) {
  step_desc d;
  d.recv_peer = peer;
  d.recv = data;
  d.recv_bytes = bytes;
  run_step(t, d, c, tg, ph);
}
/// Receives `bytes` from `peer` and stores `local (op) received` in `dst`
/// (`dst` may be `local`).
template <class Transport>
void recv_reduce(Transport& t, int peer, std::byte* dst, const std::byte* local, std::size_t bytes,
                 const call_context& c, tag tg, const phase_name& ph = {"recv-reduce", 0, 1}) {
  step_desc d;
  d.recv_peer = peer;
  d.recv = dst;
  d.local = local;
  d.recv_bytes = bytes;
  run_step(t, d, c, tg, ph);
}
/// Sends `bytes` from `out` to `to` while receiving `bytes` from `from` into `in`.
template <class Transport>
void send_recv(Transport& t, int to, const std::byte* out, int from, std::byte* in, std::size_t bytes,
               const call_context& c, tag tg, const phase_name& ph = {"send-recv", 0, 1}) {
  step_desc d;
  d.send_peer = to;
  d.send = out;
  d.send_bytes = bytes;
  d.recv_peer = from;
  d.recv = in;
  d.recv_bytes = bytes;
  run_step(t, d, c, tg, ph);
}
/// Sends `bytes` from `out` to `to` while receiving from `from` and storing
/// `local (op) received` in `dst` (a ring reduce-scatter step).
template <class Transport>
void send_recv_reduce(Transport& t, int to, const std::byte* out, int from, std::byte* dst, const std::byte* local,
                      std::size_t bytes, const call_context& c, tag tg,
                      const phase_name& ph = {"send-recv-reduce", 0, 1}) {
  step_desc d;
  d.send_peer = to;
  d.send = out;
  d.send_bytes = bytes;
  d.recv_peer = from;
  d.recv = dst;
  d.local = local;
  d.recv_bytes = bytes;
  run_step(t, d, c, tg, ph);
}

}  // namespace steps
/// @}

}  // namespace ddl
