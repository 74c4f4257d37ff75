#pragma once
/// \file
/// The progress engine's workers (`comm/progress.hpp`): the background
/// thread's loop, which never spins, runs the queue once a collective is
/// ripe, looks at parked transfers on a doubling period and dozes when
/// nothing comes; and the worker as a fiber of the rank on transports whose
/// ranks are fibers (the simulator).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "ddl/comm/progress.hpp"

namespace ddl::detail {

// The worker never spins (on an oversubscribed machine a spinning worker
// takes the core a rank needs) and runs everything queued once it holds
// `busy_`.
inline void progress_engine::work() {
  auto last_work = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration look = parked_look_min;
  auto next_look = last_work;
  for (;;) {
    const auto ticket = work_bell_.prepare();
    const auto now = std::chrono::steady_clock::now();
    auto wake = now + poll;
    bool ripe = false, empty = true;
    const bool parked = parked_count_.load(std::memory_order_acquire) > 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_ && queue_.empty() && !parked) return;
      if (!queue_.empty()) {
        empty = false;
        const auto due = queue_.front()->submitted + grace;
        ripe = stop_ || now >= due;
        if (!ripe) wake = due;
      }
    }
    if (parked && now >= next_look && !busy_.exchange(true, std::memory_order_acquire)) {
      // Parked transfers: looked at every `look` (20 us after one moved,
      // doubling to 1 ms while none does), the queue run first when ripe.
      while (ripe) {
        auto op = pop();
        if (!op) break;
        run_one(op);
        done_bell_.notify();
      }
      look = poll_parked() || parked_count_.load(std::memory_order_acquire) == 0
                 ? parked_look_min
                 : std::min<std::chrono::steady_clock::duration>(2 * look, parked_look_max);
      busy_.store(false, std::memory_order_release);
      // A caller waiting for a transfer still parked polls it itself now
      // (it sleeps on done_bell_ while the worker holds busy_).
      if (parked_count_.load(std::memory_order_acquire) > 0) done_bell_.notify();
      last_work = std::chrono::steady_clock::now();
      next_look = last_work + look;
      continue;  // then waits below until the next look or the queue is ripe
    }
    if (ripe && !busy_.exchange(true, std::memory_order_acquire)) {
      while (auto op = pop()) {
        run_one(op);
        done_bell_.notify();
      }
      busy_.store(false, std::memory_order_release);
      if (parked_count_.load(std::memory_order_acquire) > 0) done_bell_.notify();  // as above
      last_work = std::chrono::steady_clock::now();
      continue;  // re-check: an op queued while we released is ours again
    }
    if (parked) wake = std::min(wake, next_look);
    if (!empty) last_work = now;
    // While a caller runs collectives itself, look again only every
    // `busy_poll` (a caller that leaves queued work behind rings
    // work_bell_; transfers it leaves parked wait for that look);
    // polling then would only take the core it needs.
    if (busy_.load(std::memory_order_acquire)) {
      work_bell_.wait(ticket, now + busy_poll);
      continue;
    }
    // Doze until a submit wakes us when nothing happened for a while.
    if (empty && !parked && now - last_work > doze_after) {
      dozing_.store(true, std::memory_order_release);
      // re-check after announcing, so a submit in between is not missed
      bool queued = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        queued = !queue_.empty() || stop_ || parked_count_.load(std::memory_order_acquire) > 0;
      }
      if (!queued) work_bell_.wait(ticket, now + std::chrono::seconds(1));
      dozing_.store(false, std::memory_order_release);
      last_work = std::chrono::steady_clock::now();
      continue;
    }
    // Polling; a waiting caller that ran the queue rings work_bell_ when done.
    work_bell_.wait(ticket, wake);
  }
}

// --- the worker as a fiber (`fibers_` set) ---------------------------------
// Fibers of one rank share one thread and switch only when one suspends, so
// their state needs no lock; `busy_` still says who runs the queue.

inline bool progress_engine::queue_empty() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty();
}

// Suspends the running fiber until the queue's runner finishes an operation.
inline void progress_engine::suspend_until_done() {
  done_waiters_.push_back(fibers_->current());
  fibers_->suspend();
}

inline void progress_engine::resume_done_waiters() {
  auto waiters = std::move(done_waiters_);
  done_waiters_.clear();
  for (int f : waiters) fibers_->resume(f);
}

// Runs the queue up to `target` (all of it for nullptr) on this fiber.
inline void progress_engine::fiber_run(async_op* target) {
  busy_.store(true, std::memory_order_relaxed);
  while (!target || !target->done.load(std::memory_order_acquire)) {
    if (auto op = pop()) {
      run_one(op);
    } else if (parked_.empty()) {
      break;
    } else if (!poll_parked()) {
      fibers_->yield();  // lets the peers' fibers, and virtual time, move
    }
    resume_done_waiters();
  }
  busy_.store(false, std::memory_order_relaxed);
  resume_done_waiters();
  if (worker_idle_ && !queue_empty()) fibers_->resume(worker_fiber_);
}

// Waits for `target` (everything for nullptr): runs the queue here while
// the worker does not; a deadline is checked on the real clock between
// the worker's operations.
inline bool progress_engine::fiber_wait(async_op* target, deadline until) noexcept {
  for (;;) {
    if (target ? target->done.load(std::memory_order_acquire) : idle()) return true;
    if (!busy_.load(std::memory_order_relaxed)) {
      fiber_run(target);
      continue;
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    suspend_until_done();
  }
}

inline void progress_engine::fiber_work() {
  for (;;) {
    const bool empty = queue_empty() && parked_.empty();
    if (stop_ && empty) break;
    if (!empty && !busy_.load(std::memory_order_relaxed)) {
      fiber_run(nullptr);
      continue;
    }
    worker_idle_ = true;
    fibers_->suspend();
    worker_idle_ = false;
  }
  worker_exited_ = true;
  resume_done_waiters();
}

}  // namespace ddl::detail
