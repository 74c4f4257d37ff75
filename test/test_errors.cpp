// Bad input gets a clear ddl:: exception; a stalled peer gives timeout_error
// on the others within the deadline.
#include <doctest/doctest.h>

#include <chrono>
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

TEST_CASE("a stalled peer gives timeout_error on the others within the deadline") {
  // Rank 2 never joins the collective. Ranks 0 and 1 must each get a
  // timeout_error that names a peer, the phase and the collective, well
  // before anything could be called a hang.
  ddl::options o;
  o.timeout = 300ms;
  constexpr int n = 3;
  std::vector<std::string> what(n);
  std::vector<int> peer(n, -2);
  std::vector<double> elapsed(n, 0);
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
