#pragma once
/// \file
/// An event count: cheap to signal, and a waiter that spins briefly, then
/// yields, then sleeps. On an oversubscribed machine (more ranks than cores)
/// a rank that busy-waits steals the core its peer needs, so waiters give the
/// core up quickly.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ddl {
namespace detail {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class event_count {
 public:
  /// Ticket to pass to `wait`; read it *before* checking the condition.
  std::uint64_t prepare() const noexcept { return seq_.load(std::memory_order_acquire); }

  /// Wakes every waiter.
  void notify() {
    seq_.fetch_add(1, std::memory_order_acq_rel);
    if (waiters_.load(std::memory_order_acquire) > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      cv_.notify_all();
    }
  }

  /// Wakes every waiter, if one sleeps: a fence and a load when none does.
  /// Pairs with `wait_for`, whose waiters look at their condition again
  /// after they count themselves (a `wait` with a ticket taken before this
  /// call may sleep on to its limit).
  void notify_waiters() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_relaxed) > 0) notify();
  }

  /// Sleeps until `ready()` holds (looked at after this waiter is counted,
  /// so a `notify_waiters` after the condition was made true is not
  /// missed), `notify` is called, or `until`, whichever first.
  template <class Ready>
  void wait_for(Ready&& ready, std::chrono::steady_clock::time_point until) {
    std::unique_lock<std::mutex> lock(mutex_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const std::uint64_t ticket = seq_.load(std::memory_order_acquire);
    cv_.wait_until(lock, until, [&] { return seq_.load(std::memory_order_acquire) != ticket || ready(); });
    waiters_.fetch_sub(1, std::memory_order_acq_rel);
  }

  /// Sleeps until `notify` has been called since `ticket` was taken, or
  /// until `until` (whichever first). Returns at once if already notified.
  void wait(std::uint64_t ticket, std::chrono::steady_clock::time_point until) {
    std::unique_lock<std::mutex> lock(mutex_);
    waiters_.fetch_add(1, std::memory_order_acq_rel);
    cv_.wait_until(lock, until, [&] { return seq_.load(std::memory_order_acquire) != ticket; });
    waiters_.fetch_sub(1, std::memory_order_acq_rel);
  }

 private:
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

/// Escalating back-off for one wait loop: pause, then yield, then sleep on
/// the event count (bounded, so deadlines are still checked).
class backoff {
 public:
  backoff() = default;
  /// `spin` rounds of pausing, then `yield` rounds of yielding, then sleeps.
  backoff(unsigned spin, unsigned yield) noexcept : spin_rounds_(spin), yield_rounds_(yield) {}

  /// One round of a wait on `ev` with a ticket (`event_count::prepare`).
  void operator()(event_count& ev, std::uint64_t ticket, std::chrono::steady_clock::time_point deadline) {
    if (!young()) ev.wait(ticket, nap_until(deadline));
  }
  /// The same, sleeping on `ev` until `ready()` holds (`event_count::wait_for`,
  /// woken by `notify_waiters`): nothing is read from `ev` until then.
  template <class Ready>
  void operator()(event_count& ev, Ready&& ready, std::chrono::steady_clock::time_point deadline) {
    sleep_with([&](std::chrono::steady_clock::time_point until) { ev.wait_for(ready, until); }, deadline);
  }
  /// The same through another doorbell: `sleep(until)` sleeps until it
  /// rings or `until` (2 ms on at most, or `deadline`).
  template <class Sleep>
  void sleep_with(Sleep&& sleep, std::chrono::steady_clock::time_point deadline) {
    if (!young()) sleep(nap_until(deadline));
  }
  /// Without a doorbell (polling another layer): spin, yield, then sleep
  /// 20 us, and 200 us once the wait has been long.
  void pause() {
    if (!young()) std::this_thread::sleep_for(std::chrono::microseconds(round_ < 4096 ? 20 : 200));
  }
  void reset() noexcept { round_ = 0; }

  static constexpr unsigned spin_rounds = 32;
  static constexpr unsigned yield_rounds = 256;
  /// A wait on a counter in a peer's stage (the transports' `wait_until`):
  /// where ranks outnumber the cores (`crowded`), no spinning and
  /// `crowded_yield_rounds` yields before the sleep: the peer being waited
  /// for may need the core, and beside a busy process each yield can cost a
  /// scheduler tick (448 yields made a small call take milliseconds); else
  /// `spin_rounds` and 448.
  static backoff stage_wait(bool crowded) noexcept {
    return crowded ? backoff(0, crowded_yield_rounds) : backoff(spin_rounds, 448);
  }
  static constexpr unsigned crowded_yield_rounds = 32;

 private:
  // One round: pauses the core or yields it while the wait is young (true),
  // else leaves the sleeping to the caller (false).
  bool young() {
    ++round_;
    if (round_ < spin_rounds_) {
      cpu_relax();
      return true;
    }
    if (round_ < spin_rounds_ + yield_rounds_) {
      std::this_thread::yield();
      return true;
    }
    return false;
  }
  // A sleep's end: 2 ms from now (so deadlines are still checked), or `deadline`.
  static std::chrono::steady_clock::time_point nap_until(std::chrono::steady_clock::time_point deadline) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    return until > deadline ? deadline : until;
  }
  unsigned spin_rounds_ = spin_rounds, yield_rounds_ = yield_rounds;
  unsigned round_ = 0;
};

}  // namespace detail
}  // namespace ddl
