// Bad input gets a clear ddl:: exception; a stalled peer gives timeout_error
// on the others within the deadline.
#include <doctest/doctest.h>
#include <thread>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>
#include <cstdlib>
#include <string>
#include <vector>

#include "support.hpp"

using namespace std::chrono_literals;
using comm_t = ddl::communicator<ddl::ring, ddl::local_transport>;

namespace {
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const ddl::invalid_argument& e) {
    return e.what();
  }
  return "<no ddl::invalid_argument thrown>";
}
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("bad buffers are rejected with a message naming the problem") {
  ddl::local_fabric fabric(2);
  auto t = fabric.transport(0);
  comm_t comm(t);
  std::vector<float> a(16), b(16);
  std::vector<double> d(16);

  SUBCASE("null data with a non-zero count") {
    auto m = message_of([&] { comm.all_reduce(ddl::host_view(static_cast<const float*>(nullptr), 8), ddl::host_view(b), ddl::op::sum); });
    CHECK(contains(m, "input data is null"));
    m = message_of([&] { comm.all_reduce(ddl::host_view(a), ddl::host_view(static_cast<float*>(nullptr), 16), ddl::op::sum); });
    CHECK(contains(m, "output data is null"));
    m = message_of([&] { comm.reduce_scatter(ddl::host_view(static_cast<const float*>(nullptr), 16), ddl::host_view(b.data(), 8), ddl::op::sum); });
    CHECK(contains(m, "reduce_scatter: input data is null"));
    m = message_of([&] { comm.all_gather(ddl::host_view(static_cast<const float*>(nullptr), 8), ddl::host_view(b)); });
    CHECK(contains(m, "all_gather: input data is null"));
  }
  SUBCASE("overlapping but unequal input and output") {
    auto m = message_of([&] { comm.all_reduce(ddl::host_view(static_cast<const float*>(a.data()), 10), ddl::host_view(a.data() + 3, 10), ddl::op::sum); });
    CHECK(contains(m, "overlap"));
    m = message_of([&] { comm.reduce_scatter(ddl::host_view(static_cast<const float*>(a.data()), 16), ddl::host_view(a.data() + 1, 8), ddl::op::sum); });
    CHECK(contains(m, "overlap"));
    m = message_of([&] { comm.all_gather(ddl::host_view(static_cast<const float*>(a.data() + 2), 8), ddl::host_view(a)); });
    CHECK(contains(m, "overlap"));
  }
  SUBCASE("mismatched dtype and count") {
    auto m = message_of([&] { comm.all_reduce(ddl::host_view(std::as_const(a)), ddl::host_view(d), ddl::op::sum); });
    CHECK(contains(m, "input is float, output is double"));
    m = message_of([&] { comm.all_reduce(ddl::host_view(static_cast<const float*>(a.data()), 16), ddl::host_view(b.data(), 15), ddl::op::sum); });
    CHECK(contains(m, "input has 16 elements, output 15"));
    m = message_of([&] { comm.reduce_scatter(ddl::host_view(std::as_const(a)), ddl::host_view(b.data(), 9), ddl::op::sum); });
    CHECK(contains(m, "block of 16 over 2 ranks has 8"));
    m = message_of([&] { comm.all_gather(ddl::host_view(static_cast<const float*>(a.data()), 7), ddl::host_view(b)); });
    CHECK(contains(m, "block of 16 over 2 ranks has 8"));
  }
  SUBCASE("device memory handed to a host-only transport") {
    ddl::buffer_view dev = ddl::host_view(b);
    dev.where = ddl::location{ddl::memory_space::cuda, 0, nullptr};
    auto m = message_of([&] { comm.all_reduce(dev, ddl::op::sum); });
    CHECK(contains(m, "cuda buffer was handed to a host-only transport"));
  }
}

