#pragma once
/// \file
/// `cuda_peer_transport`'s flagged calls: collectives with no message.
///
/// A one_shot call of at most `flagged_bytes` sends no message at all:
/// one kernel per rank (a block per 4 KiB, up to 16) copies its input into
/// a slot of the rank's flag region, raises a counter there, spins on its
/// peers' counters and reduces their slots (`flagged_all_reduce`; ranks of
/// one fabric on one device or with peer access, at most
/// `cuda::kernels::many_max`; `DDL_CUDA_FLAGGED=0` turns it off).
///
/// The ranks' threads meet on the host before the launch (where they
/// compare the calls' stamps) and after it, so every rank's kernel is
/// queued before any rank returns: a spinning kernel never waits for a
/// peer whose thread is stuck in a call that waits for the whole device
/// (`cudaFree`; kernels launched unmet deadlocked until the deadline).
///
/// A two_shot all-reduce of any size goes the same way
/// (`flagged_two_shot`): the threads meet and trade their buffers'
/// addresses, and one kernel per rank (the ranks of a device share two
/// blocks per multiprocessor, so that all are resident at once) reduces its
/// block of every input where it lies and gathers the other reduced blocks,
/// the kernels meeting three times through counters in the flag regions;
/// its reduce-scatter and all-gather keep the messages. A rank that enters
/// another collective (by messages) meanwhile is found at the deadline,
/// not at once as between messages' stamps.
#if !defined(__CUDACC__)
#error "ddl/cuda/peer_flagged.hpp: compile this translation unit with nvcc (CMake: set its LANGUAGE to CUDA)"
#endif
#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

#include "ddl/cuda/peer_fabric.hpp"
#include "ddl/transport/threads.hpp"

