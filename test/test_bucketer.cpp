// Gradient buckets (`ddl::bucketer`) over in-process ranks: mixed dtypes,
// ragged, contiguous and packed tensors, launch order, misuse.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <numeric>
#include <thread>
#include <type_traits>
#include <vector>

#include "collectives.hpp"
#include "support.hpp"

using namespace ddl_test;


// --- gradient buckets ----------------------------------------------------------

namespace {

// A model's gradients: tensors of mixed dtypes and ragged sizes, some lying
// in one flat buffer (in place), the others separate (packed).
struct fake_model {
  std::vector<float> flat;                    // tensors 0..3 tile it
  std::vector<std::vector<float>> loose;      // separate float tensors
  std::vector<std::vector<double>> doubles;   // another dtype
  std::vector<ddl::buffer_view> views;        // in registration (backward) order

  explicit fake_model(int rank) {
    const std::size_t flat_sizes[] = {1, 4097, 333, 20000};
    flat.resize(std::accumulate(std::begin(flat_sizes), std::end(flat_sizes), std::size_t(0)));
    for (std::size_t s : {std::size_t(7), std::size_t(65536), std::size_t(0), std::size_t(129)}) loose.emplace_back(s);
    for (std::size_t s : {std::size_t(3), std::size_t(1000)}) doubles.emplace_back(s);
    fill(rank);
    // Backward order: the flat buffer's tensors last layer first, interleaved
    // with the others, so buckets mix contiguous and packed tensors.
    std::size_t off = flat.size();
    std::vector<ddl::buffer_view> flat_views;
    for (auto it = std::rbegin(flat_sizes); it != std::rend(flat_sizes); ++it) {
      off -= *it;
      flat_views.push_back(ddl::host_view(flat.data() + off, *it));
    }
    views = {flat_views[0], ddl::host_view(loose[0]), flat_views[1], ddl::host_view(doubles[0]),
             flat_views[2], ddl::host_view(loose[1]), ddl::host_view(loose[2]), flat_views[3],
             ddl::host_view(doubles[1]), ddl::host_view(loose[3])};
  }

  // This rank's gradients of one backward pass (the same every step).
  void fill(int rank) {
    for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(value(ddl::dtype::float32, rank, i));
    for (std::size_t k = 0; k < loose.size(); ++k)
      for (std::size_t i = 0; i < loose[k].size(); ++i)
        loose[k][i] = static_cast<float>(value(ddl::dtype::float32, rank, loose_index(k, i)));
    for (std::size_t k = 0; k < doubles.size(); ++k)
      for (std::size_t i = 0; i < doubles[k].size(); ++i)
        doubles[k][i] = static_cast<double>(value(ddl::dtype::float64, rank, double_index(k, i)));
  }
  static std::int64_t value(ddl::dtype t, int rank, std::size_t index) {
    return input_value(t, ddl::op::sum, rank, index);
  }
  static std::size_t loose_index(std::size_t k, std::size_t i) { return 1000000 + k * 100000 + i; }
  static std::size_t double_index(std::size_t k, std::size_t i) { return 2000000 + k * 100000 + i; }
};

// Elements of `m` that differ from the exact average over `n` ranks (the
// integer sum, divided once, as `op::avg` defines it).
std::size_t count_wrong_model(const fake_model& m, int n) {
  auto avg = [&](ddl::dtype t, std::size_t index) {
    std::int64_t sum = 0;
    for (int r = 0; r < n; ++r) sum += fake_model::value(t, r, index);
    return sum;
  };
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < m.flat.size(); ++i)
    wrong += m.flat[i] != static_cast<float>(avg(ddl::dtype::float32, i)) / static_cast<float>(n);
  for (std::size_t k = 0; k < m.loose.size(); ++k)
    for (std::size_t i = 0; i < m.loose[k].size(); ++i)
      wrong += m.loose[k][i] !=
               static_cast<float>(avg(ddl::dtype::float32, fake_model::loose_index(k, i))) / static_cast<float>(n);
  for (std::size_t k = 0; k < m.doubles.size(); ++k)
    for (std::size_t i = 0; i < m.doubles[k].size(); ++i)
      wrong += m.doubles[k][i] !=
               static_cast<double>(avg(ddl::dtype::float64, fake_model::double_index(k, i))) / static_cast<double>(n);
  return wrong;
}

}  // namespace

