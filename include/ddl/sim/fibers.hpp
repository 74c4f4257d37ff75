#pragma once
/// \file
/// Cooperative fibers on one thread, the simulator's ranks: each fiber runs
/// on its own stack (mapped lazily, with a guard page, so thousands fit) and
/// gives the thread back only where it chooses (`block`). The scheduler side
/// runs whichever fibers are ready (`run_ready`) and decides, between such
/// rounds, what happens next (the simulator advances virtual time).
#include <sys/mman.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"

namespace ddl::detail {

class fiber_pool {
 public:
  /// \param stack_bytes each fiber's stack (virtual memory; only touched pages count).
  explicit fiber_pool(std::size_t stack_bytes) : stack_bytes_(stack_bytes) {}
  fiber_pool(const fiber_pool&) = delete;
  fiber_pool& operator=(const fiber_pool&) = delete;
  ~fiber_pool() { clear(); }

  /// A new fiber that runs `body` (which must not throw), queued to run.
  /// Returns its id (0, 1, ... in order of creation).
  int spawn(std::function<void()> body) {
    fibers_.emplace_back();
    fiber& f = fibers_.back();
    f.body = std::move(body);
    const std::size_t page = 4096;
    f.stack_size = (stack_bytes_ + page - 1) / page * page + page;
    f.stack = mmap(nullptr, f.stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (f.stack == MAP_FAILED) {
      f.stack = nullptr;
      fibers_.pop_back();
      throw transport_error("sim_fabric: cannot map a fiber stack");
    }
    mprotect(f.stack, page, PROT_NONE);  // guard page: an overflow faults
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = f.stack_size;
    f.ctx.uc_link = &sched_ctx_;
    makecontext(&f.ctx, &fiber_pool::entry, 0);
    const int id = static_cast<int>(fibers_.size()) - 1;
    wake(id);
    return id;
  }

  /// Drops every fiber (those left suspended are abandoned with their stacks).
  void clear() {
    for (auto& f : fibers_)
      if (f.stack) munmap(f.stack, f.stack_size);
    fibers_.clear();
    ready_.clear();
    yielders_.clear();
  }

  std::size_t size() const noexcept { return fibers_.size(); }
  /// The fiber running now, or -1 on the scheduler side.
  int running() const noexcept { return running_; }
  bool done(int id) const { return fibers_[static_cast<std::size_t>(id)].st == state::done; }

  /// Queues fiber `id` to run (no effect on a finished or already queued one).
  void wake(int id) {
    fiber& f = fibers_[static_cast<std::size_t>(id)];
    if (f.st == state::done || f.woken) return;
    f.woken = true;
    ready_.push_back(id);
  }
  void wake_all_blocked() {
    for (std::size_t i = 0; i < fibers_.size(); ++i)
      if (fibers_[i].st == state::blocked) wake(static_cast<int>(i));
  }

  /// From a fiber: gives the thread back until woken.
  void block() {
    fiber& f = fibers_[static_cast<std::size_t>(running_)];
    f.st = state::blocked;
    swapcontext(&f.ctx, &sched_ctx_);
  }
  /// From a fiber: blocks until the scheduler side calls `wake_yielders`.
  void yield() {
    yielders_.push_back(running_);
    block();
  }
  bool has_yielders() const noexcept { return !yielders_.empty(); }
  void wake_yielders() {
    for (int id : yielders_) wake(id);
    yielders_.clear();
  }

  /// Scheduler side: runs queued fibers, in order, until none is queued.
  void run_ready() {
    current() = this;
    while (!ready_.empty()) {
      const int id = ready_.front();
      ready_.pop_front();
      fiber& f = fibers_[static_cast<std::size_t>(id)];
      f.woken = false;
      if (f.st == state::done) continue;
      f.st = state::ready;
      running_ = id;
      swapcontext(&sched_ctx_, &f.ctx);
      running_ = -1;
    }
    current() = nullptr;
  }

 private:
  enum class state : std::uint8_t { ready, blocked, done };
  struct fiber {
    ucontext_t ctx{};
    void* stack = nullptr;
    std::size_t stack_size = 0;
    state st = state::ready;
    bool woken = false;  ///< queued to run
    std::function<void()> body;
  };

  static fiber_pool*& current() {
    static thread_local fiber_pool* p = nullptr;
    return p;
  }
  static void entry() {
    fiber_pool* p = current();
    fiber& f = p->fibers_[static_cast<std::size_t>(p->running_)];  // a deque: stays put as fibers are added
    f.body();
    f.st = state::done;
    // returning resumes the scheduler (uc_link)
  }

  std::size_t stack_bytes_;
  std::deque<fiber> fibers_;  // a deque: a suspended fiber's context must not move
  std::deque<int> ready_;
  std::vector<int> yielders_;
  ucontext_t sched_ctx_{};
  int running_ = -1;
};

}  // namespace ddl::detail
