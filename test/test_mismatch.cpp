// Ranks that disagree about a call: the matrix of issue 85 over threads and
// the simulator. {count, dtype, op, strategy, root} mismatch x every
// strategy: every rank ends with a `mismatch_error` naming the field (the
// root row: or at its deadline, never with another rank's data), no rank
// returns from a mismatched call. Over MPI the same matrix runs in
// test_mpi.cpp ("mpi mismatch matrix").
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ddl/sim.hpp>

#include "mismatch.hpp"
#include "support.hpp"

using namespace ddl_test;

namespace {

// A transport whose tags cannot carry call stamps (as an MPI with a small
// `MPI_TAG_UB`): it clears them from every tag and says so
// (`stamps_in_tags`), so the communicator must check each call another way.
class stampless_transport {
 public:
  using request = ddl::local_transport::request;
  explicit stampless_transport(ddl::local_transport& t) : t_(&t) {}
  int rank() const { return t_->rank(); }
  int size() const { return t_->size(); }
  request isend(int peer, ddl::const_bytes d, ddl::tag t) { return t_->isend(peer, d, strip(t)); }
  request irecv(int peer, ddl::mutable_bytes d, ddl::tag t) { return t_->irecv(peer, d, strip(t)); }
  void wait(request& r, ddl::deadline until) { t_->wait(r, until); }
  bool test(request& r) { return t_->test(r); }
  void abort(const std::string& why) { t_->abort(why); }
  bool stamps_in_tags() const { return false; }

 private:
  static ddl::tag strip(ddl::tag t) {
    const ddl::tag stamp_mask = ((ddl::tag(1) << ddl::detail::stamp_bits) - 1) << ddl::detail::stamp_shift;
    return t & ~stamp_mask;
  }
  ddl::local_transport* t_;
};
static_assert(ddl::is_transport_v<stampless_transport>);

// Runs one case of the matrix on `n` threads of a local fabric; `wrap`
// turns each rank's transport into the one the communicators run on.
template <class S, class Other, class Wrap>
std::vector<outcome> on_threads(int n, mismatch m, Wrap&& wrap, bool check = false) {
  std::vector<outcome> out(static_cast<std::size_t>(n));
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    auto&& t = wrap(lt);
    out[static_cast<std::size_t>(lt.rank())] = run_case<S, Other>(t, m, case_options(check));
  });
  return out;
}
auto as_is = [](ddl::local_transport& t) -> ddl::local_transport& { return t; };

// Every mismatch of one strategy's row on `n` ranks: `run(m)` runs the case
// and returns each rank's outcome.
template <class S, class Run>
void row(int n, Run&& run) {
  for (mismatch m : all_mismatches) {
    CAPTURE(n);
    const std::string strategy_name = S::name, field_name = name_of(m);
    CAPTURE(strategy_name);
    CAPTURE(field_name);
    expect_mismatch(run(m), m, n);
  }
}
template <class S, class Other>
void threads_row(int n) {
  row<S>(n, [n](mismatch m) { return on_threads<S, Other>(n, m, as_is); });
}
template <class S, class Other>
void sim_row(int n) {
  ddl::sim_options so;
  so.shared_levels = 1;  // the ranks read each other's memory: the direct strategies run
  ddl::sim_fabric f(ddl::topology::uniform(n, 1e9, 1e-6), so);
  row<S>(n, [&](mismatch m) {
    std::vector<outcome> out(static_cast<std::size_t>(n));
    f.run([&](ddl::sim_transport& t) { out[static_cast<std::size_t>(t.rank())] = run_case<S, Other>(t, m, case_options()); });
    return out;
  });
}

}  // namespace

TEST_CASE("mismatch matrix: threads, every strategy, 3 and 4 ranks") {
  for (int n : {3, 4})
    each_strategy([n](auto row) { threads_row<typename decltype(row)::strategy, typename decltype(row)::other>(n); });
}