namespace ddl {

inline void cuda_peer_transport::check_flagged() const {
  const volatile unsigned long long* e = fab_->err_of(rank_);
  const unsigned long long code = e[0];
  if (code == 0) return;
  if (code == 3) throw transport_error("cuda_peer_transport: a call through the flag regions: " + fab_->abort_reason_);
  throw timeout_error(static_cast<int>(e[1]), "a flagged call (one_shot, two_shot): the peer's kernel", "all_reduce",
                      0.0);
}

// Marks this rank at `at` and waits until every rank has come that far
// (`timeout_error` naming the first missing one at `until`; an abort ends it).
inline void cuda_peer_transport::meet(std::uint64_t at, std::chrono::steady_clock::time_point until, const char* why) {
  auto* seats = fab_->seats_.get();
  seats[rank_].at.store(at, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  detail::backoff b;
  for (int p = 0; p < size(); ++p) {
    while (seats[p].at.load(std::memory_order_acquire) < at) {
      if (fab_->aborted_.load(std::memory_order_acquire)) throw transport_error(fab_->abort_reason_);
      const auto now = std::chrono::steady_clock::now();
      if (now >= until)
        throw timeout_error(p, why, "all_reduce", std::chrono::duration<double>(now - start).count());
      b.pause();
    }
  }
}

// A flagged call's start, shared by one_shot's and two_shot's: errors found
// earlier, then the meeting where every rank is in this call with the same
// call (strategy, stamp, bytes) and has posted its buffers. Returns the
// rank's flagged call number k (the meetings at 2k - 1 and 2k), the call's
// deadline `timeout` from now, and what its kernel reports errors through.
inline cuda_peer_transport::flagged_call cuda_peer_transport::enter_flagged(const char* kind, const std::byte* in,
                                                                            std::byte* out, std::size_t bytes,
                                                                            std::size_t limit, tag stamp,
                                                                            std::chrono::nanoseconds timeout) {
  flagged_call call;
  call.until = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  call.err = fab_->err_of(rank_);
  call.ns = static_cast<unsigned long long>(timeout.count() > 0 ? timeout.count() : 0);
  const auto until = call.until;
  check_flagged();
  if (fab_->aborted_.load(std::memory_order_acquire)) throw transport_error(fab_->abort_reason_);
  auto what = [&] { return std::string("cuda_peer_transport: ") + kind + " through the flag regions: "; };
  if (!fab_->flagged_)
    throw invalid_argument(what() + "this fabric has none (devices without peer access, more than " +
                           std::to_string(cuda::kernels::many_max) + " ranks, or DDL_CUDA_FLAGGED=0)");
  if (bytes > limit)
    throw invalid_argument(what() + std::to_string(bytes) + " bytes; they take at most " + std::to_string(limit));
  auto* seats = fab_->seats_.get();
  cuda_peer_fabric::seat& me = seats[rank_];
  const std::uint64_t k = call.k = ++me.calls;
  me.bytes = bytes;
  me.stamp = stamp;
  me.kind = kind;
  me.in = in;
  me.out = out;
  meet(2 * k - 1, until, "flagged call: peers entering the call");
  for (int p = 0; p < size(); ++p) {
    const cuda_peer_fabric::seat& them = seats[p];
    const bool same_kind = std::strcmp(them.kind, kind) == 0;
    if (them.stamp == stamp && them.bytes == bytes && same_kind) continue;
    if (!same_kind)
      throw mismatch_error(what() + detail::mismatch_words + detail::describe_tag(stamp) + ": rank " +
                           std::to_string(rank_) + " runs " + kind + ", rank " + std::to_string(p) + " " + them.kind);
    if (detail::stamps_disagree(stamp, them.stamp) || them.bytes == bytes)
      throw mismatch_error(what() + detail::stamp_mismatch(rank_, stamp, p, them.stamp));
    throw mismatch_error(what() + detail::mismatch_words + detail::describe_tag(stamp) +
                         ": ranks disagree on the input count: rank " + std::to_string(rank_) + " passed " +
                         std::to_string(bytes) + " bytes, rank " + std::to_string(p) + " " +
                         std::to_string(them.bytes));
  }
  return call;
}

inline void cuda_peer_transport::flagged_all_reduce(const std::byte* in, std::byte* out, std::size_t count,
                                                    reduction red, tag stamp, std::chrono::nanoseconds timeout) {
  const std::size_t bytes = count * size_of(red.type);
  const flagged_call call = enter_flagged("one_shot", in, out, bytes, flagged_bytes, stamp, timeout);
  // A block per `one_shot_bytes_per_block`, no more than fit with the
  // other ranks' (`two_shot_blocks_`, of larger blocks) or one_shot's cap.
  const auto wanted = static_cast<unsigned>((bytes + cuda::kernels::one_shot_bytes_per_block - 1) /
                                            cuda::kernels::one_shot_bytes_per_block);
  const unsigned blocks =
      std::max(1u, std::min({wanted, cuda::kernels::one_shot_max_blocks, fab_->two_shot_blocks_}));
  const std::uint64_t target = fab_->seats_[static_cast<std::size_t>(rank_)].one_shot_blocks += blocks;
  const int n = size();
  visit_dtype(red.type, [&](auto tg) {
    using T = decltype(tg);
    visit_op(red.oper, [&](auto f) {
      cuda::kernels::flagged_all_reduce<T><<<blocks, cuda::kernels::one_shot_threads, 0, ctx_.stream>>>(
          reinterpret_cast<T*>(out), reinterpret_cast<const T*>(in), count, fab_->regions_, n, rank_, call.k, target,
          call.ns, reinterpret_cast<const volatile int*>(fab_->host_words_), call.err, red.oper == op::avg, f);
    });
  });
  DDL_CUDA_CHECK(cudaGetLastError());
  // Meet again: no rank returns (to a call that may wait for the whole
  // device) before every rank's kernel is queued.
  meet(2 * call.k, call.until, "flagged call: peers launching");
}

inline void cuda_peer_transport::flagged_two_shot(const std::byte* in, std::byte* out, std::size_t count,
                                                  reduction red, tag stamp, std::chrono::nanoseconds timeout) {
  const std::size_t es = size_of(red.type);
  const flagged_call call = enter_flagged("two_shot", in, out, count * es, ~std::size_t{0}, stamp, timeout);
  const std::uint64_t calls = ++fab_->seats_[static_cast<std::size_t>(rank_)].two_shot_calls;
  const int n = size();
  cuda::kernels::peer_buffers b{};
  std::uintptr_t bits = 0;
  for (int p = 0; p < n; ++p) {
    const auto& them = fab_->seats_[static_cast<std::size_t>(p)];
    b.in[p] = them.in;
    b.out[p] = them.out;
    bits |= reinterpret_cast<std::uintptr_t>(them.in) | reinterpret_cast<std::uintptr_t>(them.out);
  }
  // Rank r's block: [r piece, (r + 1) piece), piece a multiple of 16
  // elements so the blocks keep 16-byte vectors whole.
  std::size_t piece = (count + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
  piece = (piece + 15) / 16 * 16;
  visit_dtype(red.type, [&](auto tg) {
    using T = decltype(tg);
    visit_op(red.oper, [&](auto f) {
      cuda::kernels::flagged_two_shot<T>
          <<<fab_->two_shot_blocks_, cuda::kernels::two_shot_threads, 0, ctx_.stream>>>(
              b, count, piece, fab_->regions_, n, rank_, calls, call.ns,
              reinterpret_cast<const volatile int*>(fab_->host_words_), call.err, red.oper == op::avg,
              bits % 16 == 0, f);
    });
  });
  DDL_CUDA_CHECK(cudaGetLastError());
  meet(2 * call.k, call.until, "flagged call: peers launching");
}

}  // namespace ddl
