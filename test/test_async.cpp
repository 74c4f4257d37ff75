// Asynchronous collectives, broadcast, barrier and gradient buckets over
// in-process ranks, in both progress modes. Every asynchronous result is
// compared with an independent reference (the exact expected value) and with
// the blocking path on the same inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <numeric>
#include <thread>
#include <type_traits>
#include <vector>

#include "support.hpp"

using namespace ddl_test;

namespace {

using clock_type = std::chrono::steady_clock;

ddl::options with_progress(ddl::progress p, double timeout_s = 60) {
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

const ddl::progress modes[] = {ddl::progress::thread, ddl::progress::deferred};
const char* mode_name(ddl::progress p) { return p == ddl::progress::thread ? "thread" : "deferred"; }

}  // namespace

TEST_CASE("async: several all-reduces in flight, waited out of order, equal the blocking path") {
  for (ddl::progress mode : modes)
    for (int n : {1, 2, 3, 4, 5, 7}) {
      CAPTURE(mode_name(mode));
      CAPTURE(n);
      failure_log log;
      ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
        ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(mode));
        const std::size_t sizes[] = {0, 1, 13, 1000, 20011};
        std::vector<std::vector<float>> a;
        std::vector<std::vector<double>> b;
        std::vector<std::vector<std::int32_t>> c;
        for (std::size_t s : sizes) {
          a.push_back(inputs<float>(ddl::op::sum, t.rank(), s));
          b.push_back(inputs<double>(ddl::op::avg, t.rank(), s));
          c.push_back(inputs<std::int32_t>(ddl::op::max, t.rank(), s));
        }
        std::vector<ddl::collective_request> reqs;
        for (std::size_t k = 0; k < std::size(sizes); ++k) {
          reqs.push_back(comm.all_reduce_async(ddl::host_view(a[k]), ddl::op::sum));
          reqs.push_back(comm.all_reduce_async(ddl::host_view(b[k]), ddl::op::avg));
          // a blocking call between asynchronous ones queues behind them
          comm.all_reduce(ddl::host_view(c[k]), ddl::op::max);
        }
        // wait in reverse order
        for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) it->wait();
        for (std::size_t k = 0; k < std::size(sizes); ++k) {
          if (auto w = count_wrong(a[k], ddl::op::sum, n)) log.add("float sum wrong: " + std::to_string(w));
          if (auto w = count_wrong(b[k], ddl::op::avg, n)) log.add("double avg wrong: " + std::to_string(w));
          if (auto w = count_wrong(c[k], ddl::op::max, n)) log.add("int32 max wrong: " + std::to_string(w));
        }
        if (comm.pending()) log.add("pending after every wait");
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

TEST_CASE("async: every dtype and op, out of place, bit-identical to the blocking call") {
  const int n = 4;
  for (ddl::dtype type : ddl::all_dtypes)
    for (ddl::op o : ddl::all_ops) {
      CAPTURE(ddl::name_of(type));
      CAPTURE(ddl::name_of(o));
      failure_log log;
      ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
        ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t, ddl::auto_strategy(),
                                                                          with_progress(ddl::progress::thread));
        ddl::visit_dtype(type, [&](auto tag) {
          using T = decltype(tag);
          const std::size_t count = 3001;
          const auto in = inputs<T>(o, t.rank(), count);
          std::vector<T> async_out(count), blocking_out(count);
          std::memset(async_out.data(), sentinel, count * sizeof(T));
          auto r = comm.all_reduce_async(ddl::host_view(in), ddl::host_view(async_out), o);
          r.wait();
          comm.all_reduce(ddl::host_view(in), ddl::host_view(blocking_out), o);
          if (std::memcmp(async_out.data(), blocking_out.data(), count * sizeof(T)) != 0)
            log.add("async and blocking results differ");
          if (auto w = count_wrong(async_out, o, n)) log.add(std::to_string(w) + " wrong");
        });
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

TEST_CASE("async: reduce_scatter and all_gather, in place and out of place") {
  for (ddl::progress mode : modes)
    for (int n : {1, 3, 4, 6}) {
      CAPTURE(mode_name(mode));
      CAPTURE(n);
      failure_log log;
      ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
        ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(mode));
        const std::size_t count = 10007;
        const ddl::block mine = ddl::block_of(count, n, t.rank());
        auto in = inputs<float>(ddl::op::sum, t.rank(), count);
        std::vector<float> out(mine.size);
        auto in_place = in;  // reduce-scatter in place: out is my block of the input
        auto r1 = comm.reduce_scatter_async(ddl::host_view(in), ddl::host_view(out), ddl::op::sum);
        auto r2 = comm.reduce_scatter_async(ddl::host_view(in_place),
                                            ddl::host_view(in_place.data() + mine.offset, mine.size), ddl::op::sum);
        // all-gather the blocks back, out of place and in place
        std::vector<float> gathered(count), gathered_in_place(count);
        r1.wait();
        auto r3 = comm.all_gather_async(ddl::host_view(out), ddl::host_view(gathered));
        std::copy(out.begin(), out.end(), gathered_in_place.begin() + static_cast<std::ptrdiff_t>(mine.offset));
        auto r4 = comm.all_gather_async(ddl::host_view(gathered_in_place.data() + mine.offset, mine.size),
                                        ddl::host_view(gathered_in_place));
        r4.wait();
        r2.wait();
        r3.wait();
        for (std::size_t i = 0; i < mine.size; ++i) {
          const float e = expected_value<float>(ddl::op::sum, n, mine.offset + i);
          if (out[i] != e || in_place[mine.offset + i] != e) {
            log.add("reduce_scatter wrong at " + std::to_string(i));
            break;
          }
        }
        if (auto w = count_wrong(gathered, ddl::op::sum, n)) log.add("all_gather wrong: " + std::to_string(w));
        if (auto w = count_wrong(gathered_in_place, ddl::op::sum, n))
          log.add("in-place all_gather wrong: " + std::to_string(w));
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

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

TEST_CASE("barrier: nobody leaves before everyone has arrived") {
  for (ddl::progress mode : modes)
    for (int n : {1, 2, 3, 5, 8}) {
      CAPTURE(mode_name(mode));
      CAPTURE(n);
      std::atomic<int> arrived{0};
      failure_log log;
      ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
        ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(mode));
        for (int round = 1; round <= 3; ++round) {
          if (t.rank() == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          arrived.fetch_add(1);
          if (round == 2) comm.barrier_async().wait();
          else comm.barrier();
          if (arrived.load() < round * n) log.add("left the barrier before every rank arrived");
          comm.barrier();  // keep rounds apart
        }
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

TEST_CASE("async: pending() is false the moment the last request's wait returns, collectives and transfers alike") {
  // The engine once marked an operation done (its waiter returned) before
  // taking it off the count pending() read, on the thread that ran it, with
  // the operation's closures dying in between: a caller checking at once
  // could still see work (async.tsan, once). Here each completion callback
  // holds something slow to destroy, and the waits are bounded, so the
  // worker, not the caller, finishes the operations.
  struct slow_to_destroy {
    ~slow_to_destroy() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }
  };
  const int n = 2, rounds = 20;
  for (ddl::progress p : modes) {
    CAPTURE(std::string(mode_name(p)));
    failure_log log;
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(p));
      // each callback its own, destroyed with it
      const auto holds_slow = [] { return [slow = std::make_shared<slow_to_destroy>()](std::exception_ptr) {}; };
      const auto far = [] { return clock_type::now() + std::chrono::seconds(30); };
      std::vector<std::int32_t> v(1), in(1), out(1);
      int seen = 0;
      for (int k = 0; k < rounds; ++k) {
        v[0] = t.rank() + k;
        auto a = comm.all_reduce_async(ddl::host_view(v), ddl::op::sum, holds_slow());
        if (!a.wait_until(far())) log.add("all-reduce " + std::to_string(k) + " not done");
        if (comm.pending()) ++seen;
        if (v[0] != 1 + 2 * k) log.add("all-reduce " + std::to_string(k) + " wrong");
        out[0] = k * 10 + t.rank();
        auto r = comm.recv_async(ddl::host_view(in), 1 - t.rank(), 0, holds_slow());  // parked until the peer's send
        auto s = comm.send_async(ddl::host_view(std::as_const(out)), 1 - t.rank(), 0, holds_slow());
        if (!s.wait_until(far()) || !r.wait_until(far())) log.add("transfer " + std::to_string(k) + " not done");
        if (comm.pending()) ++seen;
        if (in[0] != k * 10 + 1 - t.rank()) log.add("transfer " + std::to_string(k) + " wrong");
      }
      if (seen) log.add("pending() true after the wait " + std::to_string(seen) + " times in " + std::to_string(2 * rounds));
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("async: a request destroyed unfinished waits for its collective") {
  const int n = 3;
  failure_log log;
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread));
    auto v = inputs<float>(ddl::op::sum, t.rank(), 50000);
    if (t.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    { auto r = comm.all_reduce_async(ddl::host_view(v), ddl::op::sum); }  // destroyed at once
    if (auto w = count_wrong(v, ddl::op::sum, n)) log.add("after destruction " + std::to_string(w) + " wrong");
  });
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("async: test() and a deadline-bounded wait see a late peer, then the result") {
  const int n = 2;
  failure_log log;
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread));
    std::vector<float> v(1000, 1.0f);
    if (t.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto r = comm.all_reduce_async(ddl::host_view(v), ddl::op::sum);
    if (t.rank() == 0) {
      if (r.test()) log.add("test() true while the peer sleeps");
      const auto start = clock_type::now();
      if (r.wait_for(std::chrono::milliseconds(20))) log.add("wait_for(20ms) true while the peer sleeps");
      if (clock_type::now() - start > std::chrono::milliseconds(250)) log.add("wait_for overran its deadline");
      if (!r.valid()) log.add("request invalid after a timed-out wait_for");
    }
    r.wait();
    if (r.valid()) log.add("request still valid after wait");
    for (float x : v)
      if (x != 2.0f) {
        log.add("wrong value");
        break;
      }
  });
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("async: a peer that never comes gives timeout_error at wait, not at issue") {
  for (ddl::progress mode : modes) {
    CAPTURE(mode_name(mode));
    std::atomic<int> timeouts{0};
    failure_log log;
    ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
      if (t.rank() == 2) return;  // never calls
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(mode, 0.3));
      std::vector<float> v(100, 1.0f);
      auto r = comm.all_reduce_async(ddl::host_view(v), ddl::op::sum);
      try {
        r.wait();
        log.add("wait returned without the third rank");
      } catch (const ddl::timeout_error& e) {
        ++timeouts;
        if (std::string(e.what()).find("all_reduce") == std::string::npos)
          log.add(std::string("timeout does not name the collective: ") + e.what());
      }
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
    CHECK(timeouts.load() == 2);
  }
}

