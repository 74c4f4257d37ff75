// Boxes and topologies: rank <-> coordinate maps, the DDL_TOPOLOGY grammar,
// probed figures checked, racks from bandwidths, node layouts.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "matrix.hpp"

using namespace ddl_test;

// What `DDL_TOPOLOGY` parsing of `s` throws, or "<no error>".
static std::string error_of(const char* s) {
  try {
    (void)ddl::topology::parse(s);
  } catch (const ddl::topology_error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST_CASE("rank_of(coord_of(r)) == r for static, dynamic and mixed boxes") {
  const ddl::extents<4, 3, 2> s;
  const ddl::extents<4, ddl::dynamic, 2> m(3);
  const ddl::dynamic_extents d{4, 3, 2};
  static_assert(ddl::extents<4, 3, 2>::is_static && !ddl::extents<4, ddl::dynamic, 2>::is_static);
  static_assert(ddl::rank_of(ddl::extents<4, 3, 2>{}, ddl::coord_of(ddl::extents<4, 3, 2>{}, 17)) == 17);
  CHECK(s.size() == 24);
  CHECK(m.size() == 24);
  CHECK(d.size() == 24);
  for (int r = 0; r < 24; ++r) {
    const auto c = ddl::coord_of(s, r);
    CHECK(ddl::rank_of(s, c) == r);
    CHECK(ddl::rank_of(m, ddl::coord_of(m, r)) == r);
    CHECK(ddl::rank_of(d, ddl::coord_of(d, r)) == r);
    CHECK(c == ddl::coord_of(m, r));
    CHECK(c == ddl::coord_of(d, r));
    CHECK(c[0] == r % 4);  // dimension 0 varies fastest
    for (std::size_t k = 0; k < 3; ++k) CHECK((c[k] >= 0 && c[k] < s.extent(k)));
  }
  // Neighbours along dimension 1 are stride(1) = 4 ranks apart.
  CHECK(ddl::rank_of(d, {1, 2, 0}) - ddl::rank_of(d, {1, 1, 0}) == d.stride(1));
  CHECK_THROWS_AS(ddl::dynamic_extents({4, 0}), ddl::topology_error);
  CHECK_THROWS_AS((ddl::extents<2, ddl::dynamic>(-3)), ddl::topology_error);
}

TEST_CASE("a box that does not match the group throws topology_error on every rank") {
  std::atomic<int> errors{0};
  ddl::local_fabric::run(6, [&](ddl::local_transport& t) {
    try {
      ddl::communicator<ddl::multi_ring<ddl::dynamic_extents>, ddl::local_transport> comm(
          t, ddl::multi_ring<ddl::dynamic_extents>({2, 2}));
    } catch (const ddl::topology_error& e) {
      if (std::string(e.what()).find("box 2x2 holds 4 ranks but the group has 6") != std::string::npos) ++errors;
    }
    try {
      ddl::communicator<ddl::multi_ring<ddl::extents<2, 2, 2>>, ddl::local_transport> comm(t);
    } catch (const ddl::topology_error&) {
      ++errors;
    }
  });
  CHECK(errors == 12);
  CHECK_THROWS_AS(ddl::multi_ring<ddl::dynamic_extents>({2, 3}, {0, 0}), ddl::topology_error);
}

TEST_CASE("DDL_TOPOLOGY parses units and points at the offending field") {
  const auto t = ddl::topology::parse("4:20GB/s:3us,16:10GB/s:5us:2,4:9.5GB/s:8us");
  REQUIRE(t.count() == 3);
  CHECK(t.size() == 256);
  CHECK(t[0].bandwidth == doctest::Approx(20e9));
  CHECK(t[0].latency == doctest::Approx(3e-6));
  CHECK(t[1].links == 2);
  CHECK(t[2].bandwidth == doctest::Approx(9.5e9));
  const auto u = ddl::topology::parse("2:1gbit:1ms,3:200Mbit/s:250ns,2:2GiB/s:1s");
  CHECK(u[0].bandwidth == doctest::Approx(125e6));
  CHECK(u[0].latency == doctest::Approx(1e-3));
  CHECK(u[1].bandwidth == doctest::Approx(25e6));
  CHECK(u[1].latency == doctest::Approx(250e-9));
  CHECK(u[2].bandwidth == doctest::Approx(2147483648.0));
  CHECK(ddl::topology::parse(t.str()).str() == t.str());

  // The caret line sits under the bad unit: "GX/s" starts at offset 18 of the string.
  const std::string e1 = error_of("4:20GB/s:3us,16:10GX/s:5us");
  CHECK(e1.find("level 2") != std::string::npos);
  CHECK(e1.find("unknown unit 'GX/s'") != std::string::npos);
  CHECK(e1.find("\n  " + std::string(18, ' ') + "^^^^") != std::string::npos);
  CHECK(error_of("4:20GB/s").find("needs extent:bandwidth:latency") != std::string::npos);
  CHECK(error_of("0:20GB/s:3us").find("extent '0' is not a positive integer") != std::string::npos);
  CHECK(error_of("4:fastGB/s:3us").find("bandwidth 'fastGB/s' does not start with a number") != std::string::npos);
  CHECK(error_of("4:1GB/s:3parsecs").find("latency '3parsecs': unknown unit") != std::string::npos);
  CHECK(error_of("4:1GB/s:3us:0").find("links '0'") != std::string::npos);
  CHECK(error_of("").find("empty") != std::string::npos);
  // Numbers no link has: infinities and absurd magnitudes.
  CHECK(error_of("4:1e400GB/s:1us").find("bandwidth '1e400GB/s' is not finite") != std::string::npos);
  CHECK(error_of("4:2000TB/s:1us").find("bandwidth above 1 PB/s") != std::string::npos);
  CHECK(error_of("4:1GB/s:1e300s").find("latency above 1000 s") != std::string::npos);
  CHECK(error_of("4:1GB/s:1us:x1e400GB/s").find("is not finite") != std::string::npos);
  // Underflow is rejected like overflow: 1e-400 reads as 0 (or a denormal).
  CHECK(error_of("4:1GB/s:1e-400s").find("latency '1e-400' is too small for a double") != std::string::npos);
  CHECK(error_of("4:1e-400GB/s:1us").find("too small for a double") != std::string::npos);
  CHECK(error_of("4:1GB/s:1e-320s").find("too small for a double") != std::string::npos);
  // Whitespace anywhere is an error, leading as trailing, pointing at it.
  for (const char* bad : {" 4:1GB/s:1us", "4:1GB/s:1us ", "4: 1GB/s:1us", "4:1GB/s:1us:\t2", "4:1GB/s:1us, 2:1GB/s:1us"}) {
    const std::string e = error_of(bad);
    CHECK_MESSAGE(e.find("whitespace at offset") != std::string::npos, bad, " -> ", e);
    const std::size_t at = std::string(bad).find_first_of(" \t");
    CHECK_MESSAGE(e.find("\n  " + std::string(at, ' ') + "^") != std::string::npos, bad, " -> ", e);
  }
  // A long input is quoted in a window of at most ~200 characters around the
  // fault, its caret still under it.
  {
    const std::string long_text = "2:1GB/s:" + std::string(300, '0') + "1parsec";
    const std::string e = error_of(long_text.c_str());
    CHECK(e.find("unknown unit 'parsec'") != std::string::npos);
    CHECK(e.size() < 700);
    const std::size_t nl = e.find("\n  "), nl2 = e.find("\n  ", nl + 1);
    REQUIRE(nl2 != std::string::npos);
    const std::string quoted = e.substr(nl + 3, nl2 - nl - 3), caret = e.substr(nl2 + 3);
    CHECK(quoted.size() <= 206);
    CHECK(quoted.substr(0, 3) == "...");
    REQUIRE(caret.size() == quoted.find("parsec") + 6);
    CHECK(caret.substr(quoted.find("parsec")) == "^^^^^^");
    const std::string junk(5000, '9');
    const std::string e2 = error_of(("4:" + junk + "GX/s:1us").c_str());
    CHECK(e2.find("unknown unit") != std::string::npos);
    CHECK(e2.size() < 700);
  }
  CHECK_THROWS_AS(ddl::topology::uniform(4, 1e300, 1e-6), ddl::topology_error);

  setenv("DDL_TOPOLOGY", "2:1GB/s:1us,3:1GB/s:1us", 1);
  CHECK(ddl::topology::from_env(6, ddl::topology::uniform(6, 1, 1)).count() == 2);
  CHECK_THROWS_AS(ddl::topology::from_env(8, ddl::topology::uniform(8, 1, 1)), ddl::topology_error);
  unsetenv("DDL_TOPOLOGY");
}

TEST_CASE("DDL_TOPOLOGY: an exchange bandwidth, with or without links, round-trips through str()") {
  const auto t = ddl::topology::parse("2:24MB/s:30us:2:x18MB/s,4:1GB/s:3us:x0.8GB/s,3:1GB/s:1us:x1GB/s:4");
  REQUIRE(t.count() == 3);
  CHECK(t[0].links == 2);
  CHECK(t[0].exchange == doctest::Approx(18e6));
  CHECK(t[1].links == 0);
  CHECK(t[1].exchange == doctest::Approx(0.8e9));
  CHECK(t[2].links == 4);
  CHECK(t[2].exchange == doctest::Approx(1e9));
  const auto back = ddl::topology::parse(t.str());
  for (std::size_t l = 0; l < 3; ++l) {
    CHECK(back[l].links == t[l].links);
    CHECK(back[l].exchange == doctest::Approx(t[l].exchange));
  }
  CHECK(ddl::topology::parse("4:1GB/s:3us").str().find(":x") == std::string::npos);
  static_assert(ddl::level_c<2, 1'000'000'000, 0, 0, 500'000'000>::value.exchange == 5e8);
  static_assert(ddl::level_c<2, 1'000'000'000, 0>::value.exchange == 0);
  CHECK(error_of("4:1GB/s:3us:xfast").find("exchange bandwidth 'fast' does not start with a number") != std::string::npos);
  CHECK(error_of("4:1GB/s:3us:x1GB/s:x2GB/s").find("exchange bandwidth twice") != std::string::npos);
  CHECK(error_of("4:1GB/s:3us:2:3").find("too many fields") != std::string::npos);
  CHECK(error_of("4:1GB/s:3us:x0GB/s").find("exchange bandwidth must be positive") != std::string::npos);
}

TEST_CASE("DDL_TOPOLOGY: private links, in any place after the latency, round-trip through str(); said twice is an error") {
  const auto t = ddl::topology::parse("4:20GB/s:3us:private,16:10GB/s:5us:1:private,4:9.5GB/s:8us:x9GB/s:private:2");
  REQUIRE(t.count() == 3);
  CHECK(t[0].private_links);
  CHECK(t[0].links == 0);
  CHECK(t[1].private_links);
  CHECK(t[1].links == 1);
  CHECK(t[2].private_links);
  CHECK(t[2].links == 2);
  CHECK(t[2].exchange == doctest::Approx(9e9));
  CHECK_FALSE(ddl::topology::parse("4:20GB/s:3us")[0].private_links);
  const auto back = ddl::topology::parse(t.str());
  CHECK(back.str() == t.str());
  for (std::size_t l = 0; l < 3; ++l) {
    CHECK(back[l].private_links == t[l].private_links);
    CHECK(back[l].links == t[l].links);
  }
  CHECK(ddl::topology::parse("4:1GB/s:3us").str().find("private") == std::string::npos);
  static_assert(ddl::level_c<4, 20'000'000'000, 3000, 0, 0, true>::value.private_links);
  static_assert(!ddl::level_c<4, 20'000'000'000, 3000>::value.private_links);
  CHECK(error_of("4:1GB/s:3us:private:private").find("says 'private' twice") != std::string::npos);
  CHECK(error_of("4:1GB/s:3us:privat").find("links 'privat' is not a positive integer") != std::string::npos);
  CHECK(error_of("4:1GB/s:3us:1:x1GB/s:private:2").find("too many fields") != std::string::npos);
}

TEST_CASE("implausible_link: probed figures outside the machine's bounds are named, sane ones pass") {
  const ddl::link_bounds b{0.2e-6, 40e9};
  CHECK(ddl::implausible_link(2e-6, 5e9, b).empty());
  CHECK(ddl::implausible_link(0.2e-6, 40e9, b).empty());  // at the bounds
  // What MPICH's probe once reported inside a node: 131 TB/s.
  CHECK(ddl::implausible_link(74e-6, 131072e9, b).find("above this machine's memory bandwidth") != std::string::npos);
  CHECK(ddl::implausible_link(0.05e-6, 1e9, b).find("latency") != std::string::npos);
  CHECK(ddl::implausible_link(1e-6, 0, b).find("not measured") != std::string::npos);
  CHECK(ddl::implausible_link(1e-6, -3e9, b).find("not measured") != std::string::npos);
}

TEST_CASE("group_by_bandwidth_gap: racks from a bandwidth matrix, without MPI") {
  // 4 nodes, two racks {0, 2} and {1, 3} (interleaved), 5:1 between them.
  auto matrix = [](int n, auto f) {
    std::vector<double> m(static_cast<std::size_t>(n * n), 0.0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) m[static_cast<std::size_t>(i * n + j)] = f(i, j);
    return m;
  };
  const auto racks = ddl::group_by_bandwidth_gap(
      matrix(4, [](int i, int j) { return i % 2 == j % 2 ? 120e6 : 24e6; }), 4, 1.5);
  CHECK(racks.clean);
  CHECK(racks.groups == 2);
  CHECK(racks.group == std::vector<int>{0, 1, 0, 1});
  CHECK(racks.gap == doctest::Approx(5.0));
  CHECK(racks.threshold > 24e6);
  CHECK(racks.threshold < 120e6);

  // Uniform links (with noise under the ratio): one level.
  const auto flat = ddl::group_by_bandwidth_gap(
      matrix(4, [](int i, int j) { return 100e6 + 5e6 * ((i + j) % 3); }), 4, 1.5);
  CHECK_FALSE(flat.clean);
  CHECK(flat.groups == 1);
  CHECK(flat.why.find("no bandwidth gap") != std::string::npos);

  // A gap that does not give equal groups (3 fast nodes + 1 slow): one level.
  const auto uneven = ddl::group_by_bandwidth_gap(
      matrix(4, [](int i, int j) { return i < 3 && j < 3 ? 120e6 : 20e6; }), 4, 1.5);
  CHECK_FALSE(uneven.clean);
  CHECK(uneven.why.find("equal") != std::string::npos);

  // Inconsistent: 0-1 fast, 1-2 fast, 0-2 slow (fast pairs are not a partition).
  std::vector<double> chain = matrix(3, [](int i, int j) { return std::abs(i - j) == 1 ? 100e6 : 10e6; });
  CHECK_FALSE(ddl::group_by_bandwidth_gap(chain, 3, 1.5).clean);

  // One node, and a matrix of the wrong size.
  CHECK(ddl::group_by_bandwidth_gap({0.0}, 1, 1.5).groups == 1);
  CHECK_THROWS_AS(ddl::group_by_bandwidth_gap({1, 2, 3}, 2, 1.5), ddl::invalid_argument);
}

TEST_CASE("node layout from per-rank keys: nodes by first rank, ranks in order inside, node-major numbers") {
  // Interleaved hosts: ranks 0, 2, 4 on "b", 1, 3, 5 on "a" ("b" comes first: rank 0 is there).
  const std::vector<std::string> keys{"b", "a", "b", "a", "b", "a"};
  for (int r = 0; r < 6; ++r) {
    const ddl::node_layout L = ddl::detail::layout_of(keys, r);
    CHECK(L.nodes == 2);
    CHECK(L.uniform);
    CHECK(L.node == r % 2);
    CHECK(L.local_rank == r / 2);
    CHECK(L.local_size == 3);
    CHECK(ddl::detail::node_major_rank(L) == (r % 2) * 3 + r / 2);
  }
  // Uneven nodes: 1 + 3, and a lone rank.
  const std::vector<std::string> uneven{"x", "y", "y", "y"};
  const ddl::node_layout U = ddl::detail::layout_of(uneven, 3);
  CHECK(!U.uniform);
  CHECK(U.node_sizes == std::vector<int>{1, 3});
  CHECK(ddl::detail::node_major_rank(U) == 3);
  // Whether numbering node by node moves anyone: only when a node's ranks are not contiguous.
  CHECK(!ddl::detail::node_major_already(keys));
  CHECK(ddl::detail::node_major_already(uneven));
  CHECK(ddl::detail::node_major_already({"a", "a", "b", "b", "c"}));
  CHECK(!ddl::detail::node_major_already({"a", "b", "a"}));
  CHECK(ddl::detail::node_major_already({}));
  const ddl::node_layout one = ddl::detail::layout_of({"solo"}, 0);
  CHECK((one.nodes == 1 && one.local_size == 1 && ddl::detail::node_major_rank(one) == 0));
}
