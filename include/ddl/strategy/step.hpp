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
  const options* opts = nullptr;  ///< the communicator's settings (deadline, chunks)
  tag base_tag = 0;             ///< unique per call: the call owns tags base_tag + [0, 256) (see `tag_offset`)
  std::byte* scratch = nullptr; ///< >= pipeline_depth * chunk_bytes when the transport has no fused reduce
  std::size_t scratch_bytes = 0;  ///< `scratch`'s bytes
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
  /// Broadcast, barrier, all-to-all, gather and scatter (calls of their own).
  static constexpr tag broadcast = 1, barrier = 1, all_to_all = 1, rooted = 1;
  /// Direct strategies (`one_shot`, `two_shot`): the address exchange, the
  /// end of the reduce phase, the end of the call.
  static constexpr tag addresses = 1, reduced = 2, call_done = 3;
  /// First offset free for user-written strategies (up to 254).
  static constexpr tag user = 128;
  /// The call check of `options::check_calls` (`DDL_CHECK=1`), a call of its own.
  static constexpr tag check = 255;
  /// `auto_strategy`'s tuning agreement, after the call's own messages
  /// (`strategy/tuning.hpp`).
  static constexpr tag tuning = 255;
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
/// `recv` may be `send` itself (`recv == local == send`; not on a
/// stream-ordered transport): chunks land in the call's scratch and each is
/// reduced in place once its own bytes have been sent, so a step needs no
/// second buffer and no copy back. A transport with a fused
/// receive-and-reduce lands them too for such a step (its scratch, at least
/// `min(recv_bytes, pipeline_depth * chunk)` bytes, supplied by the strategy).
struct step_desc {
  int send_peer = -1;                ///< the rank sent to; -1: none
  const std::byte* send = nullptr;   ///< what is sent
  std::size_t send_bytes = 0;        ///< its bytes
  int recv_peer = -1;                ///< the rank received from; -1: none
  std::byte* recv = nullptr;         ///< where the result lands
  const std::byte* local = nullptr;  ///< combined with what arrives; null: a plain receive
  std::size_t recv_bytes = 0;        ///< bytes received
  bool received_first = false;       ///< the received operand on the left (`reduction::received_first`)
};

/// Names the phase in a timeout (built only when one happens).
struct phase_name {
  const char* what;  ///< e.g. "ring reduce-scatter"
  int step;          ///< which step, from 0
  int steps;         ///< of how many
  /// "what step k/n".
  std::string str() const {
    return std::string(what) + " step " + std::to_string(step + 1) + "/" + std::to_string(steps);
  }
};

/// The deadline of a wait in a call that starts now (`options::timeout`).
inline deadline phase_deadline(const call_context& c) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(c.opts->timeout);
}

/// Runs `wait()`; a `timeout_error` it throws is thrown again naming the
/// strategy, the collective and phase `ph`.
template <class Wait>
void in_phase(const call_context& c, const phase_name& ph, Wait&& wait) {
  try {
    wait();
  } catch (const timeout_error& e) {
    throw timeout_error(e.peer(), std::string(c.strategy) + " " + ph.str(), c.collective, e.waited(), e.silent(),
                        e.note());
  }
}

template <class Transport>
void wait_in_phase(Transport& t, typename Transport::request& r, const call_context& c, const phase_name& ph) {
  in_phase(c, ph, [&] { t.wait(r, phase_deadline(c)); });
}

namespace detail {
/// The pipeline's chunk for elements of `esize` bytes: `options::chunk_bytes`
/// rounded down to whole elements, at least one. A call's scratch holds
/// `pipeline_depth` of them (`run_step` lands chunks there).
inline std::size_t chunk_size(std::size_t esize, const options& o) {
  return std::max(esize, o.chunk_bytes / esize * esize);
}
}  // namespace detail