TEST_CASE("async: bad arguments throw at the call, naming the problem") {
  ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread));
    std::vector<float> a(10), b(11);
    CHECK_THROWS_WITH_AS(comm.all_reduce_async(ddl::host_view(a), ddl::host_view(b), ddl::op::sum),
                         doctest::Contains("input has 10 elements, output 11"), ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.broadcast_async(ddl::host_view(a), 2), doctest::Contains("root 2"),
                         ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.broadcast(ddl::host_view(a), -1), doctest::Contains("root -1"), ddl::invalid_argument);
    CHECK_FALSE(comm.pending());
  });
}

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

TEST_CASE("async: a completion callback runs once, before wait returns, with the collective's error") {
  for (ddl::progress mode : modes) {
    CAPTURE(mode_name(mode));
    std::atomic<int> ok{0}, failed{0};
    failure_log log;
    ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(mode, 0.3));
      std::vector<float> v(5000, 1.0f);
      std::atomic<int> calls{0};
      auto r = comm.all_reduce_async(ddl::host_view(v), ddl::op::sum, [&](std::exception_ptr e) {
        ++calls;
        if (e) log.add("error on a good call");
        else if (v[4999] != 3.0f) log.add("callback ran before the result was in place");
        ++ok;
      });
      r.wait();
      if (calls.load() != 1) log.add("callback ran " + std::to_string(calls.load()) + " times before wait returned");
      if (t.rank() == 2) return;  // the next call never completes on ranks 0 and 1
      auto bad = comm.all_reduce_async(ddl::host_view(v), ddl::op::sum, [&](std::exception_ptr e) {
        try {
          if (e) std::rethrow_exception(e);
        } catch (const ddl::timeout_error&) {
          ++failed;
        }
      });
      CHECK_THROWS_AS(bad.wait(), ddl::timeout_error);
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
    CHECK(ok.load() == 3);
    CHECK(failed.load() == 2);
  }
}