TEST_CASE("mismatch matrix: the simulator, every strategy, 3 and 4 ranks") {
  for (int n : {3, 4})
    each_strategy([n](auto row) { sim_row<typename decltype(row)::strategy, typename decltype(row)::other>(n); });
}

TEST_CASE("mismatch matrix: a transport whose tags carry no stamps is checked by the DDL_CHECK round, every mismatch named exactly") {
  for (int n : {3, 4}) {
    for (mismatch m : all_mismatches) {
      CAPTURE(n);
      const std::string field_name = name_of(m);
    CAPTURE(field_name);
      auto wrap = [](ddl::local_transport& t) { return stampless_transport(t); };
      expect_mismatch(on_threads<ddl::ring, ddl::recursive_doubling>(n, m, wrap), m, n, true);
      expect_mismatch(on_threads<ddl::halving_doubling, ddl::ring>(n, m, wrap), m, n, true);
      expect_mismatch(on_threads<matrix_multi_ring, ddl::ring>(n, m, wrap), m, n, true);
      expect_mismatch(on_threads<ddl::auto_strategy, ddl::ring>(n, m, wrap), m, n, true);
    }
  }
  // And calls that agree still run, and reach the right sums.
  ddl::local_fabric::run(5, [](ddl::local_transport& lt) {
    stampless_transport t(lt);
    ddl::communicator<ddl::ring, stampless_transport> comm(t);
    std::vector<std::int32_t> v(1001, lt.rank() + 1);
    comm.all_reduce(ddl::host_view(v), ddl::op::sum);
    CHECK(std::all_of(v.begin(), v.end(), [](std::int32_t x) { return x == 15; }));
  });
}

TEST_CASE("mismatch matrix: with DDL_CHECK every field is named exactly, on threads") {
  for (int n : {3, 4}) {
    for (mismatch m : all_mismatches) {
      CAPTURE(n);
      const std::string field_name = name_of(m);
    CAPTURE(field_name);
      expect_mismatch(on_threads<ddl::ring, ddl::two_shot>(n, m, as_is, true), m, n, true);
      expect_mismatch(on_threads<ddl::one_shot, ddl::recursive_doubling>(n, m, as_is, true), m, n, true);
    }
  }
}

TEST_CASE("a collective's message of another size is a call mismatch naming the count, on threads and the simulator") {
  const ddl::tag call = ddl::detail::call_tag(7, 0x151);  // an all_reduce's stamp
  auto size_error = [&](auto& t) {
    std::int64_t v = 5;
    std::string what;
    if (t.rank() == 0) {
      auto s = t.isend(1, {reinterpret_cast<const std::byte*>(&v), 8}, call);
      try {
        t.wait(s, std::chrono::steady_clock::now() + std::chrono::seconds(2));
      } catch (const ddl::error&) {
      }
    } else {
      std::int32_t w = 0;
      auto r = t.irecv(0, {reinterpret_cast<std::byte*>(&w), 4}, call);
      try {
        t.wait(r, std::chrono::steady_clock::now() + std::chrono::seconds(2));
      } catch (const ddl::error& e) {
        what = e.what();
      }
    }
    return what;
  };
  std::string local, sim;
  ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
    if (t.rank() == 1) local = size_error(t);
    else size_error(t);
  });
  ddl::sim_fabric f(ddl::topology::uniform(2, 1e9, 1e-6), {false});
  f.run([&](ddl::sim_transport& t) {
    if (t.rank() == 1) sim = size_error(t);
    else size_error(t);
  });
  for (const std::string& what : {local, sim}) {
    CAPTURE(what);
    CHECK(what.find("call mismatch: all_reduce call 7, phase 0: ranks disagree on the count: rank 0 sent 8 bytes, rank 1 expected 4") !=
          std::string::npos);
    CHECK(ddl::detail::is_mismatch_text(what.c_str()));
  }
}
