// The cost model and the planner: prices by hand, the plans each transport
// and topology gets, explain, and the plans that must give the same bits.
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

// The paper's cluster (§4.3, §5): 4 racks x 16 nodes x 4 GPUs, links of
// ~20 GB/s (NVLink), ~10 GB/s (in rack), ~9.5 GB/s (across racks); per-step
// latencies 3/5/8 us (our assumption: the paper gives none). Every rank has
// its own link at every level (links = 0).
using paper_topology = ddl::static_topology<ddl::level_c<4, 20'000'000'000, 3000>,
                                            ddl::level_c<16, 10'000'000'000, 5000>,
                                            ddl::level_c<4, 9'500'000'000, 8000>>;

TEST_CASE("cost model: a uniform ring is 2(n-1)(S/(nB) + alpha)") {
  for (int n : {1, 2, 3, 7, 16, 255})
    for (double s : {1.0, 4096.0, 1e6, 350e6}) {
      const auto t = ddl::topology::uniform(n, 12.5e9, 4e-6);
      ddl::plan p{};
      p.dims = 1;
      p.bounds = {0, 1};
      ddl::cost::price(t.data(), t.count(), p, s);
      const double formula = n == 1 ? 0 : 2.0 * (n - 1) * (s / (n * 12.5e9) + 4e-6);
      CHECK(p.seconds == doctest::Approx(formula).epsilon(1e-12));
      CHECK(ddl::cost::uniform_ring(n, s, 12.5e9, 4e-6) == doctest::Approx(formula).epsilon(1e-12));
    }
}

TEST_CASE("cost model: the paper's 256 GPUs at 350 MB and 100 MB, computed by hand") {
  const ddl::topology t(paper_topology{});
  // Flat ring, bounded by the slowest link (9.5 GB/s) and latency (8 us):
  //   350 MB: 2*255*(350e6/(256*9.5e9) + 8e-6) = 510 * 151.914 us = 77.476 ms
  //   100 MB: 2*255*(100e6/(256*9.5e9) + 8e-6) = 510 *  49.118 us = 25.050 ms
  // Multi-ring 4x16x4, GPUs then nodes then racks:
  //   350 MB: 6*(350e6/(4*20e9)+3us) + 30*(87.5e6/(16*10e9)+5us) + 6*(5.46875e6/(4*9.5e9)+8us)
  //         = 26.268 + 16.556 + 0.911 = 43.736 ms
  //   100 MB: 7.518 + 4.838 + 0.295 = 12.650 ms
  // Halving-doubling, nearest partner first: exchanges 1,2 inside a node,
  // 4..32 across nodes, 64,128 across racks, each 2*(S/2^(k+1)/B + alpha):
  //   350 MB: 43.604 ms; 100 MB: 12.518 ms (same bytes per link as the
  //   multi-ring, 16 latency steps instead of 42).
  struct expect { double bytes, flat, multi, hd; };
  for (const expect& e : {expect{350e6, 77.4764e-3, 43.7357e-3, 43.6037e-3}, expect{100e6, 25.0504e-3, 12.6502e-3, 12.5182e-3}}) {
    CAPTURE(e.bytes);
    const auto plans = ddl::all_plans(t, e.bytes);
    double flat = 0, multi = 0, hd = 0;
    for (const auto& p : plans) {
      if (p.algo == ddl::algorithm::multi_ring && p.dims == 1) flat = p.seconds;
      if (p.algo == ddl::algorithm::multi_ring && p.dims == 3 && p.order[0] == 0 && p.order[1] == 1 && p.order[2] == 2)
        multi = p.seconds;
      if (p.algo == ddl::algorithm::halving_doubling) hd = p.seconds;
    }
    CHECK(flat == doctest::Approx(e.flat).epsilon(1e-5));
    CHECK(multi == doctest::Approx(e.multi).epsilon(1e-5));
    CHECK(hd == doctest::Approx(e.hd).epsilon(1e-5));
    // The best multi-ring is 4x16x4 in natural order; the planner overall picks halving-doubling.
    const auto best_ring = ddl::best_plan(t, e.bytes, ddl::candidates::multi_ring_only);
    CHECK(best_ring.seconds == doctest::Approx(e.multi).epsilon(1e-5));
    CHECK(ddl::describe(t, best_ring) == "multi_ring 4x16x4");
    CHECK(ddl::best_plan(t, e.bytes).algo == ddl::algorithm::halving_doubling);
    CHECK(plans.front().seconds <= plans.back().seconds);
  }
  // The paper's claim: under 100 ms for 350 MB.
  CHECK(ddl::best_plan(t, 350e6).seconds < 0.1);
}

TEST_CASE("planner: latency-bound sizes take recursive doubling, bandwidth-bound ones do not") {
  const ddl::topology t(paper_topology{});
  CHECK(ddl::best_plan(t, 1024).algo == ddl::algorithm::recursive_doubling);
  const auto big = ddl::best_plan(t, 256e6);
  CHECK(big.algo != ddl::algorithm::recursive_doubling);
  CHECK(!(big.algo == ddl::algorithm::multi_ring && big.dims == 1));  // not the flat ring
  // On one uniform level with a large latency, the ring never wins small messages.
  const auto u = ddl::topology::uniform(12, 10e9, 50e-6);
  CHECK(ddl::best_plan(u, 4096).algo == ddl::algorithm::recursive_doubling);
}

// A multi-ring with one dimension per level, reduced innermost first.
static ddl::plan ring_per_level(std::size_t levels) {
  ddl::plan p;
  p.algo = ddl::algorithm::multi_ring;
  p.dims = levels;
  for (std::size_t d = 0; d <= levels; ++d) p.bounds[d] = static_cast<int>(d);
  for (std::size_t d = 0; d < levels; ++d) p.order[d] = static_cast<int>(d);
  return p;
}