TEST_CASE("async: the last owner of a request may be released inside its own completion callback") {
  // As a framework's work object does: it holds the request, and the
  // callback holds the work object until the collective has finished.
  struct owner {
    ddl::collective_request request;
  };
  failure_log log;
  ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread));
    std::vector<float> v(1000, 1.0f);
    std::atomic<bool> called{false};
    {
      auto o = std::make_shared<owner>();
      o->request = comm.all_reduce_async(ddl::host_view(v), ddl::op::sum, [o, &called](std::exception_ptr) mutable {
        called = true;
        o.reset();  // may be the last reference: ~owner waits for this very collective
      });
    }  // the caller's reference goes first; the callback's is the last
    comm.wait_all();
    if (!called) log.add("callback not called");
    if (v[0] != 2.0f) log.add("wrong result");
  });
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

namespace {
// A transport that counts the threads inside it at once: the progress
// engine promises that only one thread drives a transport at any moment.
struct exclusive_transport {
  using request = ddl::local_transport::request;
  ddl::local_transport* t;
  std::atomic<int>* overlaps;
  std::atomic<int> inside{0};
  struct guard {
    exclusive_transport& x;
    explicit guard(exclusive_transport& e) : x(e) {
      if (x.inside.fetch_add(1) != 0) ++*x.overlaps;
    }
    ~guard() { x.inside.fetch_sub(1); }
  };
  int rank() const { return t->rank(); }
  int size() const { return t->size(); }
  request isend(int p, ddl::const_bytes b, ddl::tag g) { guard h(*this); return t->isend(p, b, g); }
  request irecv(int p, ddl::mutable_bytes b, ddl::tag g) { guard h(*this); return t->irecv(p, b, g); }
  void wait(request& r, ddl::deadline d) { guard h(*this); t->wait(r, d); }
};
}  // namespace

TEST_CASE("async: one thread at a time drives the transport, through every hand-over") {
  // Issue-then-wait, blocking calls right after, and asynchronous calls left to
  // the worker, in a tight loop: the patterns a training step makes. A caller
  // running a blocking call inline must not release the worker's hold.
  std::atomic<int> overlaps{0};
  failure_log log;
  ddl::local_fabric::run(3, [&](ddl::local_transport& lt) {
    exclusive_transport t{&lt, &overlaps};
    ddl::communicator<ddl::ring, exclusive_transport> comm(t, with_progress(ddl::progress::thread));
    std::vector<float> a(16), b(16), c(4096);
    for (int i = 0; i < 400; ++i) {
      std::fill(a.begin(), a.end(), 1.0f);
      std::fill(c.begin(), c.end(), 1.0f);
      auto r1 = comm.all_reduce_async(ddl::host_view(a), ddl::op::sum);
      if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(60));  // the worker's turn
      auto r2 = comm.all_reduce_async(ddl::host_view(c), ddl::op::sum);
      r1.wait();
      r2.wait();
      std::fill(b.begin(), b.end(), 2.0f);
      comm.all_reduce(ddl::host_view(b), ddl::op::sum);  // inline, right behind the worker
      if (a[0] != 3.0f || b[0] != 6.0f || c[4095] != 3.0f) log.add("wrong result at iteration " + std::to_string(i));
    }
  });
  CHECK_MESSAGE(log.count() == 0, log.summary());
  CHECK(overlaps.load() == 0);
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
constexpr int mode_rank_counts[] = {1, 2, 3, 5, 8};
constexpr std::size_t dtypes_per_turn = 2;
#else
constexpr int mode_rank_counts[] = {1, 2, 3, 4, 5, 7, 8, 13};
constexpr std::size_t dtypes_per_turn = std::size(ddl::all_dtypes);
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

TEST_CASE("all_to_all: every dtype, even parts and counts, in place and not, blocking and asynchronous, odd and prime "
          "rank counts") {
  every_mode_ranks_and_dtype([](auto& comm, int r, int n, auto tag, failure_log& log) {
    using T = decltype(tag);
    for (std::size_t per : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1001)})
      for (bool counts : {false, true})
        for (bool in_place : {false, true}) {
          const all_to_all_case k{counts, in_place, (per + (in_place ? 1 : 0)) % 2 == 1};
          check_all_to_all<T>(comm, r, all_to_all_parts(n, per, counts), k, log,
                              std::string(ddl::name_of(ddl::dtype_of_v<T>)) + " per " + std::to_string(per));
        }
  });
}

