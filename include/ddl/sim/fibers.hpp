#pragma once
/// \file
/// Cooperative fibers on one thread, the simulator's ranks: each fiber runs
/// on its own stack (mapped lazily, with a guard page, so thousands fit) and
/// gives the thread back only where it chooses (`block`). The scheduler side
/// runs whichever fibers are ready (`run_ready`) and decides, between such
/// rounds, what happens next (the simulator advances virtual time).
///
/// Switching fibers: on x86-64 (GCC, Clang) twenty instructions that save and
/// restore the callee-saved registers, the floating-point control words and
/// the stack pointer. glibc's `swapcontext` also saves and restores the
/// signal mask, a system call at every switch: 4 per simulated message
/// (sender and receiver each block and resume once), 37% of the time of
/// simulating the paper's 256 GPUs (perf). `ucontext`
/// stays the switch elsewhere: other architectures, CUDA's compiler, the
/// sanitizers (which intercept `swapcontext` to follow stacks) and code built
/// for shadow stacks (`-fcf-protection=return`: a return into a fresh stack
/// would not match the shadow one). `DDL_SIM_UCONTEXT` forces it.
///
/// Under Valgrind: define `DDL_VALGRIND` (with valgrind's headers installed)
/// and each fiber's stack is registered with it, so memcheck follows the
/// switches instead of warning "client switching stacks?" and guessing
/// (the requests cost a few instructions outside Valgrind). Valgrind does not
/// model MXCSR rounding modes, so code that sets one sees round-to-nearest.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"

#ifndef DDL_SIM_UCONTEXT
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !(defined(__CET__) && (__CET__ & 2))
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define DDL_SIM_UCONTEXT 1
#endif
#endif
#else
#define DDL_SIM_UCONTEXT 1
#endif
#endif
#ifdef DDL_SIM_UCONTEXT
#include <ucontext.h>
#endif
#ifdef DDL_VALGRIND
#include <valgrind/valgrind.h>
#endif

namespace ddl::detail {

#ifndef DDL_SIM_UCONTEXT
/// Saves the callee-saved registers, MXCSR and the x87 control word on the
/// running stack, stores its pointer in `*from`, and resumes the stack `to`
/// (saved by an earlier switch, or laid out by `fiber_pool::spawn`).
[[gnu::naked, gnu::noinline]] inline void fiber_switch(void** /*from*/, void* /*to*/) {
  asm volatile(
      "pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "subq $8, %rsp\n\t"
      "stmxcsr (%rsp)\n\t"
      "fnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\t"
      "fldcw 4(%rsp)\n\t"
      "addq $8, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}
#endif

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
#ifdef DDL_VALGRIND
    f.valgrind_id =
        VALGRIND_STACK_REGISTER(static_cast<char*>(f.stack) + page, static_cast<char*>(f.stack) + f.stack_size);
#endif
#ifdef DDL_SIM_UCONTEXT
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = f.stack_size;
    f.ctx.uc_link = &sched_ctx_;
    makecontext(&f.ctx, &fiber_pool::entry, 0);
#else
    // What `fiber_switch` pops, from the top of the fresh stack down: a null
    // return address for `entry` (which never returns; it sits where a call
    // would leave one, so `entry` starts with the stack aligned as after a
    // call), `entry` itself (the switch's `ret` goes there), six zeroed
    // registers, and the caller's MXCSR and x87 control word.
    auto* top = reinterpret_cast<std::uintptr_t*>(static_cast<char*>(f.stack) + f.stack_size);
    std::uintptr_t* sp = top - 9;
    sp[8] = 0;
    sp[7] = reinterpret_cast<std::uintptr_t>(&fiber_pool::entry);
    for (int i = 1; i < 7; ++i) sp[i] = 0;
    std::uint32_t csr = 0;
    std::uint16_t cw = 0;
    asm volatile("stmxcsr %0" : "=m"(csr));
    asm volatile("fnstcw %0" : "=m"(cw));
    sp[0] = 0;
    std::memcpy(sp, &csr, sizeof csr);
    std::memcpy(reinterpret_cast<char*>(sp) + 4, &cw, sizeof cw);
    f.sp = sp;
#endif
    const int id = static_cast<int>(fibers_.size()) - 1;
    wake(id);
    return id;
  }

  /// Drops every fiber (those left suspended are abandoned with their stacks).
  void clear() {
    for (auto& f : fibers_)
      if (f.stack) {
#ifdef DDL_VALGRIND
        VALGRIND_STACK_DEREGISTER(f.valgrind_id);
#endif
        munmap(f.stack, f.stack_size);
      }
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
#ifdef DDL_SIM_UCONTEXT
    swapcontext(&f.ctx, &sched_ctx_);
#else
    fiber_switch(&f.sp, sched_sp_);
#endif
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
#ifdef DDL_SIM_UCONTEXT
      swapcontext(&sched_ctx_, &f.ctx);
#else
      fiber_switch(&sched_sp_, f.sp);
#endif
      running_ = -1;
    }
    current() = nullptr;
  }

 private:
  enum class state : std::uint8_t { ready, blocked, done };
  struct fiber {
#ifdef DDL_SIM_UCONTEXT
    ucontext_t ctx{};
#else
    void* sp = nullptr;  ///< its stack pointer while switched out
#endif
    void* stack = nullptr;
    std::size_t stack_size = 0;
#ifdef DDL_VALGRIND
    unsigned valgrind_id = 0;  ///< the stack's registration
#endif
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
#ifdef DDL_SIM_UCONTEXT
    // returning resumes the scheduler (uc_link)
#else
    fiber_switch(&f.sp, p->sched_sp_);  // never resumed
    __builtin_unreachable();
#endif
  }

  std::size_t stack_bytes_;
  std::deque<fiber> fibers_;  // a deque: a suspended fiber's context must not move
  std::deque<int> ready_;
  std::vector<int> yielders_;
#ifdef DDL_SIM_UCONTEXT
  ucontext_t sched_ctx_{};
#else
  void* sched_sp_ = nullptr;
#endif
  int running_ = -1;
};

}  // namespace ddl::detail