TEST_CASE("cost model: exchanges (rings of two, doubling steps) use the exchange bandwidth") {
  const double S = 64e6;
  // 8 ranks on one level; exchanging runs at half the one-way rate.
  const auto one_way = ddl::topology::uniform(8, 1e9, 0);
  const auto slow_x = ddl::topology::parse("8:1GB/s:0us:x0.5GB/s");
  ddl::plan a = ring_per_level(1), b = a;
  ddl::cost::price(one_way.data(), 1, a, S);
  ddl::cost::price(slow_x.data(), 1, b, S);
  CHECK(a.seconds == doctest::Approx(ddl::cost::uniform_ring(8, S, 1e9, 0)));
  CHECK(b.seconds == doctest::Approx(a.seconds));  // a ring of 8 sends one way
  ddl::plan hd;
  hd.algo = ddl::algorithm::halving_doubling;
  ddl::plan hd_a = hd, hd_b = hd;
  ddl::cost::price(one_way.data(), 1, hd_a, S);
  ddl::cost::price(slow_x.data(), 1, hd_b, S);
  CHECK(hd_b.seconds == doctest::Approx(2 * hd_a.seconds));  // every step an exchange
  // So the planner, level between the two one way, takes the ring.
  CHECK(hd_a.seconds == doctest::Approx(a.seconds));
  CHECK(ddl::best_plan(slow_x, S).algo == ddl::algorithm::multi_ring);
  // A ring of two is an exchange: 2 ranks x 4 nodes, the node level exchanging slowly.
  const auto two = ddl::topology::parse("4:10GB/s:0us,2:1GB/s:0us:x0.25GB/s");
  ddl::plan mr = ring_per_level(2);
  ddl::cost::price(two.data(), 2, mr, S);
  // The outer ring of two moves S/4 per rank at the exchange rate (one link per rank).
  const double inner = ddl::cost::uniform_ring(4, S, 10e9, 0);
  const double outer = 2.0 * (S / 4 / 2) / 0.25e9;
  CHECK(mr.seconds == doctest::Approx(inner + outer));
}

TEST_CASE("planner: a slow outer level gets the least data") {
  // 3 ranks per node on fast links, 5 nodes on a link 20x slower. The best
  // plan reduces the slow level last, when each rank holds 1/3 of the data.
  const auto t = ddl::topology::parse("3:20GB/s:2us,5:1GB/s:20us");
  const auto p = ddl::best_plan(t, 64e6);
  REQUIRE(p.algo == ddl::algorithm::multi_ring);
  REQUIRE(p.dims == 2);
  CHECK(p.order[0] == 0);
  CHECK(p.order[1] == 1);
  // The reverse order is predicted much slower.
  ddl::plan rev = p;
  rev.order = {1, 0};
  ddl::cost::price(t.data(), t.count(), rev, 64e6);
  CHECK(rev.seconds > 2 * p.seconds);
  // Shared links make a level slower: 3 GPUs sharing 1 NIC triples its cost.
  const auto shared = ddl::topology::parse("3:20GB/s:2us,5:1GB/s:20us:1");
  CHECK(ddl::best_plan(shared, 64e6).seconds > 2 * p.seconds);
}

TEST_CASE("plan_t of a static topology is the run-time planner's choice") {
  using small_t = ddl::plan_t<paper_topology, 1024>;
  using large_t = ddl::plan_t<paper_topology, 350'000'000>;
  static_assert(std::is_same_v<small_t, ddl::recursive_doubling>);
  static_assert(std::is_same_v<large_t, ddl::halving_doubling>);
  using two_level = ddl::static_topology<ddl::level_c<3, 20'000'000'000, 2000>, ddl::level_c<5, 1'000'000'000, 20000>>;
  using ring_t = ddl::plan_t<two_level, 64'000'000>;
  static_assert(std::is_same_v<ring_t, ddl::multi_ring<ddl::extents<3, 5>, ddl::dim_order<0, 1>>>);
  const ddl::topology rt(paper_topology{});
  for (double bytes : {1024.0, 350e6}) {
    const auto a = ddl::best_plan(rt, bytes);
    const auto b = bytes < 1e4 ? ddl::plan_v<paper_topology, 1024> : ddl::plan_v<paper_topology, 350'000'000>;
    CHECK(a.algo == b.algo);
    CHECK(a.dims == b.dims);
    CHECK(a.seconds == doctest::Approx(b.seconds));
  }
  const auto c = ddl::best_plan(ddl::topology(two_level{}), 64e6);
  CHECK(c.algo == ddl::algorithm::multi_ring);
  CHECK(ddl::plan_v<two_level, 64'000'000>.order == c.order);
}

TEST_CASE("explain lists every candidate, best first, with per-phase times") {
  const ddl::topology t(paper_topology{});
  const std::string s = ddl::explain(t, 350e6);
  CHECK(s.find("* halving_doubling") != std::string::npos);
  CHECK(s.find("multi_ring 4x16x4 order 2,1,0") != std::string::npos);
  CHECK(s.find("ring (flat, 256)") != std::string::npos);
  CHECK(s.find("recursive_doubling") != std::string::npos);
  std::size_t lines = 0;
  for (char ch : s) lines += ch == '\n';
  CHECK(lines == 2 + 13);  // header lines + 11 multi-rings + 2 doubling algorithms
  ddl::local_fabric::run(2, [](ddl::local_transport& tr) {
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(tr);
    const std::string e = comm.explain(1 << 20);
    if (e.find("ring (flat, 2)") == std::string::npos) throw std::runtime_error("explain misses the flat ring");
  });
}

