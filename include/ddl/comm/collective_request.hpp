#pragma once
/// \file
/// `collective_request`: what a caller holds for an asynchronous collective
/// or transfer (the communicator's `*_async` calls), and `wait_all`.

#include <chrono>
#include <exception>
#include <memory>
#include <utility>

#include "ddl/comm/progress.hpp"
#include "ddl/core/error.hpp"

namespace ddl {

/// A collective in flight, returned by the communicator's `*_async` calls.
/// The buffers it was given belong to ddl until it completes. Move-only;
/// destroying one that has not completed waits for it (its error, if any, is
/// then dropped: call `wait` to see it).
/// Example:
/// \code
///   ddl::collective_request r = comm.all_reduce_async(ddl::host_view(grads), ddl::op::avg);
///   compute_something_else();
///   r.wait();  // grads reduced, or the collective's error re-thrown
/// \endcode
class collective_request {
 public:
  collective_request() = default;
  collective_request(std::shared_ptr<detail::progress_engine> engine, std::shared_ptr<detail::async_op> op)
      : engine_(std::move(engine)), op_(std::move(op)) {}
  collective_request(collective_request&&) noexcept = default;
  collective_request& operator=(collective_request&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      engine_ = std::move(o.engine_);
      op_ = std::move(o.op_);
      peer_ = o.peer_;
    }
    return *this;
  }
  collective_request(const collective_request&) = delete;
  collective_request& operator=(const collective_request&) = delete;
  ~collective_request() { finish_quietly(); }

  /// True while it refers to a collective not yet waited for.
  bool valid() const noexcept { return op_ != nullptr; }
  /// The collective's name ("all_reduce", ...), or "" when empty.
  const char* what() const noexcept { return op_ ? op_->what : ""; }
  /// A completed transfer's peer: the sender of a receive from any rank
  /// (`communicator::recv_any_async`), the rank named for any other send or
  /// receive; -1 before it has completed, after a failure, and for
  /// collectives. Still there after `wait` has emptied the request.
  int peer() const noexcept {
    if (!op_) return peer_;
    return op_->done.load(std::memory_order_acquire) ? op_->peer : -1;
  }

  /// True once the collective has finished (successfully or not); never
  /// blocks on the engine's thread (a deferred engine runs the collective here).
  bool test() { return !op_ || engine_->test(*op_); }

  /// Waits until the collective has finished, then re-throws its error if it
  /// failed. Afterwards the request is empty.
  void wait() {
    if (!op_) return;
    engine_->wait(*op_, std::chrono::steady_clock::time_point::max());
    release_and_rethrow();
  }

  /// Waits until `until`: true (and as `wait`) if the collective finished,
  /// false if it is still running (the request stays valid).
  bool wait_until(deadline until) {
    if (!op_) return true;
    if (!engine_->wait(*op_, until)) return false;
    release_and_rethrow();
    return true;
  }
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> d) {
    return wait_until(std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(d));
  }

 private:
  void release_and_rethrow() {
    auto op = std::move(op_);
    engine_.reset();
    peer_ = op->peer;
    if (op->error) std::rethrow_exception(op->error);
  }
  void finish_quietly() noexcept {
    // Dropped inside its own completion callback: the collective has run.
    if (op_ && op_.get() != detail::completing_here()) engine_->wait(*op_, std::chrono::steady_clock::time_point::max());
    op_.reset();
    engine_.reset();
  }

  std::shared_ptr<detail::progress_engine> engine_;
  std::shared_ptr<detail::async_op> op_;
  int peer_ = -1;  // `peer()` once `op_` is let go
};

/// Waits for every request in `[first, last)`, in order; re-throws the first
/// error after all have finished.
template <class It>
void wait_all(It first, It last) {
  std::exception_ptr first_error;
  for (; first != last; ++first) {
    try {
      first->wait();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace ddl
