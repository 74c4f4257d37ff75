#pragma once
/// \file
/// Ranks as threads of one process: the rank runner every thread-per-rank
/// fabric uses (`local_fabric`, `cuda_peer_fabric`), and a barrier for the
/// rank threads of a program or benchmark.
///
/// The runner's rule on failure, the same for every such fabric: the first
/// rank to throw (in time) is the failure. The fabric is told at once
/// (`on_failure(rank, what)`), so the other ranks' waits throw
/// `transport_error("... rank k failed: <what>")` instead of running out
/// their deadlines, and after all threads have joined the first rank's own
/// exception, with its own type, is rethrown to the caller, never one of the
/// aborts it caused.
#include <atomic>
#include <cstddef>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace ddl {

/// A reusable barrier for `n` threads (yields while waiting, so it suits
/// more rank threads than cores). Example:
/// \code
///   ddl::thread_barrier bar(4);
///   ddl::local_fabric::run(4, [&](ddl::local_transport& t) {
///     bar.arrive_and_wait();   // every rank here before any goes on
///   });
/// \endcode
class thread_barrier {
 public:
  explicit thread_barrier(int n) : n_(n) {}
  thread_barrier(const thread_barrier&) = delete;
  thread_barrier& operator=(const thread_barrier&) = delete;

  void arrive_and_wait() {
    const int gen = generation_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
    } else {
      while (generation_.load(std::memory_order_acquire) == gen) std::this_thread::yield();
    }
  }

 private:
  int n_;
  std::atomic<int> count_{0};
  std::atomic<int> generation_{0};
};

namespace detail {

/// The message of an exception, or "unknown exception".
inline std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

/// Runs `body(r)` for r in [0, n) on n threads and joins them. The first rank
/// to throw calls `on_failure(r, what)` (once per run; the fabric makes the
/// other ranks' waits fail fast) and its exception is rethrown here after
/// every thread has joined.
template <class Body, class OnFailure>
void run_rank_threads(int n, Body&& body, OnFailure&& on_failure) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::atomic<int> first{-1};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        int none = -1;
        if (first.compare_exchange_strong(none, r, std::memory_order_acq_rel))
          on_failure(r, what_of(errors[static_cast<std::size_t>(r)]));
      }
    });
  for (auto& th : threads) th.join();
  const int f = first.load(std::memory_order_acquire);
  if (f >= 0) std::rethrow_exception(errors[static_cast<std::size_t>(f)]);
}

}  // namespace detail
}  // namespace ddl
