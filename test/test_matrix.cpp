// Correctness matrix of every strategy on the in-process transport:
// rank counts 1-17, 24 and 32, and the multi-ring over many boxes and orders.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "matrix.hpp"

using namespace ddl_test;

#define DDL_STRATEGIES ddl::ring, ddl::recursive_doubling, ddl::halving_doubling
TYPE_TO_STRING(ddl::ring);
TYPE_TO_STRING(ddl::recursive_doubling);
TYPE_TO_STRING(ddl::halving_doubling);
// The direct strategies read peers' buffers in place: one node's worth of
// ranks is their use, so fewer rank counts (still odd, prime and 32).
#define DDL_DIRECT_STRATEGIES ddl::one_shot, ddl::two_shot
TYPE_TO_STRING(ddl::one_shot);
TYPE_TO_STRING(ddl::two_shot);

namespace {
constexpr std::size_t large = (std::size_t{1} << 20) + 3;
// Past 8 ranks the largest count is a quarter of `large`: still two
// 1 MiB chunks for recursive doubling's whole-buffer exchanges of 8-byte
// elements, and a block per rank that is not a multiple of anything; the
// 1-8 rank cases keep `large` (the ranks 9-32 cases took 10 of the test
// run's 29 CPU-minutes with it, 2026-11-26).
constexpr std::size_t many_ranks_large = (std::size_t{1} << 18) + 3;

template <class S>
void matrix_for(std::initializer_list<int> ranks, std::size_t big = large) {
  for (int n : ranks) {
    CAPTURE(n);
    failure_log log;
    run_matrix<S>(n, matrix_counts(n, big), log);
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

using dyn_ring = ddl::multi_ring<ddl::dynamic_extents>;

void box_matrix(const dyn_ring& s, std::size_t big = large) {
  const int n = s.box().box.size();
  CAPTURE(s.describe());
  failure_log log;
  run_matrix<dyn_ring>(n, matrix_counts(n, big), log, ddl::options{}, s);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}
}  // namespace

TEST_CASE_TEMPLATE("matrix: ranks 1-4", S, DDL_STRATEGIES) { matrix_for<S>({1, 2, 3, 4}); }
TEST_CASE_TEMPLATE("matrix: ranks 5-8", S, DDL_STRATEGIES) { matrix_for<S>({5, 6, 7, 8}); }
TEST_CASE_TEMPLATE("matrix: ranks 9-12", S, DDL_STRATEGIES) { matrix_for<S>({9, 10, 11, 12}, many_ranks_large); }
// 13, 15 and 17: two primes and an odd composite (14 and 16 went for test
// time: 122 s of the run; even folds run at 6, 10 and 12, sixteen ranks in
// the logarithmic case, a power of two past 8 at 32).
TEST_CASE_TEMPLATE("matrix: ranks 13 15 17", S, DDL_STRATEGIES) { matrix_for<S>({13, 15, 17}, many_ranks_large); }
TEST_CASE_TEMPLATE("matrix: ranks 24", S, DDL_STRATEGIES) { matrix_for<S>({24}, many_ranks_large); }
TEST_CASE_TEMPLATE("matrix: ranks 32", S, DDL_STRATEGIES) { matrix_for<S>({32}, many_ranks_large); }

TEST_CASE_TEMPLATE("matrix: direct ranks 1-8", S, DDL_DIRECT_STRATEGIES) { matrix_for<S>({1, 2, 3, 4, 5, 6, 7, 8}); }
TEST_CASE_TEMPLATE("matrix: direct ranks 13, 17, 32", S, DDL_DIRECT_STRATEGIES) { matrix_for<S>({13, 17, 32}, 65539); }
// two_shot streaming the blocks it gathers (`two_shot::streaming_stages`
// over threads): 65539 elements, so blocks pass `host::stream_from` bytes
// and the streamed copies run; 8189, so calls of up to `flagged_limit`
// bytes stream their slots past `stream_from` too.
TEST_CASE("matrix: two_shot streaming what it gathers, ranks 2, 3, 4, 7") {
  for (int n : {2, 3, 4, 7}) {
    CAPTURE(n);
    failure_log log;
    auto counts = matrix_counts(n, 65539);
    counts.push_back(8189);
    run_matrix<ddl::two_shot>(n, counts, log, ddl::options{}, ddl::two_shot{}.streaming_stages());
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE_TEMPLATE("matrix: tiny chunks exercise the pipeline window", S, DDL_STRATEGIES) {
  // 64-byte chunks: every step of 1009 elements runs many chunks through a
  // depth-2 window, on odd and prime rank counts.
  ddl::options o;
  o.chunk_bytes = 64;
  o.pipeline_depth = 2;
  for (int n : {2, 3, 7}) {
    CAPTURE(n);
    failure_log log;
    run_matrix<S>(n, matrix_counts(n, 0), log, o);
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("matrix: multi_ring boxes (1xn), (nx1), 2x3, 3x5, 2x2x2, 4x2x3, 2x2x2x2") {
  box_matrix(dyn_ring({1, 5}));
  box_matrix(dyn_ring({5, 1}));
  box_matrix(dyn_ring({2, 3}));
  box_matrix(dyn_ring({3, 5}));
  box_matrix(dyn_ring({2, 2, 2}));
  box_matrix(dyn_ring({4, 2, 3}));
  box_matrix(dyn_ring({2, 2, 2, 2}));
}

TEST_CASE("matrix: multi_ring 2x3x2 in every order of its dimensions") {
  int order[3] = {0, 1, 2};
  do {
    box_matrix(dyn_ring({2, 3, 2}, {order[0], order[1], order[2]}), 65539);
  } while (std::next_permutation(order, order + 3));
}

TEST_CASE("matrix: multi_ring with its first dimension through shared memory (direct-first): 2x3, 3x2 order 1,0, 2x2x2, 4x2 order 1,0, 1x5, 5x1") {
  box_matrix(dyn_ring({2, 3}).direct_first());
  box_matrix(dyn_ring({3, 2}, {1, 0}).direct_first());
  box_matrix(dyn_ring({2, 2, 2}).direct_first(), 65539);
  box_matrix(dyn_ring({4, 2}, {1, 0}).direct_first(), 65539);
  box_matrix(dyn_ring({1, 5}).direct_first());
  box_matrix(dyn_ring({5, 1}).direct_first());
  // Planned from a topology whose innermost level shares memory.
  const auto topo = ddl::topology::parse("3:10GB/s:1us,2:1GB/s:10us");
  ddl::plan_for q;
  q.shared_levels = 1;
  int seen = 0;
  for (const ddl::plan& p : ddl::all_plans(topo, 1e6, q)) {
    if (!p.direct_first) continue;
    ++seen;
    CAPTURE(ddl::describe(topo, p));
    failure_log log;
    run_matrix<ddl::planned>(6, matrix_counts(6, 65539), log, ddl::options{}, ddl::planned(topo, p));
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
  CHECK(seen == 1);  // 3x2 in natural order: only its first dimension lies inside level 0
}

TEST_CASE("matrix: static boxes and static orders") {
  failure_log log;
  run_matrix<ddl::multi_ring<ddl::extents<2, 2, 2>>>(8, matrix_counts(8, 4099), log);
  run_matrix<ddl::multi_ring<ddl::extents<3, 2>, ddl::dim_order<1, 0>>>(6, matrix_counts(6, 4099), log);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("matrix: logarithmic reduce-scatter and all-gather after doubling plans on flat power-of-two groups") {
  // planned(doubling plan) on one level of 4, 8 or 16 ranks runs recursive
  // halving / recursive doubling for reduce-scatter and all-gather (blocks
  // in rank order, counts below n included); 2 and 6 ranks keep the ring.
  for (int n : {2, 4, 6, 8, 16}) {
    CAPTURE(n);
    const auto topo = ddl::topology::uniform(n, 4e9, 8e-6);
    for (const ddl::plan& p : ddl::all_plans(topo, 1e6)) {
      if (p.algo != ddl::algorithm::recursive_doubling && p.algo != ddl::algorithm::halving_doubling) continue;
      const std::string algo = ddl::name_of(p.algo);
      CAPTURE(algo);
      CHECK(ddl::detail::logarithmic(topo, p, n) == (n == 4 || n == 8 || n == 16));
      failure_log log;
      run_matrix<ddl::planned>(n, matrix_counts(n, n == 16 ? 4099 : 65539), log, ddl::options{}, ddl::planned(topo, p));
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
  }
  // Tiny chunks through a shallow window: slices of the halves overtake each other.
  ddl::options o;
  o.chunk_bytes = 64;
  o.pipeline_depth = 2;
  const auto t8 = ddl::topology::uniform(8, 4e9, 8e-6);
  failure_log log;
  for (const ddl::plan& p : ddl::all_plans(t8, 1e6))
    if (p.algo == ddl::algorithm::halving_doubling) run_matrix<ddl::planned>(8, matrix_counts(8, 0), log, o, ddl::planned(t8, p));
  CHECK_MESSAGE(log.count() == 0, log.summary());
  // Two levels: the multi-ring keeps them.
  const auto two = ddl::topology::parse("2:10GB/s:1us,4:1GB/s:10us");
  for (const ddl::plan& p : ddl::all_plans(two, 1e6))
    if (p.algo == ddl::algorithm::halving_doubling) CHECK_FALSE(ddl::detail::logarithmic(two, p, 8));
}

TEST_CASE("matrix: multi-rings pipelined across levels (segments 2, 3, 8; boxes 2x2x2, 3x2, 2x3, 2x2x3)") {
  // Every dtype, op, count and placement through `planned` with the
  // segment count forced; with tiny chunks, every stage runs many chunks
  // through its window while other segments' stages are in flight.
  for (const char* spec : {"2:10GB/s:1us,2:1GB/s:10us,2:100MB/s:50us", "3:10GB/s:1us,2:1GB/s:10us",
                           "2:10GB/s:1us,3:1GB/s:10us", "2:10GB/s:1us,2:1GB/s:10us,3:100MB/s:50us"}) {
    const auto topo = ddl::topology::parse(spec);
    const int n = topo.size();
    ddl::plan p = ddl::best_plan(topo, 64e6, {ddl::candidates::multi_ring_only});
    REQUIRE(p.dims > 1);
    for (int segments : {2, 3, 8}) {
      p.segments = segments;
      CAPTURE(ddl::describe(topo, p));
      failure_log log;
      run_matrix<ddl::planned>(n, matrix_counts(n, 65539), log, ddl::options{}, ddl::planned(topo, p));
      ddl::options tiny;
      tiny.chunk_bytes = 64;
      tiny.pipeline_depth = 2;
      run_matrix<ddl::planned>(n, matrix_counts(n, 0), log, tiny, ddl::planned(topo, p));
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
  }
}