TEST_CASE("a stalled peer gives timeout_error on the others within the deadline, naming the silent rank") {
  // Rank 2 never joins the collective. Ranks 0 and 1 must each get a
  // timeout_error that names a peer, the phase and the collective, well
  // before anything could be called a hang.
  ddl::options o;
  o.timeout = 300ms;
  constexpr int n = 3;
  std::vector<std::string> what(n);
  std::vector<int> peer(n, -2);
  std::vector<double> elapsed(n, 0);
  std::vector<std::vector<int>> silent(n);
  std::atomic<bool> done{false};
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    if (t.rank() == 2) {
      while (!done.load()) std::this_thread::sleep_for(1ms);  // alive but silent
      return;
    }
    comm_t comm(t, o);
    std::vector<float> g(1000, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.all_reduce(ddl::host_view(g), ddl::op::sum);
    } catch (const ddl::timeout_error& e) {
      what[t.rank()] = e.what();
      peer[t.rank()] = e.peer();
      silent[t.rank()] = e.silent();
      CHECK(e.collective() == "all_reduce");
      CHECK(contains(e.phase(), "ring"));
    }
    elapsed[t.rank()] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    static std::atomic<int> finished{0};
    if (++finished == 2) done = true;
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    CAPTURE(what[r]);
    CHECK(contains(what[r], "timeout after"));
    CHECK(contains(what[r], "all_reduce"));
    CHECK((peer[r] >= 0 && peer[r] < n && peer[r] != r));
    // The survivors both timed out: the one that reported none is rank 2.
    CHECK(silent[r] == std::vector<int>{2});
    CHECK(contains(what[r], "no timeout reported by rank 2"));
    CHECK(elapsed[r] >= 0.25);
    CHECK(elapsed[r] < 5.0);
  }
}

TEST_CASE("options come from DDL_TIMEOUT, DDL_CHUNK_BYTES and DDL_PIPELINE_DEPTH, and bad values are named") {
  setenv("DDL_TIMEOUT", "2.5", 1);
  setenv("DDL_CHUNK_BYTES", "256K", 1);
  auto o = ddl::options::from_env();
  CHECK(o.timeout.count() == doctest::Approx(2.5));
  CHECK(o.chunk_bytes == 256u * 1024u);
  setenv("DDL_TIMEOUT", "soon", 1);
  try {
    (void)ddl::options::from_env();
    FAIL("no exception");
  } catch (const ddl::invalid_argument& e) {
    CHECK(contains(e.what(), "DDL_TIMEOUT='soon'"));
  }
  setenv("DDL_TIMEOUT", "1", 1);
  setenv("DDL_CHUNK_BYTES", "12Q", 1);
  CHECK_THROWS_AS((void)ddl::options::from_env(), ddl::invalid_argument);
  unsetenv("DDL_TIMEOUT");
  unsetenv("DDL_CHUNK_BYTES");
  setenv("DDL_PIPELINE_DEPTH", "16", 1);
  CHECK(ddl::options::from_env().pipeline_depth == 16u);
  for (const char* bad_depth : {"0", "17", "2.5", "deep"}) {
    setenv("DDL_PIPELINE_DEPTH", bad_depth, 1);
    try {
      (void)ddl::options::from_env();
      FAIL("no exception for ", bad_depth);
    } catch (const ddl::invalid_argument& e) {
      CHECK(contains(e.what(), (std::string("DDL_PIPELINE_DEPTH='") + bad_depth + "'").c_str()));
    }
  }
  unsetenv("DDL_PIPELINE_DEPTH");
  CHECK(ddl::options::from_env().pipeline_depth == 4u);
  ddl::options bad;
  bad.chunk_bytes = 8;
  CHECK_THROWS_AS(bad.validate(), ddl::invalid_argument);
}

namespace {
// Runs `f(comm, rank)` on 4 threads with the call check on, and returns every
// rank's error message ("" for a rank that returned normally); after the bad
// call, every rank runs one valid all-reduce to show the communicator is
// still in step.
template <class F>
std::vector<std::string> checked_run(F&& f, bool& still_usable) {
  const int n = 4;
  std::vector<std::string> errors(n);
  std::vector<int> good(n, 0);
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    ddl::options o;
    o.check_calls = true;
    o.timeout = std::chrono::seconds(20);
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t, ddl::auto_strategy(), o);
    try {
      f(comm, t.rank());
    } catch (const ddl::error& e) {
      errors[static_cast<std::size_t>(t.rank())] = e.what();
    }
    std::vector<int> v(37, t.rank() + 1);
    comm.all_reduce(ddl::host_view(v), ddl::op::sum);
    good[static_cast<std::size_t>(t.rank())] = v[36] == n * (n + 1) / 2;
  });
  still_usable = std::all_of(good.begin(), good.end(), [](int g) { return g == 1; });
  return errors;
}
}  // namespace