TEST_CASE("auto: every size on a three-level topology equals the exact reference (and so the ring) bit for bit") {
  // Costs chosen so that small sizes take recursive doubling and large ones
  // a multi-ring, on 12 ranks (not a power of two).
  const auto topo = ddl::topology::parse("2:20GB/s:1us,3:2GB/s:30us,2:0.5GB/s:100us");
  CHECK(ddl::best_plan(topo, 64).algo == ddl::algorithm::recursive_doubling);
  CHECK(ddl::best_plan(topo, 64e6).algo == ddl::algorithm::multi_ring);
  failure_log log;
  run_matrix<ddl::auto_strategy>(12, matrix_counts(12, 300007), log, ddl::options{}, ddl::auto_strategy(topo));
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("planner: the direct strategies, priced by memory traffic, only where ranks share memory") {
  // One level of in-process ranks: B = 4 GB/s, a latency of 8 us, M = 2 B;
  // a synchronisation round costs ceil(log2 n) latencies.
  const double b = 4e9, m = ddl::cost::direct_read_factor * b;
  for (int n : {2, 3, 4, 8}) {
    CAPTURE(n);
    const double a = 8e-6 * (n == 2 ? 1 : n <= 4 ? 2 : 3);
    const auto t = ddl::topology::uniform(n, b, 8e-6);
    for (double bytes : {4096.0, 1e6, 64e6}) {
      CAPTURE(bytes);
      double one = -1, two = -1;
      for (const auto& p : ddl::all_plans(t, bytes, {ddl::candidates::all, true})) {
        if (p.algo == ddl::algorithm::one_shot) one = p.seconds;
        if (p.algo == ddl::algorithm::two_shot) two = p.seconds;
      }
      CHECK(one == doctest::Approx(2 * a + (n + 1) * bytes / m));
      CHECK(two == doctest::Approx(3 * a + (3.0 * n - 1) * bytes / n / m));
      for (const auto& p : ddl::all_plans(t, bytes))  // without peer memory: never a candidate
        CHECK(!(p.algo == ddl::algorithm::one_shot || p.algo == ddl::algorithm::two_shot));
    }
  }
  // 8 ranks: recursive doubling for the smallest messages (3 steps, where
  // one_shot's 2 rounds wait on all 8 ranks: level on 8 threads, measured),
  // two_shot for large ones (least traffic).
  const auto t8 = ddl::topology::uniform(8, b, 8e-6);
  CHECK(ddl::best_plan(t8, 1024, {ddl::candidates::all, true}).algo == ddl::algorithm::recursive_doubling);
  CHECK(ddl::best_plan(t8, 64e6, {ddl::candidates::all, true}).algo == ddl::algorithm::two_shot);
  CHECK(ddl::best_plan(t8, 64e6).algo != ddl::algorithm::two_shot);
  const std::string e = ddl::explain(t8, 64e6, {ddl::candidates::all, true});
  CHECK(e.find("* two_shot") != std::string::npos);
  CHECK(e.find("one_shot") != std::string::npos);
}

// How many of `all_plans(t, bytes, with)` are the two_shot variant `is(p)`
// picks, each checked to be priced at `premium` x two_shot through cached
// stages.
template <class Is>
int two_shot_variants(const ddl::topology& t, double bytes, const ddl::plan_for& with, Is is, double premium) {
  int count = 0;
  double staged = -1, variant = -1;
  for (const auto& p : ddl::all_plans(t, bytes, with)) {
    CHECK_FALSE((p.streams && p.reads));
    if (is(p)) {
      ++count;
      CHECK(p.algo == ddl::algorithm::two_shot);
      variant = p.seconds;
    } else if (p.algo == ddl::algorithm::two_shot && !p.reads && !p.streams) {
      staged = p.seconds;
    }
  }
  if (count) CHECK(variant == doctest::Approx(staged * premium));
  return count;
}

TEST_CASE("planner: two_shot reading the peers' memory is a candidate only where the ranks can, priced above the "
          "stages (the model never picks it, a measurement may), and stamped apart") {
  const auto t4 = ddl::topology::uniform(4, 4e9, 8e-6);
  ddl::plan_for q{ddl::candidates::all, true};
  for (double bytes : {1e5, 64e6}) {
    CAPTURE(bytes);
    auto count_reads = [&](const ddl::plan_for& with) {
      return two_shot_variants(t4, bytes, with, [](const ddl::plan& p) { return p.reads; }, ddl::reads_premium);
    };
    CHECK(count_reads(q) == 0);
    ddl::plan_for r = q;
    r.reads_memory = true;
    CHECK(count_reads(r) == 1);
    CHECK_FALSE(ddl::best_plan(t4, bytes, r).reads);
    CHECK(r != q);  // a different question: the auto strategy's plan cache keeps them apart
  }
  ddl::plan_for r{ddl::candidates::all, true};
  r.reads_memory = true;
  ddl::plan two{}, read{};
  for (const auto& p : ddl::all_plans(t4, 64e6, r)) {
    if (p.algo != ddl::algorithm::two_shot) continue;
    (p.reads ? read : two) = p;
  }
  CHECK(ddl::describe(t4, read) == "two_shot (read_peer)");
  CHECK(ddl::describe(t4, two) == "two_shot");
  CHECK(ddl::detail::plan_hash(read) != ddl::detail::plan_hash(two));
  CHECK(ddl::explain(t4, 64e6, r).find("two_shot (read_peer)") != std::string::npos);
}

TEST_CASE("on 2 ranks every all-reduce plan gives the same bits for sum, prod and avg (every dtype) and integers' "
          "min/max; floats' min with -0/+0 ties tells plans apart") {
  // What lets `auto` measure every algorithm on 2 ranks (`detail::order_free`).
  for (std::size_t count : {std::size_t{30011}, std::size_t{1} << 18}) {
    for (ddl::dtype dt : ddl::all_dtypes) {
      for (ddl::op op : ddl::all_ops) {
        CAPTURE(count);
        CAPTURE(ddl::name_of(dt));
        CAPTURE(ddl::name_of(op));
        const std::size_t bytes = count * ddl::size_of(dt);
        const auto topo = ddl::topology::uniform(2, 4e9, 8e-6);
        std::vector<ddl::plan> plans;
        ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
          if (t.rank() == 0) plans = ddl::all_plans(topo, static_cast<double>(bytes), ddl::plan_for::transport(t));
        });
        REQUIRE(plans.size() >= 5);
        CHECK(std::any_of(plans.begin(), plans.end(), [](const ddl::plan& p) { return p.streams; }));
        // Per plan, both ranks' results; every one compared with the first plan's rank 0.
        std::vector<std::vector<std::byte>> got(plans.size() * 2, std::vector<std::byte>(bytes));
        for (std::size_t k = 0; k < plans.size(); ++k) {
          ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
            ddl::communicator<ddl::planned, ddl::local_transport> comm(t, ddl::planned(topo, plans[k]));
            ddl::visit_dtype(dt, [&](auto tag) {
              using T = decltype(tag);
              std::mt19937 gen(99u + static_cast<unsigned>(t.rank()));
              std::normal_distribution<double> dist(0.0, 1e3);
              std::vector<T> in(count);
              for (std::size_t i = 0; i < count; ++i) {
                const double x = i % 89 == 0 ? ((t.rank() & 1) ? -0.0 : 0.0) : dist(gen);
                in[i] = std::is_integral_v<T> ? T(static_cast<std::int64_t>(x)) : T(static_cast<float>(x));
              }
              comm.all_reduce(ddl::host_view(std::as_const(in)),
                              ddl::host_view(reinterpret_cast<T*>(got[2 * k + static_cast<std::size_t>(t.rank())].data()), count),
                              op);
            });
          });
        }
        const bool floats_minmax = (op == ddl::op::min || op == ddl::op::max) && dt != ddl::dtype::int32 &&
                                   dt != ddl::dtype::int64;
        CHECK(ddl::detail::order_free(ddl::reduction{dt, op}, 2) == !floats_minmax);
        CHECK_FALSE(ddl::detail::order_free(ddl::reduction{dt, op}, 3));
        std::size_t differ = 0;
        for (std::size_t k = 1; k < got.size(); ++k) differ += got[k] != got[0];
        if (floats_minmax) {
          CHECK(differ > 0);  // the ring keeps its own -0 or +0 on one block, the doubling the lower rank's
        } else {
          CHECK(differ == 0);
        }
      }
    }
  }
}

