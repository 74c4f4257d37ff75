// The simulator's fibers (sim/fibers.hpp) on their own: order of running,
// blocking and waking, stacks, exceptions inside a fiber, and each fiber's
// floating-point control state. Built twice: with the switch the platform
// gets (x86-64: ddl's own) and with DDL_SIM_UCONTEXT (glibc's swapcontext),
// so both stay right.
#include <doctest/doctest.h>

#include <cfenv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <ddl/sim/fibers.hpp>

namespace {

using ddl::detail::fiber_pool;

// Deep enough to use a good part of a 256 KiB stack; a result that depends
// on every frame, so nothing folds away.
std::uint64_t recurse(int depth, volatile std::uint64_t* sink) {
  volatile char pad[512];
  for (std::size_t i = 0; i < sizeof pad; ++i) pad[i] = static_cast<char>(depth + static_cast<int>(i));
  if (depth == 0) return *sink;
  return recurse(depth - 1, sink) + static_cast<std::uint64_t>(pad[depth % sizeof pad]);
}

}  // namespace

TEST_CASE("fibers: run in order of waking, block and resume where they left off") {
  fiber_pool pool(64 << 10);
  std::vector<std::string> log;
  const int a = pool.spawn([&] {
    log.push_back("a1");
    pool.block();
    log.push_back("a2");
    pool.block();
    log.push_back("a3");
  });
  const int b = pool.spawn([&] {
    log.push_back("b1");
    pool.block();
    log.push_back("b2");
  });
  CHECK(a == 0);
  CHECK(b == 1);
  CHECK(pool.running() == -1);
  pool.run_ready();
  CHECK(log == std::vector<std::string>{"a1", "b1"});
  CHECK(!pool.done(a));
  pool.wake(b);
  pool.wake(a);
  pool.wake(a);  // queued once
  pool.run_ready();
  CHECK(log == std::vector<std::string>{"a1", "b1", "b2", "a2"});
  CHECK(pool.done(b));
  CHECK(!pool.done(a));
  pool.wake(b);  // finished: no effect
  pool.wake_all_blocked();
  pool.run_ready();
  CHECK(log.back() == "a3");
  CHECK(pool.done(a));
  CHECK(pool.running() == -1);
}

TEST_CASE("fibers: locals survive many switches; a fiber's stack is its own") {
  fiber_pool pool(256 << 10);
  constexpr int n = 300, rounds = 50;
  std::vector<std::uint64_t> sums(n, 0);
  volatile std::uint64_t seed = 7;
  for (int f = 0; f < n; ++f)
    pool.spawn([&, f] {
      std::uint64_t acc = static_cast<std::uint64_t>(f);
      double x = f * 0.5;
      for (int r = 0; r < rounds; ++r) {
        CHECK(pool.running() == f);
        acc = acc * 31 + static_cast<std::uint64_t>(r);
        x += 1.25;
        if (r == rounds / 2) acc += recurse(300, &seed);  // ~150 KiB deep
        pool.yield();
      }
      sums[static_cast<std::size_t>(f)] = acc + static_cast<std::uint64_t>(x * 4);
    });
  for (int r = 0; r <= rounds; ++r) {
    pool.run_ready();
    pool.wake_yielders();
  }
  pool.run_ready();
  const std::uint64_t deep = recurse(300, &seed);
  for (int f = 0; f < n; ++f) {
    std::uint64_t acc = static_cast<std::uint64_t>(f);
    double x = f * 0.5;
    for (int r = 0; r < rounds; ++r) {
      acc = acc * 31 + static_cast<std::uint64_t>(r);
      x += 1.25;
      if (r == rounds / 2) acc += deep;
    }
    CHECK(pool.done(f));
    CHECK(sums[static_cast<std::size_t>(f)] == acc + static_cast<std::uint64_t>(x * 4));
  }
}

TEST_CASE("fibers: an exception thrown after a switch unwinds the fiber's own frames to its handler") {
  // (A fiber must not switch out inside a handler: the C++ runtime keeps
  // one stack of caught exceptions per thread, shared by its fibers.)
  fiber_pool pool(64 << 10);
  int caught = 0, after = 0;
  auto deep = [&](int f) {
    pool.block();
    throw std::runtime_error("fiber " + std::to_string(f));
  };
  for (int f = 0; f < 3; ++f)
    pool.spawn([&, f] {
      std::string what;
      try {
        deep(f);
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
      if (what == "fiber " + std::to_string(f)) ++caught;
      pool.block();
      ++after;
    });
  for (int round = 0; round < 3; ++round) {
    pool.run_ready();
    pool.wake_all_blocked();
  }
  pool.run_ready();
  CHECK(caught == 3);
  CHECK(after == 3);
  for (int f = 0; f < 3; ++f) CHECK(pool.done(f));
}

TEST_CASE("fibers: each keeps its own rounding mode; the scheduler keeps its own") {
  fiber_pool pool(64 << 10);
  const int mine = std::fegetround();
  volatile double one = 1.0, three = 3.0;
  double up = 0, down = 0, up_again = 0, down_again = 0;
  // A fiber that divides in `mode`, switches out, and divides again.
  auto divide_in = [&](int mode, double& first, double& again) {
    return [&, mode] {
      std::fesetround(mode);
      first = one / three;
      pool.block();
      again = one / three;
      std::fesetround(FE_TONEAREST);
    };
  };
  pool.spawn(divide_in(FE_UPWARD, up, up_again));
  pool.spawn(divide_in(FE_DOWNWARD, down, down_again));
  pool.run_ready();
  CHECK(std::fegetround() == mine);
  pool.wake_all_blocked();
  pool.run_ready();
  CHECK(std::fegetround() == mine);
  CHECK(up > down);
  CHECK(up_again == up);
  CHECK(down_again == down);
}