TEST_CASE("all_to_all: in place from 256 KiB above the stages' sizes, parts traded in pairs: every dtype, odd and "
          "prime rank counts, and a rank out of place beside them is a mismatch, not a hang") {
  for (int n : {2, 3, 4, 5, 7}) {
    CAPTURE(n);
    failure_log log;
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread));
      for (ddl::dtype type : ddl::all_dtypes)
        ddl::visit_dtype(type, [&](auto tag) {
          using T = decltype(tag);
          const std::size_t per = (std::size_t{256} << 10) / sizeof(T) / static_cast<std::size_t>(n) + 3;
          for (bool async : {false, true})
            check_all_to_all<T>(comm, t.rank(), all_to_all_parts(n, per, false), {false, true, async}, log,
                                ddl::name_of(type));
        });
      std::vector<float> in(static_cast<std::size_t>(n) << 18), out(in.size());
      std::string what = "no error";
      try {
        if (t.rank() == 0) comm.all_to_all(ddl::host_view(std::as_const(in)), ddl::host_view(in));
        else comm.all_to_all(ddl::host_view(std::as_const(in)), ddl::host_view(out));
      } catch (const ddl::mismatch_error& e) {
        what = e.what();
      } catch (const ddl::error& e) {
        what = std::string("not a mismatch_error: ") + e.what();
      }
      if (what.find("all_to_all") == std::string::npos) log.add("rank " + std::to_string(t.rank()) + ": " + what);
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("all_to_all: through the stages in pieces (up to 128 KiB a rank at 2 ranks, 256 KiB at more), every "
          "dtype, in place and not, odd and prime rank counts") {
  for (int n : {2, 3, 5, 8}) {
    CAPTURE(n);
    failure_log log;
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::deferred));
      for (ddl::dtype type : ddl::all_dtypes)
        ddl::visit_dtype(type, [&](auto tag) {
          using T = decltype(tag);
          // a meeting's pieces are 64 KiB / n: 2 to 4 meetings, the last one short
          for (std::size_t kib : {std::size_t(100), std::size_t(n == 2 ? 127 : 255)}) {
            const std::size_t per = (kib << 10) / sizeof(T) / static_cast<std::size_t>(n) + 1;
            for (bool in_place : {false, true})
              check_all_to_all<T>(comm, t.rank(), all_to_all_parts(n, per, false), {false, in_place, in_place}, log,
                                  ddl::name_of(type) + std::string(" ") + std::to_string(kib) + " KiB");
          }
        });
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("all_to_all: all_to_all_plan_for names the schedule each size and placement takes") {
  for (int n : {2, 4}) {
    std::vector<std::string> plans(static_cast<std::size_t>(n));
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
      std::string& p = plans[static_cast<std::size_t>(t.rank())];
      for (std::size_t kib : {4, 128, 256, 1024})
        p += comm.all_to_all_plan_for(kib << 10) + " / " + comm.all_to_all_plan_for(kib << 10, true) + "\n";
    });
    CAPTURE(n);
    for (const auto& p : plans) CHECK(p == plans[0]);
    CHECK(plans[0] == (n == 2 ? "through the stages, 1 meeting / through the stages, 1 meeting\n"
                                "through the stages, 2 meetings / through the stages, 2 meetings\n"
                                "exchange with every peer / parts traded in pairs, 2 rounds\n"
                                "exchange with every peer / parts traded in pairs, 2 rounds\n"
                              : "through the stages, 1 meeting / through the stages, 1 meeting\n"
                                "through the stages, 2 meetings / through the stages, 2 meetings\n"
                                "through the stages, 4 meetings / through the stages, 4 meetings\n"
                                "exchange with every peer / parts traded in pairs, 4 rounds\n"));
  }
}

TEST_CASE("all_to_all: large parts, several in flight with all-reduces between them") {
  const int n = 4;
  failure_log log;
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t, ddl::auto_strategy(),
                                                                      with_progress(ddl::progress::thread));
    const std::size_t per = 100003;
    std::vector<std::vector<float>> in(3), out(3);
    std::vector<ddl::collective_request> reqs;
    auto sums = inputs<float>(ddl::op::sum, t.rank(), 5000);
    for (std::size_t c = 0; c < in.size(); ++c) {
      in[c].resize(per * n);
      out[c].assign(per * n, -1.0f);
      for (int to = 0; to < n; ++to)
        for (std::size_t i = 0; i < per; ++i) in[c][to * per + i] = all_to_all_value<float>(t.rank(), to, i + c);
      reqs.push_back(comm.all_to_all_async(ddl::host_view(std::as_const(in[c])), ddl::host_view(out[c])));
      if (c == 1) reqs.push_back(comm.all_reduce_async(ddl::host_view(sums), ddl::op::sum));
    }
    for (auto& q : reqs) q.wait();
    for (std::size_t c = 0; c < in.size(); ++c)
      for (int from = 0; from < n; ++from)
        for (std::size_t i = 0; i < per; ++i)
          if (out[c][from * per + i] != all_to_all_value<float>(from, t.rank(), i + c)) {
            log.add("call " + std::to_string(c) + " from rank " + std::to_string(from) + " wrong at " + std::to_string(i));
            from = n;
            break;
          }
    if (auto w = count_wrong(sums, ddl::op::sum, n)) log.add("all-reduce between them wrong: " + std::to_string(w));
  });
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("all_to_all: bad arguments are refused by name; counts two ranks disagree on fail every rank under DDL_CHECK") {
  failure_log log;
  ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
    // DDL_CHECK: a call every rank rejects leaves the communicator usable.
    ddl::options o = with_progress(ddl::progress::thread, 20);
    o.check_calls = true;
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, o);
    std::vector<float> in(9), out(9), eight(8);
    std::vector<double> other(9);
    using sizes = std::vector<std::size_t>;
    const auto s = ddl::host_view(std::as_const(in));
    CHECK_THROWS_WITH_AS(comm.all_to_all(ddl::host_view(std::as_const(eight)), ddl::host_view(eight)),
                         doctest::Contains("multiple of the group's 3 ranks"), ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.all_to_all(s, ddl::host_view(other)),
                         doctest::Contains("input is float, output is double"), ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.all_to_all(s, sizes{3, 3}, ddl::host_view(out), sizes{3, 3, 3}),
                         doctest::Contains("2 send counts for a group of 3"), ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.all_to_all(s, sizes{3, 3, 3}, ddl::host_view(out), sizes{3, 3, 2}),
                         doctest::Contains("receive counts add up to 8 elements, the output has 9"),
                         ddl::invalid_argument);
    const std::size_t r = static_cast<std::size_t>(t.rank());
    sizes self(3, 3);
    self[r] = 4;
    self[(r + 1) % 3] = 2;
    CHECK_THROWS_WITH_AS(comm.all_to_all(s, self, ddl::host_view(out), sizes(3, 3)),
                         doctest::Contains("sends itself 4 elements and expects 3"), ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.all_to_all(ddl::host_view(in.data(), 6), ddl::host_view(in.data() + 3, 6)),
                         doctest::Contains("overlap"), ddl::invalid_argument);
    // Rank 0 sends rank 1 four elements where rank 1 expects three, and rank
    // 2 two, as rank 2 expects: ranks 0 and 1 find the pair, rank 2 hears it.
    sizes sends(3, 3), recvs(3, 3);
    std::size_t out_count = 9;
    if (r == 0) sends = {3, 4, 2};
    if (r == 2) {
      recvs = {2, 3, 3};
      out_count = 8;
    }
    std::string what;
    try {
      comm.all_to_all(s, sends, ddl::host_view(out.data(), out_count), recvs);
    } catch (const ddl::invalid_argument& e) {
      what = e.what();
    }
    const std::string pair = "rank 0 sends rank 1 4 elements, rank 1 expects 3";
    if (what.find(r < 2 ? pair : "rank 0 rejected its arguments: " + pair) == std::string::npos)
      log.add("rank " + std::to_string(r) + ": " + (what.empty() ? "no error" : what));
    // Nothing was sent: the communicator goes on.
    check_all_to_all<float>(comm, t.rank(), std::vector<std::vector<std::size_t>>(3, sizes{2, 5, 0}),
                            {true, false, false}, log, "after the check");
  });
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("all_to_all: without DDL_CHECK, counts two ranks disagree on end in an error, not a hang") {
  failure_log log;
  ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::deferred, 20));
    std::vector<float> in(5), out(4);
    using sizes = std::vector<std::size_t>;
    // Rank 1 sends rank 0 three elements where rank 0 expects two.
    const sizes sends = t.rank() == 0 ? sizes{2, 2} : sizes{3, 2};
    const sizes recvs = sizes{2, 2};
    const auto start = clock_type::now();
    try {
      comm.all_to_all(ddl::host_view(std::as_const(in).data(), t.rank() == 0 ? 4 : 5), sends, ddl::host_view(out),
                      recvs);
      // Rank 1 may finish first: what it sent and received was whole.
      if (t.rank() == 0) log.add("rank 0: no error");
    } catch (const ddl::error& e) {
      if (t.rank() == 0 && std::string(e.what()).find("size") == std::string::npos)
        log.add(std::string("rank 0: ") + e.what());
    }
    if (clock_type::now() - start > std::chrono::seconds(10)) log.add("the error took the deadline");
  });
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("gather and scatter: every dtype and root, in place and not, blocking and asynchronous, odd and prime rank "
          "counts, through the stages and as messages") {
  every_mode_ranks_and_dtype([](auto& comm, int r, int n, auto tag, failure_log& log) {
    using T = decltype(tag);
    // Through the stages up to 32 KiB a rank (gather) and 64 KiB in all (scatter), else messages
    const std::size_t gather_limit = (std::size_t{32} << 10) / sizeof(T);
    const std::size_t scatter_limit = (std::size_t{64} << 10) / sizeof(T) / static_cast<std::size_t>(n);
    for (std::size_t per : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1001), gather_limit,
                            gather_limit + 3, scatter_limit, scatter_limit + 1})
      for (int root : {0, n / 2, n - 1})
        for (bool scatter : {false, true})
          for (bool in_place : {false, true}) {
            const rooted_case k{scatter, in_place, (per + static_cast<std::size_t>(root)) % 2 == 1};
            check_rooted<T>(comm, r, n, per, root, k, log,
                            std::string(ddl::name_of(ddl::dtype_of_v<T>)) + " per " + std::to_string(per));
          }
  });
}