TEST_CASE("one_shot and two_shot (and its streamed form) give the same bits on 3-5 ranks, every dtype and op, in "
          "place and out of place") {
  // What lets `auto` measure the direct plans against each other for every
  // reduction (`auto_strategy::direct_candidates`): each reduces every
  // element once, over the ranks' inputs in rank order. Inputs with -0/+0
  // ties, so floats' min and max would tell two orders apart.
  for (int n : {3, 4, 5}) {
    // 70001 floats in place: one_shot above its stage, segment by segment (`all_reduce_landed`).
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{30011}, std::size_t{70001}}) {
      for (ddl::dtype dt : ddl::all_dtypes) {
        for (ddl::op op : ddl::all_ops) {
          CAPTURE(n);
          CAPTURE(count);
          CAPTURE(ddl::name_of(dt));
          CAPTURE(ddl::name_of(op));
          const std::size_t bytes = count * ddl::size_of(dt);
          const auto topo = ddl::topology::uniform(n, 4e9, 8e-6);
          // Per rank, per plan, per placement: the result's bytes.
          std::vector<std::vector<std::byte>> got(static_cast<std::size_t>(n) * 6);
          std::vector<std::string> names(3);
          ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
            std::vector<ddl::plan> direct;
            for (const ddl::plan& p : ddl::all_plans(topo, static_cast<double>(bytes), ddl::plan_for::transport(t)))
              if (ddl::detail::is_direct(p) && !p.reads) direct.push_back(p);
            if (direct.size() != 3) throw std::runtime_error("expected one_shot, two_shot and two_shot (streamed)");
            const std::size_t r = static_cast<std::size_t>(t.rank());
            for (std::size_t k = 0; k < direct.size(); ++k) {
              if (r == 0) names[k] = ddl::describe(topo, direct[k]);
              ddl::communicator<ddl::planned, ddl::local_transport> comm(t, ddl::planned(topo, direct[k]));
              ddl::visit_dtype(dt, [&](auto tag) {
                using T = decltype(tag);
                std::mt19937 gen(7u + static_cast<unsigned>(t.rank()));
                std::normal_distribution<double> dist(0.0, 1e3);
                std::vector<T> in(count), out(count);
                for (std::size_t i = 0; i < count; ++i) {
                  const double x = i % 89 == 3 ? ((t.rank() & 1) ? -0.0 : 0.0) : dist(gen);
                  // Integers small enough that a product of 5 fits.
                  in[i] = std::is_integral_v<T> ? T(static_cast<std::int64_t>(x) % 50) : T(static_cast<float>(x));
                }
                std::vector<T> v = in;
                comm.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), op);
                comm.all_reduce(ddl::host_view(v), op);
                for (int placed = 0; placed < 2; ++placed) {
                  const auto& res = placed ? v : out;
                  auto& dst = got[(r * 3 + k) * 2 + static_cast<std::size_t>(placed)];
                  dst.resize(bytes);
                  if (bytes) std::memcpy(dst.data(), res.data(), bytes);
                }
              });
            }
          });
          for (std::size_t j = 1; j < got.size(); ++j) {
            const std::size_t k = (j / 2) % 3;
            CAPTURE(names[k]);
            CAPTURE(j / 6);  // the rank
            CAPTURE(j % 2);  // in place
            CHECK(got[j] == got[0]);
          }
        }
      }
    }
  }
}

TEST_CASE("planner: two_shot with its stages streamed is a candidate only where asked, priced above the others "
          "(measured, never modelled), and stamped apart") {
  const auto t4 = ddl::topology::uniform(4, 4e9, 8e-6);
  ddl::plan_for q{ddl::candidates::all, true};
  q.reads_memory = true;
  ddl::plan_for s = q;
  s.streams_stages = true;
  CHECK(s != q);
  for (double bytes : {1e5, 64e6}) {
    CAPTURE(bytes);
    auto streamed = [&](const ddl::plan_for& with) {
      return two_shot_variants(t4, bytes, with, [](const ddl::plan& p) { return p.streams; }, ddl::streams_premium);
    };
    CHECK(streamed(q) == 0);
    CHECK(streamed(s) == 1);
    CHECK_FALSE(ddl::best_plan(t4, bytes, s).streams);
  }
  ddl::plan two{}, read{}, stream{};
  for (const auto& p : ddl::all_plans(t4, 64e6, s)) {
    if (p.algo != ddl::algorithm::two_shot) continue;
    (p.reads ? read : p.streams ? stream : two) = p;
  }
  CHECK(ddl::describe(t4, stream) == "two_shot (streamed)");
  CHECK(ddl::detail::plan_hash(stream) != ddl::detail::plan_hash(two));
  CHECK(ddl::detail::plan_hash(stream) != ddl::detail::plan_hash(read));
  CHECK(ddl::explain(t4, 64e6, s).find("two_shot (streamed)") != std::string::npos);
}