TEST_CASE("DDL_CHECK: a count, dtype, op or root one rank disagrees on is the same mismatch_error everywhere") {
  bool usable = false;
  // Count: rank 2 passes one element more.
  auto e = checked_run([](auto& comm, int r) {
    std::vector<float> g(r == 2 ? 1001 : 1000, 1.0f);
    comm.all_reduce(ddl::host_view(g), ddl::op::sum);
  }, usable);
  for (const auto& m : e) {
    CHECK(contains(m, "ranks disagree on the input count: rank 0 passed 1000, rank 2 passed 1001"));
    CHECK(m == e[0]);
  }
  CHECK(usable);
  // dtype: rank 3 reduces int32, the others float.
  e = checked_run([](auto& comm, int r) {
    std::vector<float> f(64, 1.0f);
    std::vector<std::int32_t> i(64, 1);
    if (r == 3) comm.all_reduce(ddl::host_view(i), ddl::op::sum);
    else comm.all_reduce(ddl::host_view(f), ddl::op::sum);
  }, usable);
  for (const auto& m : e) CHECK(contains(m, "dtype: rank 0 passed float, rank 3 passed int32"));
  CHECK(usable);
  // op: rank 1 takes max.
  e = checked_run([](auto& comm, int r) {
    std::vector<double> g(64, 2.0);
    comm.all_reduce(ddl::host_view(g), r == 1 ? ddl::op::max : ddl::op::sum);
  }, usable);
  for (const auto& m : e) CHECK(contains(m, "op: rank 0 passed sum, rank 1 passed max"));
  // Broadcast root, and a different collective altogether.
  e = checked_run([](auto& comm, int r) {
    std::vector<float> g(64, 1.0f);
    comm.broadcast(ddl::host_view(g), r == 3 ? 1 : 0);
  }, usable);
  for (const auto& m : e) CHECK(contains(m, "root: rank 0 passed 0, rank 3 passed 1"));
  e = checked_run([](auto& comm, int r) {
    std::vector<float> g(64, 1.0f), out(64);
    if (r == 2) comm.broadcast(ddl::host_view(g), 0);
    else comm.all_reduce(ddl::host_view(g), ddl::op::sum);
  }, usable);
  for (const auto& m : e) CHECK(contains(m, "collective: rank 0 passed all_reduce, rank 2 passed broadcast"));
  CHECK(usable);
}