TEST_CASE("gather and scatter: bad arguments are refused by name; ranks that disagree on the root fail, not hang") {
  failure_log log;
  ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread, 20));
    std::vector<float> part(4), whole(12), eleven(11);
    std::vector<double> other(12);
    const auto p = ddl::host_view(part);
    const bool root = t.rank() == 0;
    // Every rank passes the same arguments, so every rank's call fails alike.
    CHECK_THROWS_WITH_AS(comm.gather(p, ddl::host_view(whole), 3), doctest::Contains("root 3 is not a rank"),
                         ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.scatter(ddl::host_view(whole), p, -1), doctest::Contains("root -1 is not a rank"),
                         ddl::invalid_argument);
    // The root's checks: the peers' calls would wait for it, so the peers pass
    // the same wrong arguments for the root, and the group is given up.
    if (root) {
      CHECK_THROWS_WITH_AS(comm.gather(p, ddl::host_view(eleven), 0),
                           doctest::Contains("gather: the root's output has 11 elements, not 3 x the input's 4"),
                           ddl::invalid_argument);
    } else {
      try {
        comm.gather(p, {}, 0);
        log.add("rank " + std::to_string(t.rank()) + ": a gather beside a root that failed returned");
      } catch (const ddl::error&) {
      }
    }
  });
  ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread, 20));
    std::vector<float> part(4), whole(12);
    std::vector<double> other(12);
    const bool root = t.rank() == 0;
    if (root) {
      CHECK_THROWS_WITH_AS(comm.scatter(ddl::host_view(other), ddl::host_view(part), 0),
                           doctest::Contains("input is double, output is float"), ddl::invalid_argument);
      CHECK_THROWS_WITH_AS(comm.gather(ddl::host_view(whole.data() + 2, 4), ddl::host_view(whole), 0),
                           doctest::Contains("overlap"), ddl::invalid_argument);
    }
  });
  // Ranks 0 and 1 gather to root 0, rank 2 to root 2. Rank 1 leaves its
  // part for root 0 and returns. Through the stages (4 elements) roots 0
  // and 2 see each other's stamp at once; as messages (100000) they wait
  // for parts that never come: an error at the deadline (2 s here). Under
  // DDL_CHECK every rank fails at once, naming the root.
  for (std::size_t per : {std::size_t(4), std::size_t(100000)})
    for (bool check : {false, true}) {
      CAPTURE(per);
      CAPTURE(check);
      ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
        ddl::options o = with_progress(ddl::progress::deferred, 2);
        o.check_calls = check;
        ddl::communicator<ddl::ring, ddl::local_transport> comm(t, o);
        std::vector<float> part(per), whole(3 * per);
        const int root = t.rank() == 2 ? 2 : 0;
        const auto start = clock_type::now();
        std::string what = "no error";
        try {
          comm.gather(ddl::host_view(part), ddl::host_view(whole), root);
        } catch (const ddl::error& e) {
          what = e.what();
        }
        const bool may_return = !check && t.rank() == 1;
        const char* expect = check ? "root" : per == 4 ? "call mismatch" : "timeout after";
        if (!may_return && what.find(expect) == std::string::npos)
          log.add("rank " + std::to_string(t.rank()) + ": " + what);
        if (clock_type::now() - start > std::chrono::seconds(check || per == 4 ? 1 : 10))
          log.add("rank " + std::to_string(t.rank()) + ": the error took too long");
      });
    }
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("gather, scatter and broadcast: one-way meetings back to back with the stages' other collectives, slots "
          "never overwritten while read") {
  // A gather's other ranks and a scatter's or broadcast's root leave before
  // their slot is read; the next meetings must not write that slot again
  // until its readers have moved on. Many small calls in a row, every result
  // checked.
  for (int n : {2, 3, 5}) {
    CAPTURE(n);
    failure_log log;
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      // auto: the all-reduce through the stages too
      ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t, ddl::auto_strategy(),
                                                                       with_progress(ddl::progress::deferred));
      const int r = t.rank();
      std::vector<std::int64_t> sum(64);
      for (int call = 0; call < 300; ++call) {
        const int root = call % n;
        const std::size_t per = 1 + static_cast<std::size_t>(call % 7) * 50;
        const std::string where = "call " + std::to_string(call);
        switch (call % 5) {
          case 0:
          case 1: check_rooted<std::int64_t>(comm, r, n, per, root, {false, call % 10 == 1, false}, log, where); break;
          case 2: check_rooted<std::int64_t>(comm, r, n, per, root, {true, false, false}, log, where); break;
          case 3: {  // through the stages too (one-way: the root leaves first)
            std::vector<std::int64_t> data(per, r == root ? call : -1);
            comm.broadcast(ddl::host_view(data), root);
            if (std::count(data.begin(), data.end(), call) != static_cast<std::ptrdiff_t>(per))
              log.add(where + " rank " + std::to_string(r) + ": broadcast");
            break;
          }
          default: {
            for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = static_cast<std::int64_t>(i) * (r + 1) + call;
            comm.all_reduce(ddl::host_view(sum), ddl::op::sum);
            const std::int64_t ranks = n, tri = ranks * (ranks + 1) / 2;
            for (std::size_t i = 0; i < sum.size(); ++i)
              if (sum[i] != static_cast<std::int64_t>(i) * tri + ranks * call) {
                log.add(where + " rank " + std::to_string(r) + ": all_reduce element " + std::to_string(i));
                break;
              }
          }
        }
      }
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("reduce: every dtype, op and root, in place and not, blocking and asynchronous, odd and prime rank counts, "
          "through the stages in one meeting and in pieces") {
  every_mode_ranks_and_dtype([](auto& comm, int r, int n, auto tag, failure_log& log) {
    using T = decltype(tag);
    const std::size_t one_meeting = (std::size_t{64} << 10) / sizeof(T);
    for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1001), one_meeting,
                              one_meeting + 3})
      for (ddl::op o : ddl::all_ops)
        for (int root : {0, n - 1})
          for (bool in_place : {false, true})
            check_reduce<T>(comm, r, n, count, root, o, in_place, (count + (in_place ? 1 : 0)) % 2 == 1, log,
                            std::string(ddl::name_of(ddl::dtype_of_v<T>)) + " count " + std::to_string(count));
  });
}