TEST_CASE("planner: a transport's direct_read_factor prices the direct strategies (MPI's shared stages: 8x its links)") {
  // 4 ranks on a crowded node's default costs (2.5 GB/s, 20 us a step).
  const auto t = ddl::topology::uniform(4, 2.5e9, 20e-6);
  ddl::plan_for threads{ddl::candidates::all, true};
  ddl::plan_for stages = threads;
  stages.direct_read = 8;
  CHECK(threads.direct_read == ddl::cost::direct_read_factor);
  CHECK(threads != stages);  // a cache key of auto's: they must not share a plan
  double two2 = 0, two8 = 0;
  for (const auto& p : ddl::all_plans(t, 1e6, threads))
    if (p.algo == ddl::algorithm::two_shot) two2 = p.seconds;
  for (const auto& p : ddl::all_plans(t, 1e6, stages))
    if (p.algo == ddl::algorithm::two_shot) two8 = p.seconds;
  // 3 rounds of 2 latencies, then (3n-1) S / (n M) with M = factor x B.
  CHECK(two2 == doctest::Approx(6 * 20e-6 + 11.0 / 4 * 1e6 / (2 * 2.5e9)));
  CHECK(two8 == doctest::Approx(6 * 20e-6 + 11.0 / 4 * 1e6 / (8 * 2.5e9)));
  // At 256 KiB the stages' price makes a direct strategy the plan; at 2x it is not.
  CHECK(!ddl::detail::is_direct(ddl::best_plan(t, 262144, threads)));
  CHECK(ddl::detail::is_direct(ddl::best_plan(t, 262144, stages)));
  // Below a few KiB recursive doubling stays the plan either way.
  CHECK(ddl::best_plan(t, 1024, stages).algo == ddl::algorithm::recursive_doubling);
  // A round of one latency (MPI's `direct_round_one_step`): 3 latencies for two_shot.
  ddl::plan_for mpi = stages;
  mpi.direct_round_one_step = true;
  CHECK(mpi != stages);
  double two1 = 0;
  for (const auto& p : ddl::all_plans(t, 1e6, mpi))
    if (p.algo == ddl::algorithm::two_shot) two1 = p.seconds;
  CHECK(two1 == doctest::Approx(3 * 20e-6 + 11.0 / 4 * 1e6 / (8 * 2.5e9)));
  // 8 ranks of a crowded node at 64 KiB: two_shot's three rounds now cost
  // less than one_shot's reading of 8 buffers (measured 62 against 88 us).
  const auto t8 = ddl::topology::uniform(8, 1.25e9, 20e-6);
  ddl::plan_for mpi8 = mpi;
  mpi8.one_round_bytes = 65536;
  ddl::plan_for log8 = mpi8;
  log8.direct_round_one_step = false;
  CHECK(ddl::best_plan(t8, 65536, mpi8).algo == ddl::algorithm::two_shot);
  CHECK(ddl::best_plan(t8, 65536, log8).algo == ddl::algorithm::one_shot);
  CHECK(ddl::best_plan(t8, 4096, mpi8).algo == ddl::algorithm::one_shot);
}

namespace {
// A transport's pricing hints only (what plan_for::transport reads of a type).
struct hinted_transport {
  using request = int;
  static constexpr bool peer_memory = true;
  static constexpr double direct_read_factor = 5.0;
  static constexpr double copy_step_factor = 1.25;
  static constexpr bool direct_round_one_step = true;
  static constexpr double default_bandwidth = 3e9, default_latency = 7e-6;
};
// One without any.
struct bare_transport {
  using request = int;
  static constexpr bool peer_memory = true;
};
}  // namespace

TEST_CASE("planner: a group view is priced as its parent (direct hints and default link costs forwarded)") {
  using view = ddl::group_view<hinted_transport>;
  const ddl::plan_for parent = ddl::plan_for::transport<hinted_transport>();
  const ddl::plan_for group = ddl::plan_for::transport<view>();
  CHECK(parent.direct_read == 5.0);
  CHECK(parent.copy_step == 1.25);
  CHECK(parent.direct_round_one_step);
  CHECK(group == parent);
  CHECK(ddl::default_link<view>::bandwidth == 3e9);
  CHECK(ddl::default_link<view>::latency == 7e-6);
  // The threads' own, through a view of them.
  using threads = ddl::group_view<ddl::local_transport>;
  CHECK(ddl::plan_for::transport<threads>().copy_step == ddl::local_transport::copy_step_factor);
  CHECK(ddl::plan_for::transport<threads>().direct_read == ddl::local_transport::direct_read_factor);
  CHECK(ddl::default_link<threads>::bandwidth == ddl::default_link<ddl::local_transport>::bandwidth);
  CHECK(ddl::default_link<threads>::latency == ddl::default_link<ddl::local_transport>::latency);
  // A parent without hints: none made up (the planner's defaults apply).
  using plain = ddl::group_view<bare_transport>;
  CHECK(!ddl::detail::has_direct_read_factor<plain>::value);
  CHECK(!ddl::detail::has_copy_step_factor<plain>::value);
  CHECK(ddl::plan_for::transport<plain>().direct_read == ddl::cost::direct_read_factor);
  CHECK(ddl::plan_for::transport<plain>().copy_step == ddl::cost::copy_step_factor);
  CHECK(!ddl::plan_for::transport<plain>().direct_round_one_step);
}

TEST_CASE("planner: copy steps at the transport's copy_step_factor (threads: a copy moves 2 bytes, a reduce 3)") {
  const double b = ddl::local_transport::default_bandwidth, a = ddl::local_transport::default_latency;
  const double c = ddl::local_transport::copy_step_factor;
  CHECK(c == 1.5);
  const ddl::plan_for threads = ddl::plan_for::transport<ddl::local_transport>();
  ddl::plan_for alike = threads;
  alike.copy_step = 1;
  CHECK(alike != threads);  // a cache key of auto's: they must not share a plan
  auto price = [](const ddl::topology& t, double s, ddl::algorithm algo, std::size_t dims, ddl::plan_for q) {
    for (const auto& p : ddl::all_plans(t, s, q))
      if (p.algo == algo && p.dims == dims && !p.direct_first && p.segments == 1) return p.seconds;
    return -1.0;
  };
  using algo = ddl::algorithm;
  const double s = 3e6;
  // The flat ring of 5: 4 reduce steps at B, 4 copy steps at c B; the closed form with c = 1.
  const auto t5 = ddl::topology::uniform(5, b, a);
  CHECK(price(t5, s, algo::multi_ring, 1, threads) == doctest::Approx(4 * (s / 5 / b + a) + 4 * (s / 5 / (c * b) + a)));
  CHECK(price(t5, s, algo::multi_ring, 1, alike) == doctest::Approx(ddl::cost::uniform_ring(5, s, b, a)));
  // Halving-doubling on 5 (4 and a fold): halves reduced, halves copied back, the fold in and out.
  CHECK(price(t5, s, algo::halving_doubling, 0, threads) ==
        doctest::Approx((s / 2 / b + a) + (s / 2 / (c * b) + a) + (s / 4 / b + a) + (s / 4 / (c * b) + a) +
                        s / b + s / (c * b) + 2 * a));
  // Recursive doubling copies nothing but the fold's return.
  CHECK(price(t5, s, algo::recursive_doubling, 0, threads) ==
        doctest::Approx(2 * (s / b + a) + s / b + s / (c * b) + 2 * a));
  // 2 threads out of place: the exchange (reduce S) below 6 alpha B, the
  // halves (reduce S/2, copy S/2) above; priced alike, the exchange at
  // every size (measured: 1.3-1.5x the best from 1 MiB, shared-memory.md).
  const auto t2 = ddl::topology::uniform(2, b, a);
  const double knee = 6 * a * b;
  CHECK(ddl::best_plan(t2, 0.8 * knee, threads).algo == algo::recursive_doubling);
  CHECK(ddl::best_plan(t2, 1.25 * knee, threads).algo != algo::recursive_doubling);
  CHECK(ddl::best_plan(t2, 64e6, threads).algo != algo::recursive_doubling);
  CHECK(ddl::best_plan(t2, 64e6, alike).algo == algo::recursive_doubling);
  // 4 threads: one_shot through the counters at 64 KiB (measured 36 us
  // against recursive doubling's 57), two_shot at 64 MiB (0.76 of the floor).
  const auto t4 = ddl::topology::uniform(4, b, a);
  CHECK(ddl::best_plan(t4, 65536, threads).algo == algo::one_shot);
  CHECK(ddl::best_plan(t4, 64e6, threads).algo == algo::two_shot);
}

