// Broadcast over in-process ranks, blocking and asynchronous: every root,
// dtype and algorithm, the root's ring in the stages, and how the plan is
// priced and chosen.
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


// Broadcasts `count` elements of T from every root in turn (asynchronously
// where `async(root)`), checking every element on this rank bit for bit.
template <class T, class Comm, class Async>
void broadcast_from_every_root(Comm& comm, int rank, int n, std::size_t count, failure_log& log, Async&& async) {
  std::vector<T> v(count);  // one buffer for every root: fresh pages are slow to touch
  for (int root = 0; root < n; ++root) {
    if (rank == root)
      for (std::size_t i = 0; i < count; ++i) v[i] = bcast_value<T>(root, i);
    else
      std::memset(v.data(), sentinel, count * sizeof(T));
    if (async(root)) comm.broadcast_async(ddl::host_view(v), root).wait();
    else comm.broadcast(ddl::host_view(v), root);
    for (std::size_t i = 0; i < count; ++i)
      if (!same_bits(v[i], bcast_value<T>(root, i))) {
        log.add(std::string(ddl::name_of(ddl::dtype_of_v<T>)) + " root " + std::to_string(root) + " count " +
                std::to_string(count) + " wrong at " + std::to_string(i));
        break;
      }
  }
}

TEST_CASE("broadcast: from every root, every dtype, sizes that take both algorithms") {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    CAPTURE(n);
    failure_log log;
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread));
      for (ddl::dtype type : ddl::all_dtypes)
        ddl::visit_dtype(type, [&](auto tag) {
          using T = decltype(tag);
          for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(100003)}) {
            broadcast_from_every_root<T>(comm, t.rank(), n, count, log,
                                         [&](int root) { return (root + static_cast<int>(count)) % 2 == 1; });
          }
        });
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

// Under ThreadSanitizer (20 s of async.tsan at every count) 1, 2, 3, 5 and 8.
#if defined(__SANITIZE_THREAD__)
constexpr int forced_broadcast_rank_counts[] = {1, 2, 3, 5, 8};
#else
constexpr int forced_broadcast_rank_counts[] = {1, 2, 3, 5, 6, 7, 8, 13};
#endif

