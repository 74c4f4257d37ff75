// Correctness matrix of every strategy on the in-process transport:
// rank counts 1-17, 24 and 32.
#include <doctest/doctest.h>

#include "matrix.hpp"

using namespace ddl_test;

#define DDL_STRATEGIES ddl::ring
TYPE_TO_STRING(ddl::ring);

namespace {
constexpr std::size_t large = (std::size_t{1} << 20) + 3;

template <class S>
void matrix_for(std::initializer_list<int> ranks, std::size_t big = large) {
  for (int n : ranks) {
    CAPTURE(n);
    failure_log log;
    run_matrix<S>(n, matrix_counts(n, big), log);
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}
}  // namespace

TEST_CASE_TEMPLATE("matrix: ranks 1-4", S, DDL_STRATEGIES) { matrix_for<S>({1, 2, 3, 4}); }
TEST_CASE_TEMPLATE("matrix: ranks 5-8", S, DDL_STRATEGIES) { matrix_for<S>({5, 6, 7, 8}); }
TEST_CASE_TEMPLATE("matrix: ranks 9-12", S, DDL_STRATEGIES) { matrix_for<S>({9, 10, 11, 12}); }
TEST_CASE_TEMPLATE("matrix: ranks 13-17", S, DDL_STRATEGIES) { matrix_for<S>({13, 14, 15, 16, 17}); }
TEST_CASE_TEMPLATE("matrix: ranks 24", S, DDL_STRATEGIES) { matrix_for<S>({24}); }
TEST_CASE_TEMPLATE("matrix: ranks 32", S, DDL_STRATEGIES) { matrix_for<S>({32}); }

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