TEST_CASE("planner: one_shot through counters in the stages is one latency up to its limit, two rounds above it") {
  // 2, 4 and 8 ranks on a crowded node's costs (2.5 GB/s, 20 us a step), the stages' 8x.
  for (int n : {2, 4, 8}) {
    CAPTURE(n);
    const auto t = ddl::topology::uniform(n, 2.5e9, 20e-6);
    ddl::plan_for stages{ddl::candidates::all, true};
    stages.direct_read = 8;
    ddl::plan_for flagged = stages;
    flagged.one_round_bytes = 65536;
    CHECK(flagged != stages);  // a cache key of auto's
    const double alpha = 20e-6, sigma = alpha * (n == 2 ? 1 : n == 4 ? 2 : 3), m = 8 * 2.5e9;
    auto one_shot = [&](double bytes, ddl::plan_for q) {
      for (const auto& p : ddl::all_plans(t, bytes, q))
        if (p.algo == ddl::algorithm::one_shot) return p.seconds;
      return -1.0;
    };
    for (double bytes : {8.0, 4096.0, 65536.0}) {
      CAPTURE(bytes);
      CHECK(one_shot(bytes, flagged) == doctest::Approx(alpha + (n + 1) * bytes / m));
      CHECK(one_shot(bytes, stages) == doctest::Approx(2 * sigma + (n + 1) * bytes / m));
      // In place it adds nothing (the input goes into the stage either way).
      ddl::plan_for ip = flagged;
      ip.in_place = true;
      CHECK(one_shot(bytes, ip) == doctest::Approx(one_shot(bytes, flagged)));
      // Under recursive doubling's ceil(log2 n) steps: the plan for small calls.
      CHECK(ddl::best_plan(t, bytes, flagged).algo == ddl::algorithm::one_shot);
    }
    CHECK(one_shot(65537, flagged) == doctest::Approx(2 * sigma + (n + 1) * 65537.0 / m));
  }
}

TEST_CASE("planner: threads' two_shot pushes its blocks (two synchronisations, not three); not in a "
          "direct_first dimension, not over a transport without peer memory") {
  struct messages_only {};  // no `peer_memory`: nothing to push into
  static_assert(ddl::two_shot_pushes_v<ddl::local_transport>);
  static_assert(!ddl::two_shot_pushes_v<messages_only>);
  const ddl::plan_for threads = ddl::plan_for::transport<ddl::local_transport>();
  CHECK(threads.two_shot_pushes);
  ddl::plan_for pulled = threads;
  pulled.two_shot_pushes = false;
  CHECK(pulled != threads);  // a cache key of auto's
  for (int n : {2, 3, 4, 8}) {
    CAPTURE(n);
    const double alpha = 8e-6, b = 4e9;
    const auto t = ddl::topology::uniform(n, b, alpha);
    int rounds = 0;
    while ((1 << rounds) < n) ++rounds;
    auto price = [&](double bytes, const ddl::plan_for& q) {
      for (const auto& p : ddl::all_plans(t, bytes, q))
        if (p.algo == ddl::algorithm::two_shot && !p.streams && !p.reads) return p.seconds;
      return -1.0;
    };
    for (double bytes : {1048576.0, 67108864.0}) {
      CAPTURE(bytes);
      // One synchronisation round (ceil(log2 n) latencies) less, the same memory traffic.
      CHECK(price(bytes, pulled) - price(bytes, threads) == doctest::Approx(rounds * alpha));
      // The direct_first multi-ring's dimension runs a reduce-scatter and an all-gather: not pushed.
      CHECK(ddl::cost::direct_dimension(&t[0], 0, 1, bytes, threads.costs()) ==
            doctest::Approx(ddl::cost::direct_dimension(&t[0], 0, 1, bytes, pulled.costs())));
    }
  }
}