// Under ThreadSanitizer 4 MiB reduces at 5 ranks were half of the next case's
// minute; 2 and 3 ranks keep the exchange and the odd ring there.
#if defined(__SANITIZE_THREAD__)
constexpr int large_reduce_rank_counts[] = {2, 3};
#else
constexpr int large_reduce_rank_counts[] = {2, 3, 5};
#endif

TEST_CASE("reduce: above the stages' 4 MiB every strategy's reduce-scatter and a gather, odd sizes; bad arguments "
          "refused by name") {
  failure_log log;
  auto run = [&](auto strategy, int n, const char* name) {
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::communicator<decltype(strategy), ddl::local_transport> comm(t, strategy, with_progress(ddl::progress::thread));
      for (std::size_t count : {(std::size_t{4} << 20) / 4 + 3, (std::size_t{4} << 20) / 4 + 20011})
        for (bool in_place : {false, true})
          check_reduce<float>(comm, t.rank(), n, count, n / 2, ddl::op::sum, in_place, in_place, log, name);
    });
  };
  for (int n : large_reduce_rank_counts) {
    run(ddl::ring{}, n, "ring");
    run(ddl::recursive_doubling{}, n, "recursive_doubling");
    run(ddl::halving_doubling{}, n, "halving_doubling");
    run(ddl::two_shot{}, n, "two_shot");
    run(ddl::multi_ring<ddl::dynamic_extents>({n}), n, "multi_ring");
  }
  ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread, 20));
    std::vector<float> a(8), b(7);
    std::vector<double> d(8);
    CHECK_THROWS_WITH_AS(comm.reduce(ddl::host_view(a), ddl::host_view(a), ddl::op::sum, 5),
                         doctest::Contains("reduce: root 5 is not a rank"), ddl::invalid_argument);
    if (t.rank() == 1) {  // the root's own checks; the others' calls are given up
      CHECK_THROWS_WITH_AS(comm.reduce(ddl::host_view(a), ddl::host_view(b), ddl::op::sum, 1),
                           doctest::Contains("8"), ddl::invalid_argument);
    } else {
      try {
        comm.reduce(ddl::host_view(a), {}, ddl::op::sum, 1);
        log.add("rank " + std::to_string(t.rank()) + ": a reduce beside a root that failed returned");
      } catch (const ddl::error&) {
      }
    }
  });
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

// --- point-to-point ------------------------------------------------------------

TEST_CASE("send and recv: every dtype, sizes 0 to 70001, matched by tag and in order within one, blocking and "
          "asynchronous, odd and prime rank counts") {
  every_mode_ranks_and_dtype([](auto& comm, int r, int n, auto tag, failure_log& log) {
    using T = decltype(tag);
    const std::string name = ddl::name_of(ddl::dtype_of_v<T>);
    // Blocking and asynchronous sends take turns over the sizes (starting
    // apart by the element size, so every dtype sees both); a transfer's
    // bytes do not depend on the dtype, so 70001 elements for two of them.
    const std::size_t sizes[] = {0, 1, 7, 1001};
    for (std::size_t k = 0; k < 4; ++k)
      check_transfers<T>(comm, r, n, sizes[k], (k + sizeof(T) / 2) % 2 == 1, log, name + " per " + std::to_string(sizes[k]));
    if (std::is_same_v<T, float> || std::is_same_v<T, ddl::bfloat16>)
      for (bool async : {false, true}) check_transfers<T>(comm, r, n, 70001, async, log, name + " per 70001");
  });
}

// `check(comm, rank, n, T{}, per, log, where)` over
// `every_mode_ranks_and_dtype`, `per` 0, 1 and 1001 elements (70001 too for float).
template <class Check>
void every_transfer_size(Check check) {
  every_mode_ranks_and_dtype([&](auto& comm, int r, int n, auto tag, failure_log& log) {
    const std::string name = ddl::name_of(ddl::dtype_of_v<decltype(tag)>);
    for (std::size_t per : {std::size_t{0}, std::size_t{1}, std::size_t{1001}})
      check(comm, r, n, tag, per, log, name + " per " + std::to_string(per));
    if (std::is_same_v<decltype(tag), float>) check(comm, r, n, tag, 70001, log, name + " per 70001");
  });
}