TEST_CASE("bucketer: mixed dtypes, ragged sizes, contiguous and packed tensors, several steps") {
  for (ddl::progress mode : modes)
    for (int n : {1, 2, 3, 4}) {
      CAPTURE(mode_name(mode));
      CAPTURE(n);
      failure_log log;
      ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
        ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t, ddl::auto_strategy(), with_progress(mode));
        fake_model m(t.rank());
        ddl::bucket_options bo;
        bo.bucket_bytes = 64 << 10;  // several buckets
        bo.first_bucket_bytes = 16 << 10;
        ddl::bucketer<decltype(comm)> buckets(comm, ddl::op::avg, bo);
        for (auto& v : m.views) buckets.add(v);
        const auto& layout = buckets.layout();
        if (layout.size() < 3) log.add("expected several buckets, got " + std::to_string(layout.size()));
        bool some_in_place = false, some_packed = false;
        for (const auto& b : layout) (b.in_place ? some_in_place : some_packed) = true;
        if (!some_in_place || !some_packed) log.add("expected both in-place and packed buckets");
        for (int step = 0; step < 3; ++step) {
          m.fill(t.rank());
          // the backward pass: gradients come in registration order, with a
          // little compute between them so buckets launch mid-pass
          for (std::size_t i = 0; i < m.views.size(); ++i) {
            if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
            buckets.mark_ready(i);
          }
          if (buckets.launched() != layout.size()) log.add("not every bucket launched after the last mark_ready");
          buckets.wait_all();
          if (auto w = count_wrong_model(m, n)) log.add("step " + std::to_string(step) + ": " + std::to_string(w) + " wrong");
        }
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

TEST_CASE("bucketer: buckets launch in order even when gradients arrive out of order") {
  ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread));
    std::vector<std::vector<float>> g(6, std::vector<float>(1000));
    ddl::bucket_options bo;
    bo.bucket_bytes = bo.first_bucket_bytes = 4000;  // one tensor per bucket
    ddl::bucketer<decltype(comm)> buckets(comm, ddl::op::sum, bo);
    for (auto& v : g) buckets.add(ddl::host_view(v));
    for (int step = 0; step < 2; ++step) {
      for (auto& v : g) std::fill(v.begin(), v.end(), static_cast<float>(t.rank() + 1));
      // rank-dependent order: the launch order must not follow it
      std::vector<std::size_t> order = {5, 4, 3, 2, 1, 0};
      if (t.rank() == 1) order = {1, 0, 3, 2, 5, 4};
      for (std::size_t k = 0; k < order.size(); ++k) {
        buckets.mark_ready(order[k]);
        if (t.rank() == 0 && k < 5) CHECK(buckets.launched() == 0);  // bucket 0's tensor comes last
      }
      CHECK(buckets.launched() == 6);
      buckets.wait_all();
      for (auto& v : g) CHECK(v[999] == 6.0f);
    }
  });
}

TEST_CASE("bucketer: misuse is named") {
  ddl::local_fabric::run(1, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
    std::vector<float> a(10), b(10);
    ddl::bucketer<decltype(comm)> buckets(comm);
    buckets.add(ddl::host_view(a));
    buckets.add(ddl::host_view(b));
    buckets.mark_ready(0);
    CHECK_THROWS_WITH_AS(buckets.add(ddl::host_view(a)), doctest::Contains("layout is fixed"), ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(buckets.mark_ready(0), doctest::Contains("twice"), ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(buckets.mark_ready(7), doctest::Contains("tensor 7 of 2"), ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(buckets.wait_all(), doctest::Contains("tensors 1 were not marked"), ddl::invalid_argument);
    // the next step works
    buckets.mark_ready(0);
    buckets.mark_ready(1);
    buckets.wait_all();
  });
}