/// One step as a state machine: the slices cut into chunks, up to `depth`
/// chunks in flight each way. `post` starts what the window allows; `advance`
/// (transports with `test`) completes what has arrived without blocking;
/// `wait_next` blocks on the oldest unfinished chunk. `run_step` drives one
/// to completion; the pipelined engine (`pipeline.hpp`) drives several at
/// once. Without a fused receive-and-reduce, chunk k of a combining receive
/// lands at `landing` (+ k's offset in the slice when `landing_mirrors`, else
/// in a ring of `depth` chunk-sized slots) and is combined from there. The
/// result may overwrite what is being sent (`recv == send`): a chunk is
/// combined only after the sends of its bytes completed, and it lands first
/// even where the transport could reduce as it receives.
///
/// Chunks are `options::chunk_bytes`; a slice of at most `eager_pieces`
/// eager messages of the transport's `eager_bytes(peer)` (where it says) is
/// cut into those instead, so they go without a handshake, all in flight at
/// once; where the transport caps a peer's messages (`piece_bytes(peer)`),
/// no chunk is larger. Each direction is cut by its own slice and peer, as
/// its counterpart on the peer cuts it.
template <class Transport>
class step_machine {
 public:
  using request = typename Transport::request;  ///< the transport's
  static constexpr std::size_t max_depth = 16;  ///< chunks in flight per direction, at most
  static constexpr bool fused = has_fused_reduce_v<Transport>;  ///< the transport reduces as it receives
  static_assert(!is_stream_ordered_v<Transport> || fused, "ddl: a stream-ordered transport must offer irecv_reduce");
  /// Chunks can land and be combined here (host memory): every transport but
  /// a stream-ordered one. A fused transport's step that reduces into the
  /// slice it sends lands its chunks so (its peer may still read the slice).
  static constexpr bool can_land = !is_stream_ordered_v<Transport>;

  /// Slices of at most this many eager messages go as eager messages.
  static constexpr std::size_t eager_pieces = 4;

  /// Sets up step `s` under tag `tg`: chunks land in `landing` where they
  /// are combined here (`landing_mirrors`: at the slice's own offsets), at
  /// most `depth` in flight each way.
  void start(const Transport& t, const step_desc& s, tag tg, std::byte* landing, bool landing_mirrors,
             std::size_t depth, const call_context& c) {
    s_ = s;
    tg_ = tg;
    landing_ = landing;
    mirrors_ = landing_mirrors;
    c_ = &c;
    red_ = c.red;
    red_.received_first = s.received_first;
    esize_ = size_of(c.red.type);
    schunk_ = chunk_of(t, s.send_peer, s.send_bytes, esize_, *c.opts);
    rchunk_ = chunk_of(t, s.recv_peer, s.recv_bytes, esize_, *c.opts);
    depth_ = std::max<std::size_t>(1, std::min(depth, max_depth));
    sends_ = s.send_peer >= 0 ? (s.send_bytes + schunk_ - 1) / schunk_ : 0;
    recvs_ = s.recv_peer >= 0 ? (s.recv_bytes + rchunk_ - 1) / rchunk_ : 0;
    combine_ = s.local != nullptr;
    over_send_ = combine_ && s.recv == s.send && sends_ > 0 && recvs_ > 0;
    fuse_ = fused && !over_send_;
    if (!can_land && over_send_)
      throw invalid_argument("internal: a stream-ordered receive-and-reduce cannot overwrite the buffer it sends");
    if (!fuse_ && combine_ && recvs_ > 0 && !landing_)
      throw invalid_argument("internal: a combining step without a landing buffer");
    s_posted_ = s_done_ = r_posted_ = r_done_ = 0;
  }
  /// Whether every chunk of the step has gone and come.
  bool done() const noexcept { return s_done_ == sends_ && r_done_ == recvs_; }
  /// The peer this step waits for (a timeout's culprit).
  int waiting_for() const noexcept { return r_done_ < recvs_ ? s_.recv_peer : s_.send_peer; }

