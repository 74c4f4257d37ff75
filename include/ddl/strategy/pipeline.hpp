#pragma once
/// \file
/// Pipelined programs: a collective cut into K segments, each a program of P
/// stages (steps, local copies, a finalize), run so that different
/// segments' stages are in flight at once. The multi-ring pipelined across
/// levels (`multi_ring.hpp`, past the paper's §4.3) is built on it: while
/// segment k crosses racks, segment k+1 reduce-scatters inside its node.
///
/// Each stage keeps its own tag (`tag_offset::pipelined(i)`); messages of one
/// stage between two ranks are sent and received in segment order, so they
/// match in order. Nothing blocks: each stage's chunks are posted and
/// completed by `test` as the transport lets them (`can_pipeline_v`).
///
/// Deadlock freedom: order every operation by (k + i, i, chunk); each
/// operation's start depends only on operations earlier in that order on
/// its own rank, and its counterpart on the peer has the same key, so the
/// earliest unfinished operation in the whole group always has its
/// counterpart posted and completes.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "ddl/detail/event.hpp"
#include "ddl/core/error.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {

/// Stages a pipelined program may have (its tags sit past the multi-ring's).
inline constexpr std::size_t max_pipeline_stages = 190;
/// Chunks a pipelined call keeps in flight per direction, over all its
/// running stages (`local_transport::max_in_flight` receives is 32); and so
/// the most segments it runs.
inline constexpr int max_pipeline_chunks = 24;

/// One stage of a segment's program: a step (peers in the transport's
/// numbering), a local copy or the finalize.
struct pipeline_stage {
  enum class kind : std::uint8_t { step, copy, finalize } what = kind::step;
  step_desc d;              // step
  phase_name ph{"", 0, 1};  // step: for a timeout's message
  std::byte* dst = nullptr; // copy, finalize
  const std::byte* src = nullptr;
  std::size_t bytes = 0;    // copy: bytes; finalize: elements
};

/// Collects a multi-ring's steps as stages (the sink of `emit_*`).
struct collect_stages {
  std::vector<pipeline_stage>* out;
  template <class Group>
  void step(Group& g, const step_desc& d, tag, const phase_name& ph) const {
    pipeline_stage s;
    s.d = d;
    if (d.send_peer >= 0) s.d.send_peer = g.parent_rank(d.send_peer);
    if (d.recv_peer >= 0) s.d.recv_peer = g.parent_rank(d.recv_peer);
    s.ph = ph;
    out->push_back(s);
  }
  void copy(std::byte* dst, const std::byte* src, std::size_t bytes) const {
    pipeline_stage s;
    s.what = pipeline_stage::kind::copy;
    s.dst = dst;
    s.src = src;
    s.bytes = bytes;
    out->push_back(s);
  }
  void finalize(std::byte* data, std::size_t count) const {
    pipeline_stage s;
    s.what = pipeline_stage::kind::finalize;
    s.dst = data;
    s.bytes = count;
    out->push_back(s);
  }
};

/// Whether transport `T` runs pipelined programs: it completes requests
/// without blocking, is not ordered by a device stream, and takes host
/// memory only (device buffers have not run this path on a GPU yet).
template <class T>
inline constexpr bool can_pipeline_v = has_test_v<T> && !is_stream_ordered_v<T> && !accepts_device_memory_v<T>;

/// Segments a pipelined all-reduce of `count` elements over `n` ranks runs:
/// at most `segments` (and `max_pipeline_chunks`), each at least `n` elements.
inline int pipeline_segments(int segments, std::size_t count, int n) {
  const std::size_t most = std::min<std::size_t>(count / static_cast<std::size_t>(n), max_pipeline_chunks);
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(segments), most)));
}