namespace {
// Without DDL_CHECK: runs `f(comm, rank)` on `n` threads (deadline 30 s) and
// returns every rank's error ("" for a rank that returned normally); `slowest`
// is the longest call.
template <class Strategy, class F>
std::vector<std::string> unchecked_run(int n, F&& f, double& slowest) {
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<double> took(static_cast<std::size_t>(n), 0);
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    ddl::options o;
    o.timeout = std::chrono::seconds(30);
    ddl::communicator<Strategy, ddl::local_transport> comm(t, Strategy(), o);
    const auto start = std::chrono::steady_clock::now();
    try {
      f(comm, t.rank());
    } catch (const ddl::mismatch_error& e) {
      errors[static_cast<std::size_t>(t.rank())] = e.what();
    } catch (const ddl::error& e) {
      errors[static_cast<std::size_t>(t.rank())] = std::string("not a mismatch_error: ") + e.what();
    }
    took[static_cast<std::size_t>(t.rank())] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  slowest = *std::max_element(took.begin(), took.end());
  return errors;
}

template <class Strategy>
void stamps_catch_mismatches(int n) {
  CAPTURE(Strategy::name);
  CAPTURE(n);
  const int odd = n - 1;  // the rank that disagrees
  double slowest = 0;
  auto expect = [&](const std::vector<std::string>& e, const std::string& text) {
    for (int r = 0; r < n; ++r) {
      const std::string& m = e[static_cast<std::size_t>(r)];
      CAPTURE(r);
      CAPTURE(m);
      CHECK(contains(m, "call mismatch: "));
      CHECK(contains(m, text.c_str()));
      CHECK(contains(m, ("rank " + std::to_string(odd)).c_str()));  // names the rank that disagrees
      CHECK(!contains(m, "not a mismatch_error"));
    }
    CHECK(slowest < 5.0);  // at once, not at the 30 s deadline
  };
  // dtype: the last rank reduces int32 where the others reduce float.
  auto e = unchecked_run<Strategy>(n, [&](auto& comm, int r) {
    std::vector<float> f(1000, 1.0f);
    std::vector<std::int32_t> i(1000, 1);
    if (r == odd) comm.all_reduce(ddl::host_view(i), ddl::op::sum);
    else comm.all_reduce(ddl::host_view(f), ddl::op::sum);
  }, slowest);
  expect(e, "ranks disagree on the dtype");
  // op: the last rank takes max.
  e = unchecked_run<Strategy>(n, [&](auto& comm, int r) {
    std::vector<double> g(77, 2.0);
    comm.all_reduce(ddl::host_view(g), r == odd ? ddl::op::max : ddl::op::sum);
  }, slowest);
  expect(e, "ranks disagree on the op");
  for (const auto& m : e) CHECK((contains(m, "passed max") && contains(m, "passed sum")));
  // collective: the last rank all-gathers where the others all-reduce.
  e = unchecked_run<Strategy>(n, [&](auto& comm, int r) {
    std::vector<float> g(static_cast<std::size_t>(n) * 50, 1.0f), mine(50, 1.0f);
    if (r == odd) comm.all_gather(ddl::host_view(std::as_const(mine)), ddl::host_view(g));
    else comm.all_reduce(ddl::host_view(g), ddl::op::sum);
  }, slowest);
  expect(e, "ranks disagree on the collective");
  // count: the last rank passes one element more (a size mismatch when the
  // stamps' hash cannot tell; never a normal return). Calls synchronised
  // through the stages (one_shot up to its flagged limit) compare the
  // counts themselves and name both.
  e = unchecked_run<Strategy>(n, [&](auto& comm, int r) {
    std::vector<float> g(r == odd ? 1001 : 1000, 1.0f);
    comm.all_reduce(ddl::host_view(g), ddl::op::sum);
  }, slowest);
  // auto takes one_shot there when its model says so.
  const bool flagged = std::is_same_v<Strategy, ddl::one_shot> ||
                       (std::is_same_v<Strategy, ddl::auto_strategy> && contains(e[0], "input count"));
  if (flagged) {
    expect(e, "ranks disagree on the input count: rank ");
    for (const auto& m : e) CHECK((contains(m, "passed 1000") && contains(m, "passed 1001")));
  } else {
    expect(e, "disagree on the count, the root or the strategy");
  }
}
}  // namespace

TEST_CASE("without DDL_CHECK: a collective, dtype, op or count one rank disagrees on is a mismatch_error on every rank at once (call stamps)") {
  for (int n : {2, 3, 4, 5}) {
    stamps_catch_mismatches<ddl::ring>(n);
    stamps_catch_mismatches<ddl::auto_strategy>(n);
    stamps_catch_mismatches<ddl::recursive_doubling>(n);
  }
  stamps_catch_mismatches<ddl::two_shot>(4);
  stamps_catch_mismatches<ddl::one_shot>(3);
  // Broadcast roots: rank 2 of 3 names root 1, which sends it nothing (root
  // 0 sends to both): no rank hears from the rank that disagrees while it
  // waits on it, so no stamp is seen; rank 1 finishes with root 0's data (or
  // times out), rank 0 finishes or times out on its send to rank 2 (taken
  // only by a matching receive), and rank 2 ends at its deadline. Never a
  // wrong result. (Where two ranks send to each other instead, the next
  // test case: a mismatch_error.) Through the stages (direct, 256 B: the
  // root's ring) root 0 publishes and returns, rank 1 takes its data, and
  // rank 2, waiting for rank 1's entry, sees rank 1 finish the broadcast
  // without publishing it: a mismatch_error at once, not at the deadline
  // (and on ranks 0 and 1 too where they are still in the call then).
  for (auto algo : {ddl::broadcast_algorithm::binomial, ddl::broadcast_algorithm::direct}) {
    CAPTURE(static_cast<int>(algo));
    ddl::options o;
    o.timeout = std::chrono::milliseconds(500);
    o.broadcast = algo;
    std::vector<int> outcome(3, 0);  // 1: root 0's data, -1: a timeout, -2: a mismatch_error
    ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
      comm_t comm(t, o);
      std::vector<float> g(64, float(t.rank()));
      try {
        comm.broadcast(ddl::host_view(g), t.rank() == 2 ? 1 : 0);
        outcome[static_cast<std::size_t>(t.rank())] = g[63] == 0.0f ? 1 : 0;
      } catch (const ddl::timeout_error&) {
        outcome[static_cast<std::size_t>(t.rank())] = -1;
      } catch (const ddl::mismatch_error&) {
        outcome[static_cast<std::size_t>(t.rank())] = -2;
      }
    });
    CAPTURE(outcome[0]);
    CAPTURE(outcome[1]);
    CAPTURE(outcome[2]);
    if (algo == ddl::broadcast_algorithm::direct) {
      // A rank still finishing the call when rank 2 fails may end with its
      // mismatch too (the group given up: the likely cause, not yet confirmed,
      // of {1, 1, -2} failing 2 in ~70 runs beside a CPU hog; the outcomes are
      // captured above for the next failure).
      CHECK(outcome[2] == -2);
      CHECK((outcome[0] == 1 || outcome[0] == -2));
      CHECK((outcome[1] == 1 || outcome[1] == -2));
    } else {
      CHECK(outcome[0] != 0);
      CHECK(outcome[1] != 0);
      CHECK(outcome[2] == -1);
    }
  }
}