  /// Posts what the window allows, receives first. True when anything was posted.
  bool post(Transport& t) {
    bool moved = false;
    while (r_posted_ < recvs_ && r_posted_ - r_done_ < depth_) {
      const std::size_t off = r_posted_ * rchunk_, len = std::min(rchunk_, s_.recv_bytes - off);
      request& slot = rreq_[r_posted_ % max_depth];
      if (combine_ && fuse_) {
        if constexpr (fused)
          slot = t.irecv_reduce(s_.recv_peer, mutable_bytes{s_.recv + off, len}, const_bytes{s_.local + off, len}, red_,
                                tg_);
      } else if (combine_) {
        slot = t.irecv(s_.recv_peer, mutable_bytes{landed(r_posted_), len}, tg_);
      } else {
        slot = t.irecv(s_.recv_peer, mutable_bytes{s_.recv + off, len}, tg_);
      }
      ++r_posted_;
      moved = true;
    }
    while (s_posted_ < sends_ && s_posted_ - s_done_ < depth_) {
      const std::size_t off = s_posted_ * schunk_, len = std::min(schunk_, s_.send_bytes - off);
      sreq_[s_posted_ % max_depth] = t.isend(s_.send_peer, const_bytes{s_.send + off, len}, tg_);
      ++s_posted_;
      moved = true;
    }
    return moved;
  }

  /// Posts, then completes (with `test`) what has arrived, in order. True
  /// when anything moved.
  bool advance(Transport& t) {
    bool moved = post(t);
    while (s_done_ < s_posted_ && t.test(sreq_[s_done_ % max_depth])) {
      ++s_done_;
      moved = true;
    }
    while (r_done_ < r_posted_) {
      if (over_send_ && !sent_through(r_done_)) break;  // its bytes are still being sent
      if (!t.test(rreq_[r_done_ % max_depth])) break;
      combine_received();
      moved = true;
    }
    return moved;
  }

  /// Blocks (within the call's deadline) until the oldest unfinished chunk
  /// completes: receive k before send k before receive k+1, so both windows
  /// keep moving (the peers' windows wait on ours).
  void wait_next(Transport& t, const phase_name& ph) {
    if (r_done_ < r_posted_ && (s_done_ == s_posted_ || r_done_ <= s_done_)) {
      wait_in_phase(t, rreq_[r_done_ % max_depth], *c_, ph);
      if (over_send_)
        while (!sent_through(r_done_) && s_done_ < s_posted_) wait_in_phase(t, sreq_[s_done_++ % max_depth], *c_, ph);
      combine_received();
    } else if (s_done_ < s_posted_) {
      wait_in_phase(t, sreq_[s_done_++ % max_depth], *c_, ph);
    }
  }

 private:
  // The chunk size of one direction: a whole slice on a stream-ordered
  // transport; eager pieces for a slice of a few; else `chunk_bytes`; at
  // most the peer's piece where the transport caps it (whole elements).
  static std::size_t chunk_of(const Transport& t, int peer, std::size_t bytes, std::size_t esize, const options& o) {
    if constexpr (is_stream_ordered_v<Transport>) {
      (void)t, (void)peer, (void)o;
      return std::max(esize, bytes);
    } else {
      std::size_t chunk = detail::chunk_size(esize, o);
      if constexpr (has_eager_bytes_v<Transport>) {
        if (peer >= 0) {
          const std::size_t e = t.eager_bytes(peer) / esize * esize;
          if (e > 0 && e < chunk && bytes > e && bytes <= eager_pieces * e) chunk = e;
        }
      }
      if constexpr (has_piece_bytes_v<Transport>) {
        if (peer >= 0) {
          const std::size_t p = t.piece_bytes(peer) / esize * esize;
          if (p > 0 && p < chunk) chunk = p;
        }
      }
      return chunk;
    }
  }
  // Receive chunk k's bytes are no longer being sent (over_send_).
  bool sent_through(std::size_t k) const noexcept {
    if (s_done_ == sends_) return true;
    const std::size_t end = std::min(std::min((k + 1) * rchunk_, s_.recv_bytes), s_.send_bytes);
    return s_done_ * schunk_ >= end;
  }
  std::byte* landed(std::size_t k) const noexcept {
    return landing_ + (mirrors_ ? k * rchunk_ : (k % depth_) * rchunk_);
  }
  // Receive r_done_ has arrived: combine it (where it landed) and count it.
  void combine_received() {
    if constexpr (can_land) {
      if (combine_ && !fuse_) {
        const std::size_t off = r_done_ * rchunk_, len = std::min(rchunk_, s_.recv_bytes - off);
        const std::byte* got = landed(r_done_);
        if (red_.received_first)
          c_->mem->reduce(c_->mem->ctx, s_.recv + off, got, s_.local + off, len / esize_, red_);
        else
          c_->mem->reduce(c_->mem->ctx, s_.recv + off, s_.local + off, got, len / esize_, red_);
      }
    }
    ++r_done_;
  }