TEST_CASE("planner: two_shot run whole by the transport (flagged_two_shot) costs 1.5 flagged meetings for its "
          "three rounds; a transport's flagged_latency prices both flagged calls") {
  // CUDA's costs: 10 us per rank a step, 200 GB/s, the read factor 2; a
  // flagged meeting at 1 latency (the default) and at cuda_peer_transport's.
  for (double f : {1.0, 0.5})
    for (int n : {2, 4, 8}) {
      CAPTURE(f);
      CAPTURE(n);
      const double alpha = 10e-6 * n, m = 2 * 200e9;
      const auto t = ddl::topology::uniform(n, 200e9, alpha);
      ddl::plan_for messages{ddl::candidates::all, true};
      ddl::plan_for whole = messages;
      whole.two_shot_one_round = true;
      whole.flagged_latency = f;
      CHECK(whole != messages);  // a cache key of auto's
      int rounds = 0;
      while ((1 << rounds) < n) ++rounds;
      auto price = [&](ddl::algorithm a, double bytes, ddl::plan_for q) {
        for (const auto& p : ddl::all_plans(t, bytes, q))
          if (p.algo == a) return p.seconds;
        return -1.0;
      };
      for (double bytes : {8.0, 1048576.0, 268435456.0}) {
        CAPTURE(bytes);
        CHECK(price(ddl::algorithm::two_shot, bytes, whole) ==
              doctest::Approx(1.5 * f * alpha + (3 * n - 1) * bytes / n / m));
        CHECK(price(ddl::algorithm::two_shot, bytes, messages) ==
              doctest::Approx(3 * rounds * alpha + (3 * n - 1) * bytes / n / m));
      }
      // one_shot through messages is unchanged by it; through counters it
      // costs one meeting, and stays the plan for small calls.
      CHECK(price(ddl::algorithm::one_shot, 4096.0, whole) ==
            doctest::Approx(2 * rounds * alpha + (n + 1) * 4096.0 / m));
      ddl::plan_for both = whole;  // as cuda_peer_transport's in-place calls
      both.one_round_bytes = 65536;
      both.in_place = true;
      CHECK(price(ddl::algorithm::one_shot, 4096.0, both) == doctest::Approx(f * alpha + (n + 1) * 4096.0 / m));
      CHECK(ddl::best_plan(t, 8, both).algo == ddl::algorithm::one_shot);
      CHECK(ddl::best_plan(t, 65536, both).algo == ddl::algorithm::one_shot);
      if (f < 1 || n > 2) CHECK(ddl::best_plan(t, 4 << 20, both).algo == ddl::algorithm::two_shot);
      // At half a latency the whole call takes 2 ranks' 128 KiB from
      // recursive doubling's one step of messages (H100: 30 us against 43).
      if (f < 1 && n == 2) CHECK(ddl::best_plan(t, 131072, both).algo == ddl::algorithm::two_shot);
    }
}

TEST_CASE("planner: in place, recursive doubling pays for its copy back (odd exchange counts) and one_shot for its own") {
  const double b = 4e9, a = 8e-6, bytes = 64e6;
  for (int n : {2, 4, 8}) {
    CAPTURE(n);
    const auto t = ddl::topology::uniform(n, b, a);
    for (const auto& p : ddl::all_plans(t, bytes, {ddl::candidates::all, true, true})) {
      ddl::plan plain = p;
      ddl::cost::price(t.data(), t.count(), plain, bytes);
      const bool odd = n == 2 || n == 8;
      const bool copies = p.algo == ddl::algorithm::one_shot || (p.algo == ddl::algorithm::recursive_doubling && odd);
      CHECK(p.seconds == doctest::Approx(plain.seconds + (copies ? bytes / (1.5 * b) : 0.0)));
    }
  }
  // Two ranks: out of place one exchange (recursive doubling) is cheapest;
  // in place its copy back makes it lose to an algorithm that needs none.
  const auto t2 = ddl::topology::uniform(2, b, a);
  CHECK(ddl::best_plan(t2, bytes, {ddl::candidates::all, true}).algo == ddl::algorithm::recursive_doubling);
  CHECK(ddl::best_plan(t2, bytes, {ddl::candidates::all, true, true}).algo != ddl::algorithm::recursive_doubling);
}

TEST_CASE("auto on in-process ranks: the direct strategies where they win, exact at every size and on 1-8 ranks") {
  // The matrix's sizes cross both direct strategies: two_shot chosen on 8
  // ranks, one_shot measured among the close candidates on 3 (1009 floats).
  REQUIRE(ddl::best_plan(ddl::topology::uniform(8, 4e9, 8e-6), 4e6, {ddl::candidates::all, true}).algo ==
          ddl::algorithm::two_shot);
  bool one_measured = false;
  for (const auto& p : ddl::detail::tuning_candidates(ddl::topology::uniform(3, 4e9, 8e-6), 1009 * 4.0,
                                                      {ddl::candidates::all, true}, ddl::detail::plan_tuner::within,
                                                      ddl::detail::plan_tuner::max_candidates))
    one_measured = one_measured || p.algo == ddl::algorithm::one_shot;
  REQUIRE(one_measured);
  failure_log log;
  ddl::options tuned;  // measured choices: trials of every candidate across the matrix's sizes
  tuned.tune_bytes = std::size_t{16} << 20;
  for (int n : {3, 8}) {
    run_matrix<ddl::auto_strategy>(n, matrix_counts(n, 300007), log, tuned,
                                   ddl::auto_strategy(ddl::topology::uniform(n, 4e9, 8e-6)));
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());
  ddl::local_fabric::run(4, [](ddl::local_transport& tr) {
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(tr, ddl::auto_strategy(ddl::topology::uniform(4, 4e9, 8e-6)));
    if (comm.explain(64 << 20).find("* two_shot") == std::string::npos)
      throw std::runtime_error("auto over local ranks does not plan two_shot for 64 MiB:\n" + comm.explain(64 << 20));
  });
}

TEST_CASE("auto: the plans it keeps answer each question as a fresh planner would, whatever the order asked") {
  // More questions (sizes x candidates x placement) than auto keeps
  // answers for, asked in turns: a kept answer must never serve a question
  // that differs in any part.
  const ddl::topology topo = ddl::topology::uniform(4, 4e9, 8e-6);
  ddl::local_fabric::run(4, [&](ddl::local_transport& tr) {
    ddl::auto_strategy kept(topo);
    kept.validate(tr);
    std::set<std::string> answers;
    for (int round = 0; round < 3; ++round)
      for (std::size_t bytes : {std::size_t{8}, std::size_t{64} << 10, std::size_t{4} << 20, std::size_t{64} << 20})
        for (auto which : {ddl::candidates::all, ddl::candidates::multi_ring_only})
          for (bool in_place : {false, true}) {
            ddl::auto_strategy fresh(topo);
            fresh.validate(tr);
            const std::string got = ddl::describe(topo, kept.choose(bytes, which, in_place));
            const std::string want = ddl::describe(topo, fresh.choose(bytes, which, in_place));
            if (got != want)
              throw std::runtime_error("auto answered " + got + " for " + std::to_string(bytes) +
                                       " bytes where a fresh planner says " + want);
            answers.insert(std::to_string(bytes) + ": " + want);
          }
    // The questions have different answers (else the check above is empty).
    if (answers.size() < 6) throw std::runtime_error("too few distinct plans to test the cache");
  });
}