TEST_CASE("without DDL_CHECK: a broadcast through the root's ring whose ranks name two roots fails on one of them, "
          "never a wrong result") {
  // Ranks 0 and 1 name root 0, ranks 2 and 3 root 2: both roots publish the
  // entry and return, each after a full fence looking at the other's counter
  // (at least one of the two sees it: a mismatch_error); ranks 1 and 3 take
  // their own root's data. Whoever returns holds its root's data.
  for (int trial = 0; trial < 20; ++trial) {
    CAPTURE(trial);
    ddl::options o;
    o.timeout = std::chrono::seconds(5);
    o.broadcast = ddl::broadcast_algorithm::direct;
    std::vector<int> outcome(4, 0);  // 1: its root's data, -2: a mismatch_error, -3: wrong data, -4: another error
    std::vector<std::string> what(4);
    ddl::local_fabric::run(4, [&](ddl::local_transport& t) {
      comm_t comm(t, o);
      const int r = t.rank(), root = r < 2 ? 0 : 2;
      std::vector<float> g(16, float(r));
      auto& out = outcome[static_cast<std::size_t>(r)];
      try {
        comm.broadcast(ddl::host_view(g), root);
        out = std::all_of(g.begin(), g.end(), [&](float x) { return x == float(root); }) ? 1 : -3;
      } catch (const ddl::mismatch_error& e) {
        out = -2;
        what[static_cast<std::size_t>(r)] = e.what();
      } catch (const ddl::error& e) {  // a peer's failure, heard of
        out = -4;
        what[static_cast<std::size_t>(r)] = e.what();
      }
    });
    CAPTURE(what[0]);
    CAPTURE(what[2]);
    CHECK(std::count(outcome.begin(), outcome.end(), -3) == 0);
    CHECK((outcome[0] == -2 || outcome[2] == -2));
    for (int r : {0, 2})
      if (outcome[static_cast<std::size_t>(r)] == -2)
        CHECK(contains(what[static_cast<std::size_t>(r)], "both sent this broadcast as its root"));
  }
}

TEST_CASE("without DDL_CHECK: two ranks splitting a broadcast's copy that name different roots both fail at once, "
          "before either copies") {
  // Past the ring two ranks trade their buffers' addresses in a meeting and
  // compare stamps there (the root in each), so neither copies into the
  // other's buffer: each naming itself, or each naming the other.
  for (int shift : {0, 1}) {
    CAPTURE(shift);
    ddl::options o;
    o.timeout = std::chrono::seconds(5);
    o.broadcast = ddl::broadcast_algorithm::direct;
    std::vector<std::string> what(2);
    std::vector<int> untouched(2, 0);
    const auto start = std::chrono::steady_clock::now();
    ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
      comm_t comm(t, o);
      const int r = t.rank();
      std::vector<float> g(10000, float(r));
      try {
        comm.broadcast(ddl::host_view(g), (r + shift) % 2);
        what[static_cast<std::size_t>(r)] = "returned";
      } catch (const ddl::mismatch_error& e) {
        what[static_cast<std::size_t>(r)] = e.what();
      }
      untouched[static_cast<std::size_t>(r)] = std::all_of(g.begin(), g.end(), [&](float x) { return x == float(r); });
    });
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
    for (int r : {0, 1}) {
      CAPTURE(what[static_cast<std::size_t>(r)]);
      CHECK(contains(what[static_cast<std::size_t>(r)], "disagree on the count, the root or the strategy"));
      CHECK(untouched[static_cast<std::size_t>(r)] == 1);
    }
  }
}

