#pragma once
// Helpers of the collectives' suites over in-process ranks (async, broadcast,
// bucketer, rooted, p2p): options per progress mode, exact inputs and their
// check, and the loop over both modes, 1-13 ranks and every dtype.
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "support.hpp"

namespace ddl_test {

using clock_type = std::chrono::steady_clock;

inline ddl::options with_progress(ddl::progress p, double timeout_s = 60) {
  ddl::options o = ddl::options::from_env();
  o.async_progress = p;
  o.timeout = std::chrono::duration<double>(timeout_s);
  o.chunk_bytes = 4096;  // several chunks per step even on small buffers
  return o;
}

template <class T>
std::vector<T> inputs(ddl::op o, int rank, std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = to_element<T>(input_value(ddl::dtype_of_v<T>, o, rank, i));
  return v;
}

template <class T>
std::size_t count_wrong(const std::vector<T>& got, ddl::op o, int ranks) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!same_bits(got[i], expected_value<T>(o, ranks, i))) ++wrong;
  return wrong;
}

// Broadcast input: root-specific, index-dependent, exact in every dtype.
template <class T>
T bcast_value(int root, std::size_t i) {
  return to_element<T>(static_cast<std::int64_t>((i * 7 + static_cast<std::size_t>(root) * 3) % 61) - 30);
}

inline constexpr ddl::progress modes[] = {ddl::progress::thread, ddl::progress::deferred};
inline const char* mode_name(ddl::progress p) { return p == ddl::progress::thread ? "thread" : "deferred"; }

// The rank counts and dtypes of `every_mode_ranks_and_dtype`. Under
// ThreadSanitizer (async.tsan) every hand-off is instrumented: with every
// dtype at every count its checks took four minutes of CI's test run (the
// reduce's alone 96 s). The races they look for do not depend on the element
// type, and show at 3 ranks; so there 1, 2, 3, 5 and 8 ranks keep one, odd,
// prime and even counts, and each (mode, rank count) runs two dtypes in turn:
// every dtype in both modes, and at an odd count of 3 or more (3 or 5 ranks)
// in one of them. async, without the sanitizer, runs every dtype at every
// count.
#if defined(__SANITIZE_THREAD__)
inline constexpr int mode_rank_counts[] = {1, 2, 3, 5, 8};
inline constexpr std::size_t dtypes_per_turn = 2;
#else
inline constexpr int mode_rank_counts[] = {1, 2, 3, 4, 5, 7, 8, 13};
inline constexpr std::size_t dtypes_per_turn = std::size(ddl::all_dtypes);
#endif

// Both progress modes, 1-13 ranks (odd and prime counts among them), an
// auto communicator on each, every dtype: `body(comm, rank, n, T{}, log)`
// for each, every failure logged and checked per mode and rank count.
template <class Body>
void every_mode_ranks_and_dtype(Body&& body) {
  constexpr std::size_t dtypes = std::size(ddl::all_dtypes);
  std::size_t turn = 0;
  for (ddl::progress mode : modes)
    for (int n : mode_rank_counts) {
      CAPTURE(mode_name(mode));
      CAPTURE(n);
      const std::size_t first = turn++ * dtypes_per_turn;
      failure_log log;
      ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
        ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t, ddl::auto_strategy(), with_progress(mode));
        for (std::size_t k = 0; k < dtypes_per_turn; ++k)
          ddl::visit_dtype(ddl::all_dtypes[(first + k) % dtypes], [&](auto tag) { body(comm, t.rank(), n, tag, log); });
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

}  // namespace ddl_test