TEST_CASE("planner: multi-rings pipelined across levels, priced as fill plus K-1 passes of the busiest level") {
  // 2 x 2 ranks: dimension 0 an exchange at 10 GB/s, dimension 1 one at 1 GB/s.
  const double b0 = 10e9, a0 = 1e-6, b1 = 1e9, a1 = 10e-6, S = 64e6;
  const auto t = ddl::topology::parse("2:10GB/s:1us,2:1GB/s:10us");
  const ddl::plan_for pipelined{ddl::candidates::all, false, false, true};
  int seen = 0;
  for (const auto& p : ddl::all_plans(t, S, pipelined)) {
    if (p.segments == 1) continue;
    ++seen;
    CAPTURE(ddl::describe(t, p));
    REQUIRE(p.dims == 2);
    CHECK((p.segments == 2 || p.segments == 4 || p.segments == 8 || p.segments == 16));
    const double K = p.segments, s = S / K;
    if (p.order[0] == 0) {  // inner ring first: tau_0 on S/K, tau_1 on S/2K; the outer ring's bytes also cross level 0
      const double tau0 = 2 * (s / (2 * b0) + a0), tau1 = 2 * (s / 2 / (2 * b1) + a1);
      const double busy0 = tau0 + s / 2 / b0, busy1 = tau1;
      CHECK(p.seconds == doctest::Approx(tau0 + tau1 + (K - 1) * std::max(busy0, busy1)));
      CHECK(ddl::describe(t, p) == "multi_ring 2x2 pipelined x" + std::to_string(p.segments));
    }
    ddl::plan plain = p;
    plain.segments = 1;
    ddl::cost::price(t.data(), t.count(), plain, S);
    CHECK(p.seconds < plain.seconds);
  }
  CHECK(seen == 2);  // both orders
  // Not without the transport's consent, never on one level, and the plain
  // candidates stay as they were.
  for (const auto& p : ddl::all_plans(t, S)) CHECK(p.segments == 1);
  for (const auto& p : ddl::all_plans(ddl::topology::uniform(8, 1e9, 1e-6), S, pipelined)) CHECK(p.segments == 1);
  CHECK(ddl::plan_for::transport<ddl::local_transport>().pipeline);
  CHECK(ddl::explain(t, S, pipelined).find("* multi_ring 2x2 pipelined x") != std::string::npos);
  // Small messages: the segments' extra steps cost more than they hide.
  CHECK(ddl::best_plan(t, 4096, pipelined).segments == 1);
}

TEST_CASE("planner: a multi-ring's first dimension through shared memory, priced as two_shot on its levels, only inside shared levels") {
  // 4 ranks a node at 10 GB/s, 2 nodes at 1 GB/s; level 0 shares memory.
  const double b0 = 10e9, a0 = 1e-6, b1 = 1e9, a1 = 10e-6, m = ddl::cost::direct_read_factor * b0;
  const auto t = ddl::topology::parse("4:10GB/s:1us,2:1GB/s:10us");
  ddl::plan_for q;
  q.shared_levels = 1;
  for (double S : {4096.0, 1e6, 64e6}) {
    CAPTURE(S);
    int seen = 0;
    for (const auto& p : ddl::all_plans(t, S, q)) {
      if (!p.direct_first) continue;
      ++seen;
      CAPTURE(ddl::describe(t, p));
      REQUIRE(p.dims == 2);
      CHECK(p.order[0] == 0);  // only the node dimension lies inside level 0
      CHECK(p.segments == 1);
      // two_shot on 4 ranks: 3 rounds of 2 latencies, (3n-1)S/(nM); then an exchange of S/4 across nodes.
      const double inner = 3 * 2 * a0 + 11.0 * S / 4 / m, outer = 2 * (S / 4 / (2 * b1) + a1);
      CHECK(p.seconds == doctest::Approx(inner + outer));
      CHECK(ddl::describe(t, p) == "multi_ring 4x2 direct-first");
    }
    CHECK(seen == 1);
    // Not where level 0 does not share memory, nor the whole-group direct strategies.
    for (const auto& p : ddl::all_plans(t, S)) CHECK_FALSE(p.direct_first);
    for (const auto& p : ddl::all_plans(t, S, q))
      CHECK(!(p.algo == ddl::algorithm::one_shot || p.algo == ddl::algorithm::two_shot));
  }
  // Large messages: the node's slices through memory beat its ring.
  CHECK(ddl::best_plan(t, 64e6, q).direct_first);
  // Threads share every level: the candidate is there without asking.
  CHECK(ddl::plan_for::transport<ddl::local_transport>().shared_levels >= 2);
  ddl::local_fabric::run(1, [](ddl::local_transport& tr) {
    CHECK(ddl::shared_levels(tr, ddl::topology::parse("1:10GB/s:1us,1:1GB/s:10us")) == 2);
  });
}

TEST_CASE("multi_ring::direct_first: in describe, kept by validate, not pipelined") {
  using dyn_ring = ddl::multi_ring<ddl::dynamic_extents>;
  dyn_ring s({2, 3});
  s.direct_first().pipelined(4);
  CHECK(s.is_direct_first());
  CHECK(s.describe() == "multi_ring 2x3 direct-first");
  CHECK(s.all_reduce_workspace(100, ddl::dtype::float32, 6) == 0);
  dyn_ring flat;
  flat.direct_first();
  flat.validate(4);
  CHECK(flat.describe() == "multi_ring 4 direct-first");
  failure_log log;
  run_matrix<dyn_ring>(6, matrix_counts(6, 100003), log, ddl::options{}, s);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("multi_ring::pipelined: the segment count, checked, in describe and results") {
  using dyn_ring = ddl::multi_ring<ddl::dynamic_extents>;
  CHECK_THROWS_AS(dyn_ring({2, 3}).pipelined(0), ddl::invalid_argument);
  CHECK_THROWS_AS(dyn_ring({2, 3}).pipelined(25), ddl::invalid_argument);
  dyn_ring s({2, 3});
  s.pipelined(5);
  CHECK(s.segments() == 5);
  CHECK(s.describe() == "multi_ring 2x3 pipelined x5");
  failure_log log;
  run_matrix<dyn_ring>(6, matrix_counts(6, 100003), log, ddl::options{}, s);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}