TEST_CASE("without DDL_CHECK: one_shot ranks on both sides of the stages' counter limit are a mismatch_error at once") {
  // The last rank passes one float past `one_shot::flagged_limit` and so runs
  // the call synchronised by messages; the others wait on its stage counter
  // and see its message of the call under another stamp. And a direct
  // reduce-scatter (flagged too) against all-reduces.
  constexpr std::size_t limit = ddl::one_shot::flagged_limit / sizeof(float);
  for (int n : {2, 3, 4}) {
    CAPTURE(n);
    double slowest = 0;
    auto e = unchecked_run<ddl::one_shot>(n, [&](auto& comm, int r) {
      std::vector<float> g(r == n - 1 ? limit + 1 : limit, 1.0f);
      comm.all_reduce(ddl::host_view(g), ddl::op::sum);
    }, slowest);
    for (const auto& m : e) {
      CAPTURE(m);
      CHECK(contains(m, "call mismatch: "));
      CHECK(!contains(m, "not a mismatch_error"));
    }
    CHECK(slowest < 5.0);
    e = unchecked_run<ddl::one_shot>(n, [&](auto& comm, int r) {
      std::vector<float> g(1000, 1.0f), block(1000);
      if (r == n - 1)
        comm.reduce_scatter(ddl::host_view(std::as_const(g)),
                            ddl::host_view(block.data(), ddl::block_of(1000, n, r).size), ddl::op::sum);
      else comm.all_reduce(ddl::host_view(g), ddl::op::sum);
    }, slowest);
    for (const auto& m : e) {
      CAPTURE(m);
      CHECK(contains(m, "ranks disagree on the collective"));
    }
    CHECK(slowest < 5.0);
  }
}

TEST_CASE("without DDL_CHECK: a broadcast whose halves name different roots is a mismatch_error on every rank at once") {
  // Ranks 0-1 name root 0, ranks 2-3 root 2: each half sends down its own
  // tree, and ranks 0 and 2 (1 and 3) send to each other, neither receiving:
  // a waiting send that finds its peer's message of the same call under
  // another stamp names the mismatch. Sends that complete at once (a few
  // bytes, copied into the mailbox) cannot: each half then ends with its own
  // root's data, never a mix (the last case).
  ddl::options o;
  o.timeout = std::chrono::seconds(20);
  o.broadcast = ddl::broadcast_algorithm::binomial;
  for (std::size_t count : {std::size_t(10), std::size_t(3000)}) {
    CAPTURE(count);
    std::vector<std::string> what(4);
    const auto start = std::chrono::steady_clock::now();
    ddl::local_fabric::run(4, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, o);
      std::vector<float> g(count, float(t.rank()));
      try {
        comm.broadcast(ddl::host_view(g), t.rank() < 2 ? 0 : 2);
        what[static_cast<std::size_t>(t.rank())] = "returned";
      } catch (const ddl::mismatch_error& e) {
        what[static_cast<std::size_t>(t.rank())] = e.what();
      } catch (const std::exception& e) {
        what[static_cast<std::size_t>(t.rank())] = std::string("not a mismatch_error: ") + e.what();
      }
    });
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    for (const std::string& w : what) {
      CAPTURE(w);
      CHECK(contains(w, "disagree on the count, the root or the strategy"));
    }
  }
  std::vector<float> got(4, -1.0f);
  ddl::local_fabric::run(4, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, o);
    std::vector<float> g(2, float(t.rank()));
    try {
      comm.broadcast(ddl::host_view(g), t.rank() < 2 ? 0 : 2);
      if (g[0] == g[1]) got[static_cast<std::size_t>(t.rank())] = g[0];
    } catch (const ddl::error&) {
      got[static_cast<std::size_t>(t.rank())] = -2.0f;  // an error is fine too
    }
  });
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    const float g = got[static_cast<std::size_t>(r)];
    CHECK((g == -2.0f || g == (r < 2 ? 0.0f : 2.0f)));
  }
}