  step_desc s_;
  tag tg_ = 0;
  std::byte* landing_ = nullptr;
  bool mirrors_ = false;
  const call_context* c_ = nullptr;
  reduction red_{};
  std::size_t esize_ = 1, schunk_ = 1, rchunk_ = 1, depth_ = 1, sends_ = 0, recvs_ = 0;
  std::size_t s_posted_ = 0, s_done_ = 0, r_posted_ = 0, r_done_ = 0;
  bool combine_ = false, over_send_ = false, fuse_ = false;
  std::array<request, max_depth> sreq_, rreq_;
};

/// Runs one step to completion (chunks land in the call's scratch ring).
/// Requests still in flight when an exception leaves are cancelled by their
/// destructors, so no transfer outlives the call.
template <class Transport>
void run_step(Transport& t, const step_desc& s, const call_context& c, tag tg, const phase_name& ph) {
  step_machine<Transport> m;
  const std::size_t depth = std::min<std::size_t>(c.opts->pipeline_depth, step_machine<Transport>::max_depth);
  const std::size_t ring = depth * detail::chunk_size(size_of(c.red.type), *c.opts);
  if (s.local && !step_machine<Transport>::fused && c.scratch_bytes < ring)
    throw invalid_argument("internal: scratch too small for the pipeline");
  if (s.local && step_machine<Transport>::fused && s.recv == s.send && c.scratch_bytes < std::min(ring, s.recv_bytes))
    throw invalid_argument("internal: no landing for a step that reduces into what it sends");
  m.start(t, s, tg, c.scratch, false, depth, c);
  while (!m.done()) {
    m.post(t);
    m.wait_next(t, ph);
  }
}

namespace detail {
/// Every rank sends `send(p)` (a `const_bytes`) to every other rank p and
/// receives `recv(p)` (a `mutable_bytes`, sized as p's part for this rank)
/// from each. At most 16 peers per round (round k: send to r + d, receive
/// from r - d for the round's distances d), so the transport never holds
/// more than 16 receives of it at once. Parts may be empty.
template <class Transport, class Send, class Recv>
void exchange_parts(Transport& t, Send&& send, Recv&& recv, const call_context& c, tag tg, const char* what) {
  using request = typename Transport::request;
  constexpr int batch = 16;
  const int n = t.size(), r = t.rank();
  const int rounds = (n - 1 + batch - 1) / batch;
  std::array<request, batch> sends, recvs;
  for (int d0 = 1, round = 0; d0 < n; d0 += batch, ++round) {
    const int d1 = d0 + batch < n ? d0 + batch : n;
    for (int d = d0; d < d1; ++d) {
      const int from = (r - d + n) % n;
      recvs[d - d0] = t.irecv(from, recv(from), tg);
    }
    for (int d = d0; d < d1; ++d) {
      const int to = (r + d) % n;
      sends[d - d0] = t.isend(to, send(to), tg);
    }
    const phase_name ph{what, round, rounds};
    for (int d = d0; d < d1; ++d) wait_in_phase(t, recvs[d - d0], c, ph);
    for (int d = d0; d < d1; ++d) wait_in_phase(t, sends[d - d0], c, ph);
  }
}

/// Every rank sends the `bytes` at `table + rank * bytes` to every other rank;
/// peer p's arrive at `table + p * bytes` (`table` may be null when `bytes`
/// is 0: a barrier).
template <class Transport>
void exchange_with_all(Transport& t, std::byte* table, std::size_t bytes, const call_context& c, tag tg,
                       const char* what) {
  auto at = [&](int rank) { return table ? table + static_cast<std::size_t>(rank) * bytes : nullptr; };
  exchange_parts(
      t, [&](int) { return const_bytes{at(t.rank()), bytes}; }, [&](int p) { return mutable_bytes{at(p), bytes}; },
      c, tg, what);
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
