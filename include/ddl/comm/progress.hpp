#pragma once
/// \file
/// The progress engine behind asynchronous collectives, and the request a
/// caller holds for one of them.
///
/// A communicator's collectives run one at a time, in the order they were
/// issued (so every rank runs them in the same order, as MPI requires), on
/// one of two engines:
///   - `progress::thread`: a background thread per communicator runs the
///     queued collectives while the caller computes (S-Caffe's overlap). A
///     blocking call issued while the queue is non-empty is queued behind it,
///     and one issued while it is empty runs on the caller's thread at no
///     extra cost; a caller that waits (without a deadline) for a collective
///     the worker has not started runs it itself rather than wake the worker.
///     Only one thread touches the transport at any moment (`busy_`).
///     On a transport whose ranks are fibers (`transport/cooperative.hpp`,
///     the simulator) the worker is a fiber of the rank instead of a thread:
///     it runs the queue whenever the rank's own fiber is suspended (in a
///     wait, or in `sim_transport::compute`), so collectives overlap the
///     rank's work in virtual time.
///   - `progress::deferred`: nothing runs in the background; a request's
///     `test` and `wait` run the queue up to it on the caller's thread. For
///     transports that must stay on the caller's thread (an MPI initialised
///     below `MPI_THREAD_SERIALIZED`, CUDA devices bound per thread).
///
/// A point-to-point transfer (the communicator's `send_async`/`recv_async`)
/// takes its place in the queue like a collective, but only *starts* there
/// (its `run` posts it to the transport): it is then parked, later
/// operations run while it waits for its peer, and whoever runs the queue
/// polls it (`async_op::poll`) until it completes. So a rank's sends and
/// receives are posted in issue order (messages between two ranks match in
/// that order) and a receive waiting for a message that a later collective
/// of the peer precedes does not hold this rank's queue. With
/// `progress::thread`, a transfer issued while nothing waits in the queue
/// is posted at once on the caller's thread (no queueing, no hand-off).
///
/// Errors (timeouts, a failed peer) are caught on the engine and re-thrown by
/// `wait`, with the types the blocking calls throw.
#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "ddl/core/config.hpp"
#include "ddl/core/error.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/cooperative.hpp"

namespace ddl {

namespace detail {

/// One queued collective (or point-to-point transfer).
struct async_op {
  std::function<void()> run;
  /// Set for an operation that `run` only starts (a transfer posted to the
  /// transport): completes it if it can without blocking, true once done;
  /// throws as `run` would (its own deadline passed: `timeout_error`).
  /// Until then the operation is parked and later ones run. Given the
  /// operation, to note what it learnt (`peer`).
  std::function<bool(async_op&)> poll;
  std::function<void(std::exception_ptr)> on_complete;  ///< optional, called where it ran
  std::chrono::steady_clock::time_point submitted{};
  const char* what = "";  ///< the collective, for messages
  /// A transfer's peer: for a receive from any rank (`recv_any_async`), the
  /// sender, set when it completes (before `done`); -1 for collectives.
  int peer = -1;
  std::atomic<bool> done{false};
  std::exception_ptr error;
};

/// The operation whose completion callback runs on this thread, if any: a
/// request for it dropped inside that callback must not wait for it.
inline async_op*& completing_here() noexcept {
  static thread_local async_op* op = nullptr;
  return op;
}

/// Runs queued operations in order, on a worker thread, a worker fiber, or
/// on demand.
class progress_engine {
 public:
  /// `fibers`: the transport's fiber scheduler; with `progress::thread` the
  /// worker is then a fiber of the calling rank rather than a thread.
  /// `nap`: blocks briefly until a parked transfer may have moved (the
  /// transport's `await_progress`); without it, parked transfers are
  /// polled with a back-off.
  explicit progress_engine(progress mode, cooperative_scheduler* fibers = nullptr, std::function<void()> nap = {})
      : mode_(mode), fibers_(mode == progress::thread ? fibers : nullptr), nap_(std::move(nap)) {
    if (fibers_) worker_fiber_ = fibers_->spawn([this] { fiber_work(); });
    else if (mode_ == progress::thread) worker_ = std::thread([this] { work(); });
  }
  progress_engine(const progress_engine&) = delete;
  progress_engine& operator=(const progress_engine&) = delete;
  /// Finishes every queued operation (their errors stay with their requests),
  /// then stops the worker.
  ~progress_engine() {
    drain_quietly();
    if (fibers_) {
      stop_ = true;
      fibers_->resume(worker_fiber_);
      while (!worker_exited_) suspend_until_done();
    } else if (worker_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
      }
      work_bell_.notify();
      worker_.join();
    }
  }