TEST_CASE("DDL_CHECK: an argument one rank rejects is every rank's error, and the next call works") {
  bool usable = false;
  const auto e = checked_run([](auto& comm, int r) {
    std::vector<float> g(100, 1.0f), out(r == 3 ? 99 : 100);
    comm.all_reduce(ddl::host_view(std::as_const(g)), ddl::host_view(out), ddl::op::sum);
  }, usable);
  CHECK(contains(e[3], "all_reduce: input has 100 elements, output 99"));  // its own error
  for (int r : {0, 1, 2}) {
    CAPTURE(e[static_cast<std::size_t>(r)]);
    CHECK(contains(e[static_cast<std::size_t>(r)], "rank 3 rejected its arguments: all_reduce: input has 100 elements, output 99"));
  }
  CHECK(usable);
}

TEST_CASE("without DDL_CHECK, one rank's bad argument ends every rank's call at once, naming it") {
  // Rank 3's output is one element short; the others' calls are valid and
  // would wait for rank 3 until their 30 s deadline. They end at once with
  // its reason, and the communicator refuses later calls on every rank.
  ddl::options o;
  o.timeout = std::chrono::seconds(30);
  constexpr int n = 4;
  std::vector<std::string> first(n), later(n);
  std::vector<double> elapsed(n, 0);
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    comm_t comm(t, o);
    const int r = t.rank();
    std::vector<float> in(16, 1.0f), out(r == 3 ? 63 : 64);
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.all_gather(ddl::host_view(std::as_const(in)), ddl::host_view(out));
    } catch (const ddl::error& e) {
      first[static_cast<std::size_t>(r)] = e.what();
    }
    elapsed[static_cast<std::size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<float> g(8, 1.0f);
    try {
      comm.all_reduce(ddl::host_view(g), ddl::op::sum);
    } catch (const ddl::transport_error& e) {
      later[static_cast<std::size_t>(r)] = e.what();
    }
  });
  CHECK(contains(first[3], "all_gather: input has 16 elements"));
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CAPTURE(first[static_cast<std::size_t>(r)]);
    CAPTURE(later[static_cast<std::size_t>(r)]);
    if (r != 3) CHECK(contains(first[static_cast<std::size_t>(r)], "rank 3 failed: all_gather: input has 16 elements"));
    CHECK(elapsed[static_cast<std::size_t>(r)] < 2.0);
    CHECK(contains(later[static_cast<std::size_t>(r)], "rank 3 failed"));
  }
}

TEST_CASE("communicator::abort on one rank ends the others' pending calls at once") {
  ddl::options o;
  o.timeout = std::chrono::seconds(30);
  constexpr int n = 3;
  std::vector<std::string> what(n);
  std::vector<double> elapsed(n, 0);
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    comm_t comm(t, o);
    if (t.rank() == 1) {
      std::this_thread::sleep_for(100ms);  // the others are waiting in all_reduce by now
      comm.abort("out of memory in the data loader");
      return;
    }
    std::vector<float> g(1000, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.all_reduce(ddl::host_view(g), ddl::op::sum);
    } catch (const ddl::transport_error& e) {
      what[static_cast<std::size_t>(t.rank())] = e.what();
    }
    elapsed[static_cast<std::size_t>(t.rank())] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  for (int r : {0, 2}) {
    CAPTURE(what[static_cast<std::size_t>(r)]);
    CHECK(contains(what[static_cast<std::size_t>(r)], "rank 1 failed: out of memory in the data loader"));
    CHECK(elapsed[static_cast<std::size_t>(r)] < 1.5);
  }
}

TEST_CASE("DDL_CHECK is read from the environment and bad values are named") {
  setenv("DDL_CHECK", "1", 1);
  CHECK(ddl::options::from_env().check_calls);
  setenv("DDL_CHECK", "yes", 1);
  CHECK(contains(message_of([] { (void)ddl::options::from_env(); }), "DDL_CHECK='yes' must be 0 or 1"));
  unsetenv("DDL_CHECK");
  CHECK(!ddl::options::from_env().check_calls);
}

TEST_CASE("a default-constructed multi_ring<dynamic_extents> is the flat ring over its group") {
  for (int n : {1, 4}) {
    CAPTURE(n);
    std::vector<int> out0(static_cast<std::size_t>(n), -1);
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::multi_ring<ddl::dynamic_extents>, ddl::local_transport> comm(t);
      std::vector<int> in(5, t.rank() + 1), out(5, -1);
      comm.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), ddl::op::sum);
      out0[static_cast<std::size_t>(t.rank())] = out[4];
    });
    for (int v : out0) CHECK(v == n * (n + 1) / 2);
  }
}