TEST_CASE("broadcast: every algorithm forced, odd and prime rank counts, fewer elements than ranks") {
  // direct: pieces of 64 KiB through the stages, 1-13 of them here.
  using algo = ddl::broadcast_algorithm;
  for (algo a : {algo::binomial, algo::chain, algo::scatter_allgather, algo::direct})
    for (int n : forced_broadcast_rank_counts) {
      CAPTURE(static_cast<int>(a));
      CAPTURE(n);
      failure_log log;
      ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
        ddl::options o = with_progress(ddl::progress::thread);
        o.broadcast = a;
        ddl::communicator<ddl::ring, ddl::local_transport> comm(t, o);
        for (ddl::dtype type : {ddl::dtype::float64, ddl::dtype::bfloat16})
          ddl::visit_dtype(type, [&](auto tag) {
            using T = decltype(tag);
            const std::size_t below = static_cast<std::size_t>(n > 1 ? n - 1 : 0);
            // 4099 float64: past the ring, below a piece (2 ranks: the halves)
            for (std::size_t count :
                 {std::size_t(0), std::size_t(1), below, std::size_t(1009), std::size_t(4099), std::size_t(100003)}) {
              CHECK(comm.broadcast_plan_for(count * sizeof(T), type).algo == a);
              broadcast_from_every_root<T>(comm, t.rank(), n, count, log, [](int root) { return root % 2 == 1; });
            }
          });
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

TEST_CASE("broadcast: through the root's ring in the stages: the root runs ahead of a slow reader, entries reused, "
          "every size to the ring's limit and past it") {
  // Broadcasts of at most `ring_limit` bytes go through
  // the root's ring of `ring_entries` entries (`direct_base::ring_broadcast`);
  // the root waits only for a full ring. Batches of asynchronous broadcasts
  // (the root's queue runs them back to back), one entry to the ring's limit
  // and one element past it (pieces, meetings of all): in even rounds from
  // one root while the next rank dawdles (the root fills the ring and waits
  // for it: each batch is 3 rings' worth of calls), in odd ones from roots
  // in turn.
  using D = ddl::detail::direct_base;
  constexpr std::size_t entry = D::ring_entry / sizeof(float), limit = D::ring_limit / sizeof(float);
  const std::size_t counts[] = {1, 3, entry - 1, entry, entry + 1, 3 * entry + 5, limit, limit + 1};
  for (int n : {2, 3, 4, 7}) {
    CAPTURE(n);
    failure_log log;
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::options o = with_progress(ddl::progress::thread);
      o.broadcast = ddl::broadcast_algorithm::direct;
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, o);
      const int r = t.rank();
      constexpr int batch = 3 * static_cast<int>(D::ring_entries);
      std::vector<std::vector<float>> bufs(batch);
      for (int round = 0; round < 6; ++round) {
        const bool one = round % 2 == 0;
        auto root_of = [&](int k) { return one ? round / 2 % n : (k + round) % n; };
        if (one && r == (root_of(0) + 1) % n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::vector<ddl::collective_request> reqs;
        for (int k = 0; k < batch; ++k) {
          const std::size_t count = counts[static_cast<std::size_t>(k + round) % std::size(counts)];
          const int root = root_of(k);
          auto& v = bufs[static_cast<std::size_t>(k)];
          v.assign(count, -1.0f);
          if (r == root)
            for (std::size_t i = 0; i < count; ++i) v[i] = bcast_value<float>(root, i + static_cast<std::size_t>(k));
          reqs.push_back(comm.broadcast_async(ddl::host_view(v), root));
        }
        for (auto& q : reqs) q.wait();
        for (int k = 0; k < batch; ++k) {
          const int root = root_of(k);
          const auto& v = bufs[static_cast<std::size_t>(k)];
          for (std::size_t i = 0; i < v.size(); ++i)
            if (!same_bits(v[i], bcast_value<float>(root, i + static_cast<std::size_t>(k)))) {
              log.add("round " + std::to_string(round) + " call " + std::to_string(k) + " rank " + std::to_string(r) +
                      ": " + std::to_string(v.size()) + " floats from root " + std::to_string(root) + " wrong at " +
                      std::to_string(i));
              break;
            }
        }
      }
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("broadcast: DDL_BROADCAST names an algorithm or is refused") {
  setenv("DDL_BROADCAST", "scatter_allgather", 1);
  CHECK(ddl::options::from_env().broadcast == ddl::broadcast_algorithm::scatter_allgather);
  setenv("DDL_BROADCAST", "direct", 1);
  CHECK(ddl::options::from_env().broadcast == ddl::broadcast_algorithm::direct);
  setenv("DDL_BROADCAST", "auto", 1);
  CHECK(ddl::options::from_env().broadcast == ddl::broadcast_algorithm::automatic);
  setenv("DDL_BROADCAST", "pipeline", 1);
  CHECK_THROWS_WITH_AS(ddl::options::from_env(), doctest::Contains("DDL_BROADCAST='pipeline'"), ddl::invalid_argument);
  unsetenv("DDL_BROADCAST");
}

TEST_CASE("broadcast: the plan takes scatter + all-gather where hand-offs are dear, never with fewer elements than ranks") {
  using algo = ddl::broadcast_algorithm;
  const std::size_t big = std::size_t(16) << 20;
  const auto dear = ddl::broadcast_choice(big, 8, 1e-3, 2e9, 4);
  CHECK(dear.algo == algo::scatter_allgather);
  CHECK(dear.seconds == doctest::Approx(6 * 1e-3 + 2.0 * big * 7 / 8 / 2e9));
  CHECK(ddl::broadcast_choice(big, 7, 1e-3, 2e9, 4).seconds ==
        doctest::Approx((3 + 6) * 1e-3 + 2.0 * big * 6 / 7 / 2e9));  // not a power of two: a ring all-gather
  CHECK(ddl::broadcast_choice(20, 8, 1e-3, 2e9, 4).algo == algo::binomial);  // 5 elements for 8 ranks
  // Forced: the named algorithm, priced by its own formula.
  const auto forced = ddl::broadcast_choice(64, 8, 8e-6, 4e9, 4, algo::chain);
  CHECK(forced.algo == algo::chain);
  CHECK(forced.seconds > ddl::broadcast_choice(64, 8, 8e-6, 4e9, 4).seconds);
}

TEST_CASE("broadcast: direct where the ranks share stages: a meeting per 64 KiB between processes, two in one, priced so") {
  using algo = ddl::broadcast_algorithm;
  // A crowded MPI node's defaults (20 us a step, 2.5 GB/s; stages read at
  // 8x that): one meeting beats the tree's two hand-offs, and 256 of them
  // still beat the chain's 16 MiB, by the formula.
  ddl::broadcast_costs stages;
  stages.direct = true;
  stages.read = 8;
  const std::size_t small = 32 << 10, big = std::size_t(16) << 20;
  const auto s = ddl::broadcast_choice(small, 4, 20e-6, 2.5e9, 4, algo::automatic, stages);
  CHECK(s.algo == algo::direct);
  CHECK(s.segments == 1);
  CHECK(s.seconds == doctest::Approx(20e-6 + 2.0 * small / (8 * 2.5e9)));
  const auto b = ddl::broadcast_choice(big, 4, 20e-6, 2.5e9, 4, algo::direct, stages);
  CHECK(b.segments == 256);
  CHECK(b.seconds == doctest::Approx(256 * 20e-6 + 2.0 * big / (8 * 2.5e9)));
  CHECK(ddl::broadcast_choice(big + 1, 4, 20e-6, 2.5e9, 4, algo::direct, stages).segments == 257);
  // Up to the ring's limit, one store waited for: half a meeting, two copies
  // (one byte past it, a meeting).
  constexpr std::size_t ring = ddl::detail::direct_base::ring_limit;
  const auto r = ddl::broadcast_choice(ring, 4, 20e-6, 2.5e9, 4, algo::automatic, stages);
  CHECK(r.algo == algo::direct);
  CHECK(r.seconds == doctest::Approx(20e-6 / 2 + 2.0 * ring / (8 * 2.5e9)));
  CHECK(ddl::broadcast_choice(ring + 1, 4, 20e-6, 2.5e9, 4, algo::direct, stages).seconds ==
        doctest::Approx(20e-6 + 2.0 * (ring + 1) / (8 * 2.5e9)));
  // Never where the stages are not there, whatever it would cost.
  stages.direct = false;
  CHECK(ddl::broadcast_choice(small, 4, 20e-6, 2.5e9, 4, algo::automatic, stages).algo == algo::binomial);
  // Two ranks: the tree's one send against one meeting and two copies.
  stages.direct = true;
  CHECK(ddl::broadcast_choice(small, 2, 20e-6, 2.5e9, 4, algo::automatic, stages).algo == algo::direct);
  // Ranks of one process read the root's buffer: two meetings, one copy.
  stages.in_place = true;
  const auto one = ddl::broadcast_choice(big, 4, 20e-6, 2.5e9, 4, algo::direct, stages);
  CHECK(one.segments == 1);
  CHECK(one.seconds == doctest::Approx(2 * 20e-6 + 1.0 * big / (8 * 2.5e9)));
  CHECK(ddl::broadcast_choice(small, 4, 20e-6, 2.5e9, 4, algo::direct, stages).seconds == doctest::Approx(s.seconds));
  CHECK(ddl::broadcast_choice(ring, 4, 20e-6, 2.5e9, 4, algo::direct, stages).seconds == doctest::Approx(r.seconds));
  // Two MPI ranks that copy to and from each other's memory split the copy
  // past the ring: two meetings, half the copy each, at once.
  ddl::broadcast_costs two;
  two.direct = true;
  two.read = 8;
  two.halves = true;
  for (std::size_t bytes : {ring + 1, small, big}) {
    CAPTURE(bytes);
    const auto p = ddl::broadcast_choice(bytes, 2, 20e-6, 2.5e9, 4, algo::direct, two);
    CHECK(p.segments == 1);
    CHECK(p.seconds == doctest::Approx(2 * 20e-6 + 0.5 * bytes / (8 * 2.5e9)));
  }
  CHECK(ddl::broadcast_choice(ring, 2, 20e-6, 2.5e9, 4, algo::direct, two).seconds ==
        doctest::Approx(20e-6 / 2 + 2.0 * ring / (8 * 2.5e9)));
  CHECK(ddl::broadcast_choice(big, 2, 20e-6, 2.5e9, 4, algo::automatic, two).algo == algo::direct);
  // Copying steps priced at the transport's copy factor (threads: 1.5 B).
  ddl::broadcast_costs copies;
  copies.copy = 1.5;
  CHECK(ddl::broadcast_choice(big, 4, 20e-6, 2.5e9, 4, algo::binomial, copies).seconds ==
        doctest::Approx(2 * (20e-6 + 1.0 * big / (1.5 * 2.5e9))));
  // In-process ranks offer it (their stages), and the tuner's candidates hold it.
  ddl::local_fabric::run(3, [](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
    ddl::options o;
    o.broadcast = algo::direct;
    ddl::communicator<ddl::ring, ddl::local_transport> forced(t, o);
    if (forced.broadcast_plan_for(100).algo != algo::direct || forced.broadcast_plan_for(1 << 20).segments != 1)
      throw std::runtime_error("local ranks: a forced direct broadcast does not plan direct, in place");
    if (comm.broadcast_plan_for(64).algo != algo::direct)  // the ring's one store against the tree's messages
      throw std::runtime_error("local ranks: a 64-byte broadcast does not plan the root's ring");
    const ddl::broadcast_costs st = ddl::broadcast_costs_of(t);
    if (!st.direct || !st.in_place || st.halves || st.copy != ddl::local_transport::copy_step_factor)
      throw std::runtime_error("local ranks: their broadcast costs are not the threads'");
    bool listed = false;
    for (const auto& p : ddl::detail::tuning_candidates(4096, ddl::topology::uniform(3, 4e9, 8e-6), 4, 3.0, 4, st))
      listed = listed || p.algo == algo::direct;
    if (!listed) throw std::runtime_error("the tuner does not measure direct where it is available");
  });
  // Two of them split the copy (`direct_base::halves`).
  ddl::local_fabric::run(2, [](ddl::local_transport& t) {
    if (!ddl::broadcast_costs_of(t).halves) throw std::runtime_error("two local ranks do not split the copy");
  });
}

TEST_CASE("broadcast: the plan takes the binomial tree for small messages and the chain for large") {
  const auto small = ddl::broadcast_choice(64, 8, 8e-6, 4e9, 4);
  const auto large = ddl::broadcast_choice(std::size_t(64) << 20, 8, 8e-6, 4e9, 4);
  CHECK(small.algo == ddl::broadcast_plan::algorithm::binomial);
  CHECK(large.algo == ddl::broadcast_plan::algorithm::chain);
  CHECK(large.segments > 1);
  CHECK(large.seconds < 3 * (8e-6 + (64 << 20) / 4e9));  // beats the tree's three full rounds
  CHECK(ddl::broadcast_choice(std::size_t(64) << 20, 2, 8e-6, 4e9, 4).algo ==
        ddl::broadcast_plan::algorithm::binomial);  // two ranks: one send either way
}

TEST_CASE("broadcast: priced on the strategy's topology (its slowest level), else the transport's defaults") {
  using algo = ddl::broadcast_algorithm;
  const std::size_t big = std::size_t(16) << 20;
  // Two levels: 4 ranks per node at 1 us / 10 GB/s, 2 nodes at 50 us / 1 GB/s.
  const ddl::topology two{ddl::level{4, 10e9, 1e-6}, ddl::level{2, 1e9, 50e-6}};
  const auto slowest = ddl::broadcast_choice(big, two, 4);
  CHECK(slowest.seconds == doctest::Approx(ddl::broadcast_choice(big, 8, 50e-6, 1e9, 4).seconds));
  CHECK(slowest.algo == ddl::broadcast_choice(big, 8, 50e-6, 1e9, 4).algo);
  // A level of one group moves nothing and sets no price.
  const ddl::topology padded{ddl::level{8, 4e9, 8e-6}, ddl::level{1, 1e3, 1.0}};
  CHECK(ddl::broadcast_choice(big, padded, 4).seconds ==
        doctest::Approx(ddl::broadcast_choice(big, 8, 8e-6, 4e9, 4).seconds));
  CHECK(ddl::broadcast_choice(big, ddl::topology::uniform(1, 1e9, 1e-6), 4).algo == algo::binomial);

  ddl::local_fabric::run(8, [&](ddl::local_transport& t) {
    // Threads may also broadcast directly (the root's buffer read in place,
    // two meetings), priced on the same topology with their costs.
    const ddl::broadcast_costs threads = ddl::broadcast_costs_of(t);
    // Hand-offs so dear that whole rounds beat any pipeline: the tree's
    // three, or the threads' two meetings.
    const ddl::topology dear = ddl::topology::uniform(8, 1e12, 1e-2);
    CHECK(ddl::broadcast_choice(big, dear, 4).algo == algo::binomial);
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> by_topology(t, ddl::auto_strategy(dear));
    CHECK(by_topology.broadcast_plan_for(big).algo == algo::direct);
    CHECK(by_topology.broadcast_plan_for(big).seconds ==
          doctest::Approx(ddl::broadcast_choice(big, dear, 4, algo::automatic, threads).seconds));
    // Cheap hand-offs, slow links: no tree (the chain where the ranks share
    // nothing; threads read the root's buffer at once); and a strategy
    // without a topology prices on the transport's default link costs.
    const ddl::topology cheap = ddl::topology::uniform(8, 1e8, 1e-7);
    CHECK(ddl::broadcast_choice(big, cheap, 4).algo == algo::chain);
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> pipelined(t, ddl::auto_strategy(cheap));
    CHECK(pipelined.broadcast_plan_for(big).algo == algo::direct);
    ddl::communicator<ddl::ring, ddl::local_transport> ring(t);
    using L = ddl::default_link<ddl::local_transport>;
    CHECK(ring.broadcast_plan_for(big).seconds ==
          doctest::Approx(
              ddl::broadcast_choice(big, 8, L::latency, L::bandwidth, 4, algo::automatic, threads).seconds));
    // Still a broadcast: every rank ends with rank 5's data.
    std::vector<float> v(100003, static_cast<float>(t.rank()));
    by_topology.broadcast(ddl::host_view(v), 5);
    CHECK(std::count(v.begin(), v.end(), 5.0f) == static_cast<std::ptrdiff_t>(v.size()));
  });
}