  progress mode() const noexcept { return mode_; }
  /// True when nothing is queued or running: the caller may use the transport.
  bool idle() const noexcept { return pending_.load(std::memory_order_acquire) == 0; }
  /// True while an operation has not reached its `done`: false as soon as the
  /// last one's waiter can return. (`idle()` turns true a moment later, once
  /// the engine has let go of that operation, so a caller who has waited for
  /// every request may still see `idle()` false for that moment.)
  bool unfinished() const noexcept { return unfinished_.load(std::memory_order_acquire) != 0; }

  /// Runs `job` on the caller's thread. \pre `idle()`: nothing queued. The
  /// worker may still hold `busy_` for a moment after its last operation (it
  /// looks for more before letting go), so this takes `busy_` like everyone
  /// else rather than set it: setting it and clearing it afterwards would
  /// clear the worker's hold, and the worker, still popping, and a stealing
  /// caller could then run two collectives at once (found by ddl-train over
  /// MPI, whose replicas drifted apart).
  template <class Job>
  void run_inline(Job& job) {
    backoff wait_turn;
    while (busy_.exchange(true, std::memory_order_acquire)) {
      if (fibers_) suspend_until_done();
      else wait_turn.pause();
    }
    struct release {
      std::atomic<bool>& b;
      ~release() { b.store(false, std::memory_order_release); }
    } r{busy_};
    job();
  }

  /// Queues `f`; with `poll_started`, an operation that `f` only starts (see
  /// `async_op::poll`).
  std::shared_ptr<async_op> submit(const char* what, std::function<void()> f,
                                   std::function<void(std::exception_ptr)> on_complete = {},
                                   std::function<bool(async_op&)> poll_started = {}) {
    auto op = std::make_shared<async_op>();
    op->run = std::move(f);
    op->poll = std::move(poll_started);
    op->on_complete = std::move(on_complete);
    op->what = what;
    return submit(std::move(op));
  }
  /// Queues `op`, its `run` (and `poll`, `on_complete`, `what`) set by the
  /// caller (a transfer keeps its state in a type derived from `async_op`:
  /// one allocation a call). With `progress::thread`, a transfer (`poll`
  /// set) submitted while nothing waits in the queue starts here at once
  /// (`start_here`; a deferred engine's queue is run by its waits, which
  /// hold no lock against a submit).
  std::shared_ptr<async_op> submit(std::shared_ptr<async_op> op) {
    pending_.fetch_add(1, std::memory_order_acq_rel);
    unfinished_.fetch_add(1, std::memory_order_acq_rel);
    if (op->poll && mode_ == progress::thread && !fibers_ && start_here(op)) return op;
    op->submitted = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(op);
    }
    // A polling worker finds it within `poll`; only a dozing one is woken
    // (a wake-up per call would preempt the ranks on an oversubscribed machine).
    if (fibers_) {
      if (worker_idle_) fibers_->resume(worker_fiber_);
    } else if (mode_ == progress::thread && dozing_.load(std::memory_order_acquire)) {
      work_bell_.notify();
    }
    return op;
  }

  /// True once `op` has finished (deferred: runs the queue up to it first,
  /// and polls the parked transfers once).
  bool test(async_op& op) {
    if (mode_ == progress::deferred && !op.done.load(std::memory_order_acquire)) run_until(&op, false);
    // A fiber polling in a loop must let the worker and the clock move.
    if (fibers_ && !op.done.load(std::memory_order_acquire)) fibers_->yield();
    return op.done.load(std::memory_order_acquire);
  }

  /// Waits for `op` until `until`; false if it is still running then. An
  /// unbounded wait on an operation the worker has not started runs the
  /// queue up to it on the caller's thread instead (no hand-off latency);
  /// a bounded one never does, so it can return at its deadline.
  bool wait(async_op& op, deadline until) {
    const bool unbounded = until == std::chrono::steady_clock::time_point::max();
    if (mode_ == progress::deferred) {
      if (unbounded) run_until(&op);
      for (backoff nap = parked_backoff(); !test(op); rest(nap))
        if (std::chrono::steady_clock::now() >= until) return false;
      return true;
    }
    if (fibers_) return fiber_wait(&op, until);
    backoff wait_more;
    for (;;) {
      const auto ticket = done_bell_.prepare();
      if (op.done.load(std::memory_order_acquire)) return true;
      if (unbounded && try_run_until(&op)) continue;
      if (std::chrono::steady_clock::now() >= until) return false;
      wait_more(done_bell_, ticket, until);
    }
  }

  /// Waits for everything queued so far; errors stay with their requests.
  void drain_quietly() noexcept {
    if (mode_ == progress::deferred) {
      run_until(nullptr);
      return;
    }
    if (fibers_) {
      fiber_wait(nullptr, std::chrono::steady_clock::time_point::max());
      return;
    }
    backoff wait_more;
    const auto forever = std::chrono::steady_clock::time_point::max();
    for (;;) {
      const auto ticket = done_bell_.prepare();
      if (idle()) return;
      if (try_run_until(nullptr)) continue;
      wait_more(done_bell_, ticket, forever);
    }
  }