TEST_CASE("recv_any: each sender's message once, the sender named; matched in issue order beside receives from one "
          "rank; by tag; every dtype, sizes 0 to 70001, odd and prime rank counts") {
  every_transfer_size([](auto& comm, int r, int n, auto tag, std::size_t per, failure_log& log,
                         const std::string& where) {
    check_any_source<decltype(tag)>(comm, r, n, per, log, where);
  });
}

TEST_CASE("sendrecv: ring shifts and pairwise exchanges, each half matching plain sends and receives in issue order; "
          "every dtype, sizes 0 to 70001, odd and prime rank counts") {
  every_transfer_size([](auto& comm, int r, int n, auto tag, std::size_t per, failure_log& log,
                         const std::string& where) {
    check_sendrecv<decltype(tag)>(comm, r, n, per, log, where);
  });
}

TEST_CASE("send and recv: a transfer waiting for its peer does not hold the calls issued after it") {
  for (ddl::progress mode : modes)
    for (int n : {2, 3, 5}) {
      CAPTURE(mode_name(mode));
      CAPTURE(n);
      failure_log log;
      ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
        ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t, ddl::auto_strategy(), with_progress(mode));
        const int r = t.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
        // Each rank's receive is parked until its predecessor sends, which it
        // does only after two all-reduces (one blocking, one in flight) that
        // need every rank: they must run while the receive waits.
        std::vector<double> got(4099, -1.0), sent(4099);
        for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = transfer_value<double>(r, 0, i);
        auto rq = comm.recv_async(ddl::host_view(got), prev, 7);
        auto v = inputs<float>(ddl::op::sum, r, 30011);
        auto w = inputs<float>(ddl::op::sum, r, 1001);
        comm.all_reduce(ddl::host_view(v), ddl::op::sum);
        auto aq = comm.all_reduce_async(ddl::host_view(w), ddl::op::sum);
        comm.send(ddl::host_view(std::as_const(sent)), next, 7);
        aq.wait();
        rq.wait();
        if (auto k = count_wrong(v, ddl::op::sum, n)) log.add("blocking all-reduce: " + std::to_string(k) + " wrong");
        if (auto k = count_wrong(w, ddl::op::sum, n)) log.add("asynchronous all-reduce: " + std::to_string(k) + " wrong");
        for (std::size_t i = 0; i < got.size(); ++i)
          if (got[i] != transfer_value<double>(prev, 0, i)) {
            log.add("rank " + std::to_string(r) + ": received element " + std::to_string(i) + " is wrong");
            break;
          }
        // Both of a pair send 4 MiB before receiving: a blocking send leaves
        // the receive the peer waits on moving.
        if (n == 2) {
          std::vector<float> mine(1 << 20, static_cast<float>(r + 1)), theirs(1 << 20);
          auto back = comm.recv_async(ddl::host_view(theirs), 1 - r, 0);
          comm.send(ddl::host_view(std::as_const(mine)), 1 - r, 0);
          back.wait();
          if (theirs.front() != static_cast<float>(2 - r) || theirs.back() != static_cast<float>(2 - r))
            log.add("exchange: wrong data");
        }
        // Transfers the caller only tests complete too: on the worker
        // (thread), or in `test` itself (deferred).
        std::vector<int> in(33, -1), out(33, r);
        auto a = comm.recv_async(ddl::host_view(in), prev, 3);
        auto b = comm.send_async(ddl::host_view(std::as_const(out)), next, 3);
        for (const auto t0 = clock_type::now(); !(a.test() && b.test());) {
          if (clock_type::now() - t0 > std::chrono::seconds(20)) {
            log.add("rank " + std::to_string(r) + ": transfers only tested did not complete");
            break;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        a.wait();
        b.wait();
        if (in.front() != prev || in.back() != prev) log.add("tested transfer: wrong data");
        if (comm.pending()) log.add("pending after every request was waited for");
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

TEST_CASE("send and recv: a transfer issued behind queued calls starts after them, in issue order") {
  for (ddl::progress mode : modes)
    for (int round = 0; round < 20; ++round) {
      CAPTURE(mode_name(mode));
      CAPTURE(round);
      failure_log log;
      ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
        ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t, ddl::auto_strategy(), with_progress(mode));
        const int r = t.rank(), peer = 1 - r;
        std::vector<float> v(1 << 18, static_cast<float>(r + 1));
        // Messages of 32 bytes: sent at once, whether or not received.
        std::vector<int> first(8, -1), second(8, -1);
        if (r == 0) {
          // Rank 0's first receive is queued behind the all-reduce; the wait
          // for the all-reduce runs the queue up to it and leaves the receive
          // queued; the second receive, issued then, must not start ahead of
          // the first (it would take message 1).
          auto aq = comm.all_reduce_async(ddl::host_view(v), ddl::op::sum);
          auto x = comm.recv_async(ddl::host_view(first), peer, 5);
          aq.wait();
          auto y = comm.recv_async(ddl::host_view(second), peer, 5);
          x.wait();
          y.wait();
          if (first.front() != 1 || first.back() != 1 || second.front() != 2 || second.back() != 2)
            log.add("receives behind a queued all-reduce took messages " + std::to_string(first.front()) + " and " +
                    std::to_string(second.front()) + ", not 1 and 2");
        } else {
          const std::vector<int> one(8, 1), two(8, 2);
          comm.send(ddl::host_view(one), peer, 5);
          comm.send(ddl::host_view(two), peer, 5);
          comm.all_reduce(ddl::host_view(v), ddl::op::sum);
        }
        if (v.front() != 3.0f || v.back() != 3.0f) log.add("all-reduce: wrong result");
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
}

TEST_CASE("send and recv: bad arguments are refused by name; an unmatched receive (from one rank or any) times out "
          "naming its peer and tag, leaving the communicator usable; a size mismatch fails both ranks, not at the "
          "deadline") {
  ddl::local_fabric::run(1, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread, 20));
    std::vector<float> a(4);
    CHECK_THROWS_WITH_AS(comm.send(ddl::host_view(std::as_const(a)), 0, 0), doctest::Contains("send: peer 0 is this rank"),
                         ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.recv_any(ddl::host_view(a), 0), doctest::Contains("recv_any: no other rank"),
                         ddl::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.sendrecv(ddl::host_view(std::as_const(a)), 0, ddl::host_view(a), 0, 0),
                         doctest::Contains("sendrecv: peer 0 is this rank"), ddl::invalid_argument);
  });
  for (ddl::progress mode : modes) {
    CAPTURE(mode_name(mode));
    failure_log log;
    ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(mode, 0.3));
      const int other = 1 - t.rank();
      std::vector<float> a(4, 1.0f);
      CHECK_THROWS_WITH_AS(comm.send_async(ddl::host_view(std::as_const(a)), 2, 0),
                           doctest::Contains("send: peer 2 is not a rank of the group of 2"), ddl::invalid_argument);
      CHECK_THROWS_WITH_AS(comm.recv(ddl::host_view(a), -1, 0), doctest::Contains("recv: peer -1"), ddl::invalid_argument);
      CHECK_THROWS_WITH_AS(comm.recv_async(ddl::host_view(a), other, -1), doctest::Contains("tag -1 is outside [0, 16383]"),
                           ddl::invalid_argument);
      CHECK_THROWS_WITH_AS(comm.send(ddl::host_view(std::as_const(a)), other, comm.max_tag + 1),
                           doctest::Contains("tag 16384"), ddl::invalid_argument);
      CHECK_THROWS_WITH_AS(comm.recv(ddl::host_view(static_cast<float*>(nullptr), 3), other, 0),
                           doctest::Contains("recv: data is null with 3 elements"), ddl::invalid_argument);
      ddl::buffer_view on_device = ddl::host_view(a);
      on_device.where.space = ddl::memory_space::cuda;
      CHECK_THROWS_WITH_AS(comm.recv(on_device, other, 0), doctest::Contains("host-only transport"), ddl::invalid_argument);
      CHECK_THROWS_WITH_AS(comm.recv_any(ddl::host_view(a), -2), doctest::Contains("recv_any: tag -2 is outside"),
                           ddl::invalid_argument);
      std::vector<float> b(3);
      CHECK_THROWS_WITH_AS(comm.sendrecv(ddl::host_view(std::as_const(a)), 2, ddl::host_view(b), other, 0),
                           doctest::Contains("sendrecv: peer 2 is not a rank of the group of 2"), ddl::invalid_argument);
      const std::string self = "sendrecv: peer " + std::to_string(t.rank()) + " is this rank";
      CHECK_THROWS_WITH_AS(comm.sendrecv_async(ddl::host_view(std::as_const(a)), other, ddl::host_view(b), t.rank(), 0),
                           doctest::Contains(self.c_str()), ddl::invalid_argument);
      CHECK_THROWS_WITH_AS(comm.sendrecv(ddl::host_view(std::as_const(a)), other, ddl::host_view(b), other, -3),
                           doctest::Contains("sendrecv: tag -3 is outside"), ddl::invalid_argument);
      // Rank 0 waits for a message rank 1 never sends (rank 1 waits out the
      // same time), then both all-reduce; from rank 1, from any rank, then
      // a sendrecv whose send rank 1 takes but whose receive it never meets.
      for (int kind : {0, 1, 2}) {
        const bool any = kind == 1;
        const auto start = clock_type::now();
        if (t.rank() == 0) {
          try {
            if (kind == 2) comm.sendrecv(ddl::host_view(std::as_const(a)), 1, ddl::host_view(b), 1, 5);
            else if (any) comm.recv_any(ddl::host_view(a), 5);
            else comm.recv(ddl::host_view(a), 1, 5);
            log.add("a receive nobody sent to returned");
          } catch (const ddl::timeout_error& e) {
            const char* says = kind == 2 ? "sendrecv: the receive from rank 1 under tag 5"
                               : any     ? "recv_any from any rank under tag 5"
                                         : "recv from rank 1 under tag 5";
            if (e.peer() != (any ? -1 : 1) || std::string(e.what()).find(says) == std::string::npos)
              log.add(std::string("timeout does not name the peer and tag: ") + e.what());
          }
          if (clock_type::now() - start < std::chrono::milliseconds(250)) log.add("timed out before the deadline");
        } else {
          if (kind == 2) {
            std::vector<float> got(a.size(), 0.0f);
            comm.recv(ddl::host_view(got), 0, 5);
            if (got != a) log.add("rank 1: the sendrecv's send arrived wrong");
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(400));
        }
        std::vector<float> v(999, 1.0f);
        comm.all_reduce(ddl::host_view(v), ddl::op::sum);
        if (v[0] != 2.0f || v[998] != 2.0f) log.add("all-reduce after the timeout is wrong");
      }
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
  // Rank 0 sends 5 elements into rank 1's receive of 4 (from rank 0, then
  // from any rank): the receive fails naming the sizes and gives the group
  // up, so rank 0's next call fails too (its send may have completed: what
  // it sent was whole).
  for (bool any : {false, true}) {
    CAPTURE(any);
    failure_log log;
    ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
      ddl::communicator<ddl::ring, ddl::local_transport> comm(t, with_progress(ddl::progress::thread, 20));
      std::vector<float> a(t.rank() == 0 ? 5 : 4);
      const auto start = clock_type::now();
      try {
        if (t.rank() == 0) {
          comm.send(ddl::host_view(std::as_const(a)), 1, 3);
          comm.all_reduce(ddl::host_view(a), ddl::op::sum);
          log.add("rank 0: an all-reduce after its peer's failed receive returned");
        } else {
          if (any) comm.recv_any(ddl::host_view(a), 3);
          else comm.recv(ddl::host_view(a), 0, 3);
          log.add("rank 1: a 4-element receive of a 5-element send returned");
        }
      } catch (const ddl::transport_error& e) {
        const std::string what = e.what();
        if (t.rank() == 1 && what.find("size mismatch: rank 0 sent 20 bytes, rank 1 expected 16") == std::string::npos)
          log.add("rank 1: " + what);
        if (t.rank() == 0 && what.find("rank 1 failed") == std::string::npos &&
            what.find("size mismatch") == std::string::npos)
          log.add("rank 0: " + what);
      }
      if (clock_type::now() - start > std::chrono::seconds(10)) log.add("the error took the deadline");
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}