/// Runs `prog` (one program per segment, every program the same number P
/// of stages, at most `max_pipeline_stages`) as a pipeline: segment k starts
/// stage i once it has finished stage i-1 and segment k-1 has finished stage
/// i. Stage i's messages take tag `c.base_tag + tag_offset::pipelined(i)`.
/// Without a fused receive-and-reduce, a step's chunks land in `c.work` at
/// the offset its receive has from `base` (so `c.work` mirrors the buffer
/// the programs write). Nothing blocks; with no progress for `c.opts->timeout`
/// it throws `timeout_error` naming the awaited peer and the stage.
template <class Transport>
void run_pipelined(Transport& t, const std::vector<std::vector<pipeline_stage>>& prog, const std::byte* base,
                   const call_context& c) {
  static_assert(can_pipeline_v<Transport>, "ddl: run_pipelined needs a transport with test (host memory, not stream-ordered)");
  const int K = static_cast<int>(prog.size());
  if (K == 0) return;
  const std::size_t P = prog[0].size();
  int steps = 0;
  for (const auto& s : prog[0]) steps += s.what == pipeline_stage::kind::step;
  if (P > max_pipeline_stages)
    throw invalid_argument("internal: a pipelined program has " + std::to_string(P) + " stages (at most " +
                           std::to_string(max_pipeline_stages) + ")");
  if (!has_fused_reduce_v<Transport> && steps > 0 && !c.work)
    throw invalid_argument("internal: a pipelined program needs a workspace the size of its buffer");
  // At most min(K, steps) stages run at once (one per segment); their
  // windows share `max_pipeline_chunks`.
  const int running_at_most = std::max(1, std::min(K, steps));
  const std::size_t depth = std::max<std::size_t>(
      1, std::min<std::size_t>(c.opts->pipeline_depth, static_cast<std::size_t>(max_pipeline_chunks / running_at_most)));
  const int n = t.size();

  std::vector<std::size_t> at(static_cast<std::size_t>(K), 0);  // next stage of each segment
  std::vector<char> running(static_cast<std::size_t>(K), 0);
  std::vector<step_machine<Transport>> m(static_cast<std::size_t>(K));
  auto last_move = std::chrono::steady_clock::now();
  backoff pause;
  int finished = 0;
  while (finished < K) {
    bool moved = false;
    for (int k = 0; k < K; ++k) {
      const auto ku = static_cast<std::size_t>(k);
      // Start the segment's next stage once the segment before has left it.
      while (!running[ku] && at[ku] < P && (k == 0 || at[ku - 1] > at[ku])) {
        const pipeline_stage& s = prog[ku][at[ku]];
        moved = true;
        if (s.what == pipeline_stage::kind::copy) {
          local_copy(c, s.dst, s.src, s.bytes);
        } else if (s.what == pipeline_stage::kind::finalize) {
          local_finalize(c, s.dst, s.bytes, n);
        } else {
          std::byte* landing = c.work && s.d.recv ? c.work + (s.d.recv - base) : nullptr;
          m[ku].start(t, s.d, c.base_tag + tag_offset::pipelined(static_cast<int>(at[ku])), landing, true, depth, c);
          running[ku] = 1;
          break;
        }
        if (++at[ku] == P) ++finished;
      }
      if (running[ku]) {
        moved |= m[ku].advance(t);
        if (m[ku].done()) {
          running[ku] = 0;
          moved = true;
          if (++at[ku] == P) ++finished;
        }
      }
    }
    if (moved) {
      last_move = std::chrono::steady_clock::now();
      pause.reset();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_move >= c.opts->timeout) {
      for (int k = 0; k < K; ++k) {
        const auto ku = static_cast<std::size_t>(k);
        if (!running[ku]) continue;
        throw timeout_error(m[ku].waiting_for(),
                            std::string(c.strategy) + " pipelined " + prog[ku][at[ku]].ph.str() + " (stage " +
                                std::to_string(at[ku] + 1) + "/" + std::to_string(P) + ", segment " +
                                std::to_string(k + 1) + "/" + std::to_string(K) + ")",
                            c.collective, std::chrono::duration<double>(now - last_move).count());
      }
    }
    if constexpr (has_await_progress_v<Transport>) t.await_progress();
    else pause.pause();
  }
}

}  // namespace detail
}  // namespace ddl