 private:
  // A transfer submitted while no operation waits in the queue or runs (every
  // one issued before it has finished or is parked: `pending_` counts only
  // those and `op`) is posted to the transport on the caller's thread at
  // once, as `MPI_Isend` would be, and parked if it has not completed: issue
  // order is kept, and the call costs no queueing, no hand-off and no wait
  // for a turn (queued, a ring shift of two MPI ranks took several times
  // `MPI_Sendrecv`'s time). False, with nothing done, when someone else
  // runs operations now or one waits: `op` is then queued as any other.
  bool start_here(const std::shared_ptr<async_op>& op) noexcept {
    if (busy_.exchange(true, std::memory_order_acquire)) return false;
    // Under `busy_` no one else pops, runs or parks; a concurrent submit
    // counted here first only makes this one queue (their order is open).
    const bool clear = pending_.load(std::memory_order_acquire) == parked_count_.load(std::memory_order_acquire) + 1;
    if (clear) run_one(op);
    busy_.store(false, std::memory_order_release);
    if (!clear) return false;
    done_bell_.notify();  // a caller that found `busy_` held looks again
    // Left parked: polled by its waiter, or by the worker, which is woken
    // only from a doze (as `try_run_until` does; awake, it finds it within
    // `busy_poll`).
    if (parked_count_.load(std::memory_order_acquire) > 0) {
      bool dozing = false, left = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        dozing = dozing_.load(std::memory_order_acquire);
        left = !queue_.empty();
      }
      if (dozing || left) work_bell_.notify();
    }
    return true;
  }
  // Runs `op`: true once it has finished, false when it only started (a
  // transfer, now to be parked; `poll` finishes it).
  bool start(async_op& op) noexcept {
    try {
      op.run();
    } catch (...) {
      op.error = std::current_exception();
    }
    if (!op.error && op.poll && !polled(op)) return false;
    finish(op);
    return true;
  }
  // One look at a started transfer: true once it is done (or has failed).
  static bool polled(async_op& op) noexcept {
    try {
      return op.poll(op);
    } catch (...) {
      op.error = std::current_exception();
      return true;
    }
  }
  void finish(async_op& op) noexcept {
    // The closures die only after `done` is set: the last reference to the
    // request's owner may live in one of them, and its destructor waits for
    // this very operation. `unfinished_` is left before `done` is set, so a
    // caller whose wait has returned sees the count without it; `pending_`
    // after, by the caller (a caller that sees idle() also sees `done`).
    auto run = std::move(op.run);
    auto poller = std::move(op.poll);
    auto on_complete = std::move(op.on_complete);
    if (on_complete) {
      completing_here() = &op;
      try {
        on_complete(op.error);
      } catch (...) {
        if (!op.error) op.error = std::current_exception();
      }
      completing_here() = nullptr;
    }
    unfinished_.fetch_sub(1, std::memory_order_acq_rel);
    op.done.store(true, std::memory_order_release);
  }

  std::shared_ptr<async_op> pop() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return nullptr;
    auto op = std::move(queue_.front());
    queue_.pop_front();
    return op;
  }

  // Runs the queue up to `target` here if no one else is running it.
  bool try_run_until(async_op* target) noexcept {
    if (busy_.exchange(true, std::memory_order_acquire)) return false;
    run_until(target);
    busy_.store(false, std::memory_order_release);
    done_bell_.notify();
    // Nothing queued or parked (the usual end of a wait): nothing to hand on.
    const auto parked_now = parked_count_.load(std::memory_order_acquire);
    if (parked_now == 0 && pending_.load(std::memory_order_acquire) == 0) return true;
    bool left = false, dozing = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      left = !queue_.empty();
      dozing = dozing_.load(std::memory_order_acquire);
    }
    // The worker resumes what is left: the queue, or transfers still parked.
    // For those it is woken only from a doze (having found none parked
    // before this caller parked one); awake, it finds them within
    // `busy_poll`. A wake-up per call would cost the caller what it saves:
    // the worker would take the core from the ranks.
    // (The worker announces a doze, then looks at `parked_count_` under
    // `mutex_`: it sees this caller's transfer, or this caller sees it doze.)
    if (left || (dozing && parked_count_.load(std::memory_order_acquire) > 0)) work_bell_.notify();
    return true;
  }

  // Runs queued operations in order until `target` is done (all of them,
  // parked transfers too, for nullptr), polling the parked transfers once the
  // queue is empty. `settle` false (a deferred `test`): returns after one
  // look at the parked ones instead of waiting for them. The caller holds
  // `busy_` (or the engine is deferred).
  void run_until(async_op* target, bool settle = true) noexcept {
    backoff nap = parked_backoff();
    while (!target || !target->done.load(std::memory_order_acquire)) {
      // (Every pending operation parked: nothing queued, no lock to take.)
      if (pending_.load(std::memory_order_acquire) != parked_.size())
        if (auto op = pop()) {
          run_one(op);
          continue;
        }
      if (parked_.empty()) return;
      const bool moved = poll_parked();
      if (!settle) return;
      if (moved) nap.reset();
      else if (!target || !target->done.load(std::memory_order_acquire)) rest(nap);
    }
  }
  // Runs a popped operation, parking it if it only started.
  void run_one(const std::shared_ptr<async_op>& op) noexcept {
    if (!start(*op)) {
      parked_.push_back(op);
      parked_count_.fetch_add(1, std::memory_order_release);
      return;
    }
    // Done before idle: a caller that sees idle() also sees the op's writes.
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
  // Polls every parked transfer once, in the order they started; true when
  // one finished. The caller holds `busy_` (or the engine is deferred).
  bool poll_parked() noexcept {
    bool moved = false;
    for (std::size_t i = 0; i < parked_.size();) {
      async_op& op = *parked_[i];
      if (!polled(op)) {
        ++i;
        continue;
      }
      finish(op);
      parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
      parked_count_.fetch_sub(1, std::memory_order_release);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      moved = true;
    }
    if (moved) done_bell_.notify();
    return moved;
  }
  // How a caller polls parked transfers without the transport's
  // `await_progress`: 64 polls, then yields for a while before the sleeps (a
  // rendezvous over MPI moves only while its ranks poll: sleeping after
  // fewer yields made a large exchange much slower than MPI_Sendrecv).
  // With the transport's `await_progress` (threads), the transport's own
  // waits' back-off before it: napping at once put every wait for a peer's
  // message behind a sleep and a wake-up.
  backoff parked_backoff() const noexcept { return nap_ ? backoff() : backoff(64, 2048); }
  // Waits a little for a parked transfer to move.
  void rest(backoff& b) {
    if (fibers_) fibers_->yield();
    else if (nap_) b.sleep_with([this](std::chrono::steady_clock::time_point) { nap_(); },
                                std::chrono::steady_clock::time_point::max());
    else b.pause();
  }

  /// The worker leaves a freshly queued operation alone this long, so a
  /// caller that waits for it at once runs it itself: waking a sleeping
  /// thread and handing the result back costs tens of microseconds on an
  /// oversubscribed machine, far more than this grace costs an overlapped
  /// collective (which runs for milliseconds behind the caller's compute).
  static constexpr std::chrono::microseconds grace{50};
  /// While collectives keep coming, the worker looks for new ones every
  /// `poll` (every `busy_poll` while a caller runs some itself) instead of
  /// being woken for each; after `doze_after` without any it dozes until the
  /// next submit wakes it.
  static constexpr std::chrono::microseconds poll{500};
  static constexpr std::chrono::milliseconds busy_poll{2};
  static constexpr std::chrono::milliseconds doze_after{200};
  /// How often the worker looks at parked transfers: every 20 us after one
  /// moved, doubling to 1 ms while none does (a caller that waits for one
  /// polls it itself).
  static constexpr std::chrono::steady_clock::duration parked_look_min = std::chrono::microseconds(20),
                                                       parked_look_max = std::chrono::milliseconds(1);

  // The workers (`comm/progress_workers.hpp`): the thread's loop; the
  // fiber's (`fibers_` set), its runs of the queue and its waits.
  inline void work();
  inline bool queue_empty();
  inline void suspend_until_done();
  inline void resume_done_waiters();
  inline void fiber_run(async_op* target);
  inline bool fiber_wait(async_op* target, deadline until) noexcept;
  inline void fiber_work();

  progress mode_;
  cooperative_scheduler* fibers_ = nullptr;
  int worker_fiber_ = -1;
  bool worker_idle_ = false, worker_exited_ = false;
  std::vector<int> done_waiters_;
  std::mutex mutex_;
  std::deque<std::shared_ptr<async_op>> queue_;
  // Started transfers (see `async_op::poll`), touched only by whoever holds
  // `busy_`; their count is read by the worker without it.
  std::vector<std::shared_ptr<async_op>> parked_;
  std::atomic<std::size_t> parked_count_{0};
  std::atomic<std::size_t> pending_{0}, unfinished_{0};
  std::atomic<bool> busy_{false};  ///< someone (worker or a waiting caller) is running operations
  std::atomic<bool> dozing_{false};  ///< the worker sleeps until woken (see `poll`)
  bool stop_ = false;
  event_count work_bell_, done_bell_;
  std::function<void()> nap_;
  std::thread worker_;
};

}  // namespace detail

}  // namespace ddl

// The workers' loops, then the request a caller holds.
#include "ddl/comm/progress_workers.hpp"
#include "ddl/comm/collective_request.hpp"
