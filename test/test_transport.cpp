// The Transport concept and the in-process transport: matching rules,
// cancellation, limits, abort propagation, and the generic (non-fused)
// receive-then-reduce pipeline through a transport that lacks irecv_reduce.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

#include "matrix.hpp"

using namespace ddl_test;
using namespace std::chrono_literals;

TYPE_TO_STRING(ddl::ring);
TYPE_TO_STRING(ddl::recursive_doubling);
TYPE_TO_STRING(ddl::halving_doubling);
TYPE_TO_STRING(ddl::multi_ring<ddl::dynamic_extents>);
TYPE_TO_STRING(ddl::one_shot);
TYPE_TO_STRING(ddl::two_shot);

static_assert(ddl::is_transport_v<ddl::local_transport>);
static_assert(ddl::check_transport<ddl::local_transport>());
static_assert(ddl::has_fused_reduce_v<ddl::local_transport>);
static_assert(!ddl::accepts_device_memory_v<ddl::local_transport>);
static_assert(!ddl::is_transport_v<int>);
static_assert(ddl::is_transport_v<ddl::group_view<ddl::local_transport>>);
static_assert(ddl::has_fused_reduce_v<ddl::group_view<ddl::local_transport>>);
static_assert(ddl::has_peer_memory_v<ddl::local_transport>);
static_assert(ddl::has_peer_memory_v<ddl::group_view<ddl::local_transport>>);
static_assert(!ddl::has_peer_memory_v<int>);
static_assert(ddl::has_wait_until_v<ddl::local_transport> && ddl::has_stage_raised_v<ddl::local_transport>);
static_assert(!ddl::has_stage_raised_v<ddl::group_view<ddl::local_transport>>);  // stages serve the whole group

namespace {
// A transport that forwards only the required members, so strategies take
// the generic path: receive into scratch, then reduce.
struct copy_only {
  ddl::local_transport* inner;
  using request = ddl::local_transport::request;
  int rank() const { return inner->rank(); }
  int size() const { return inner->size(); }
  request isend(int p, ddl::const_bytes b, ddl::tag t) { return inner->isend(p, b, t); }
  request irecv(int p, ddl::mutable_bytes b, ddl::tag t) { return inner->irecv(p, b, t); }
  void wait(request& r, ddl::deadline d) { inner->wait(r, d); }
};
static_assert(ddl::is_transport_v<copy_only>);
static_assert(!ddl::has_fused_reduce_v<copy_only>);

// A transport that counts its sends and forwards the fused receive; with
// Ordered, it declares itself stream-ordered, and the step engine must then
// send each slice whole.
template <bool Ordered>
struct counted {
  static constexpr bool stream_ordered = Ordered;
  ddl::local_transport* inner;
  std::size_t* sends;
  using request = ddl::local_transport::request;
  int rank() const { return inner->rank(); }
  int size() const { return inner->size(); }
  request isend(int p, ddl::const_bytes b, ddl::tag t) {
    ++*sends;
    return inner->isend(p, b, t);
  }
  request irecv(int p, ddl::mutable_bytes b, ddl::tag t) { return inner->irecv(p, b, t); }
  request irecv_reduce(int p, ddl::mutable_bytes d, ddl::const_bytes l, ddl::reduction r, ddl::tag t) {
    return inner->irecv_reduce(p, d, l, r, t);
  }
  void wait(request& r, ddl::deadline d) { inner->wait(r, d); }
};
using whole_slices = counted<true>;
static_assert(ddl::is_stream_ordered_v<whole_slices>);
static_assert(ddl::is_stream_ordered_v<ddl::group_view<whole_slices>>);
static_assert(!ddl::is_stream_ordered_v<ddl::local_transport>);
static_assert(!ddl::is_stream_ordered_v<copy_only>);
static_assert(!ddl::is_stream_ordered_v<counted<false>>);

// A transport that caps its messages between "machines" (ranks 0..m-1,
// m..2m-1, ...) at `piece` bytes (`piece_bytes`, as `mpi_transport` caps
// those to other machines over TCP) and records the largest message it sent
// to each peer.
struct pieced {
  ddl::local_transport* inner;
  int machine_ranks;
  std::size_t piece;
  std::vector<std::size_t>* largest;  // per peer
  std::size_t eager = 0;              // `eager_bytes` to peers on this "machine"
  using request = ddl::local_transport::request;
  int rank() const { return inner->rank(); }
  int size() const { return inner->size(); }
  std::size_t piece_bytes(int peer) const { return rank() / machine_ranks != peer / machine_ranks ? piece : 0; }
  std::size_t eager_bytes(int peer) const { return rank() / machine_ranks == peer / machine_ranks ? eager : 0; }
  request isend(int p, ddl::const_bytes b, ddl::tag t) {
    auto& l = (*largest)[static_cast<std::size_t>(p)];
    l = std::max(l, b.size);
    return inner->isend(p, b, t);
  }
  request irecv(int p, ddl::mutable_bytes b, ddl::tag t) { return inner->irecv(p, b, t); }
  bool test(request& r) { return inner->test(r); }
  void wait(request& r, ddl::deadline d) { inner->wait(r, d); }
};
static_assert(ddl::has_piece_bytes_v<pieced>);
static_assert(ddl::has_piece_bytes_v<ddl::group_view<pieced>>);
static_assert(!ddl::has_piece_bytes_v<ddl::local_transport>);
static_assert(ddl::has_eager_bytes_v<ddl::group_view<pieced>>);
static_assert(!ddl::has_eager_bytes_v<ddl::group_view<ddl::local_transport>>);

ddl::deadline soon(std::chrono::milliseconds ms = 5000ms) { return std::chrono::steady_clock::now() + ms; }
}  // namespace

TEST_CASE("piece_bytes: messages to a capped peer are cut to the cap (through group views too), others keep the chunk") {
  // 6 ranks as 2 machines of 3: the ring's steps 2->3 and 5->0 and the box's
  // outer dimension cross machines. Chunks of 4 KiB, pieces of 1002 B (not a
  // whole number of 4- or 8-byte elements: cut to whole ones on both sides).
  ddl::options o;
  o.chunk_bytes = 4096;
  o.pipeline_depth = 3;
  const int n = 6;
  const auto counts = matrix_counts(n, 20011);
  const ddl::multi_ring<ddl::dynamic_extents> box(ddl::dynamic_extents{3, 2}, {0, 1});
  auto piped = box;
  piped.pipelined(3);
  for (int which = 0; which < 5; ++which) {
    CAPTURE(which);
    failure_log log;
    std::vector<std::byte> expected(matrix_bytes(counts));
    std::vector<std::vector<std::size_t>> largest(n, std::vector<std::size_t>(n, 0));
    thread_barrier bar(n);
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      pieced t{&lt, 3, 1002, &largest[static_cast<std::size_t>(lt.rank())]};
      auto sync = [&] { bar.arrive_and_wait(); };
      switch (which) {
        case 0: matrix_rank(t, counts, log, o, ddl::ring{}, expected.data(), true, sync); break;
        case 1: matrix_rank(t, counts, log, o, box, expected.data(), true, sync); break;
        case 2: matrix_rank(t, counts, log, o, piped, expected.data(), true, sync); break;
        case 3: matrix_rank(t, counts, log, o, ddl::halving_doubling{}, expected.data(), true, sync); break;
        default: matrix_rank(t, counts, log, o, ddl::recursive_doubling{}, expected.data(), true, sync); break;
      }
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
    std::size_t across = 0, within = 0;  // the largest message across machines, and within one
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) {
        std::size_t& m = r / 3 != p / 3 ? across : within;
        m = std::max(m, largest[static_cast<std::size_t>(r)][static_cast<std::size_t>(p)]);
      }
    CHECK(across > 0);
    CHECK(across <= 1002);
    CHECK(within == 4096);  // the control: uncapped peers get whole chunks
  }
}

TEST_CASE("eager_bytes: rings and a multi-ring's dimensions (group views) cut their few-eager slices") {
  // 6 ranks as 2 machines of 3, eager limit 256 B between ranks of one
  // machine. An all-reduce of 450 floats on the box {3, 2}: the inner
  // dimension (a group view of ranks on one machine) moves slices of 600 B,
  // at most 4 eager messages, so in pieces of 256 B; the outer one 300 B
  // across machines, whole. The flat ring (the one-dimensional multi-ring,
  // on a group view of all 6) moves slices of 300 B: 256 B within machines.
  // Before group views forwarded `eager_bytes`, these were 600 and 300 B.
  const int n = 6;
  const std::size_t count = 450;
  const ddl::multi_ring<ddl::dynamic_extents> box(ddl::dynamic_extents{3, 2}, {0, 1});
  for (int which = 0; which < 2; ++which) {
    CAPTURE(which);
    failure_log log;
    std::vector<std::vector<std::size_t>> largest(n, std::vector<std::size_t>(n, 0));
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      pieced t{&lt, 3, 0, &largest[static_cast<std::size_t>(lt.rank())], 256};
      std::vector<float> in(count), out(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>(t.rank() * 1000 + static_cast<int>(i));
      auto run = [&](auto&& comm) {
        comm.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), ddl::op::sum);
      };
      if (which == 0) run(ddl::communicator<ddl::multi_ring<ddl::dynamic_extents>, pieced>(t, box, ddl::options{}));
      else run(ddl::communicator<ddl::ring, pieced>(t, ddl::ring{}, ddl::options{}));
      for (std::size_t i = 0; i < count; ++i)
        if (out[i] != static_cast<float>(15000 + 6 * static_cast<int>(i))) {
          log.add("rank " + std::to_string(t.rank()) + " element " + std::to_string(i) + " is wrong");
          break;
        }
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
    std::size_t within = 0;
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        if (r / 3 == p / 3) within = std::max(within, largest[static_cast<std::size_t>(r)][static_cast<std::size_t>(p)]);
    CHECK(within > 0);
    CHECK(within <= 256);
  }
}

TEST_CASE("local: receives match by tag, and in posting order within a tag") {
  ddl::local_fabric::run(2, [](ddl::local_transport& t) {
    int a = 11, b = 22, c = 33;
    if (t.rank() == 0) {
      auto s1 = t.isend(1, {reinterpret_cast<const std::byte*>(&a), 4}, 7);
      auto s2 = t.isend(1, {reinterpret_cast<const std::byte*>(&b), 4}, 9);
      auto s3 = t.isend(1, {reinterpret_cast<const std::byte*>(&c), 4}, 7);
      t.wait(s1, soon());
      t.wait(s2, soon());
      t.wait(s3, soon());
    } else {
      int x = 0, y = 0, z = 0;
      auto r9 = t.irecv(0, {reinterpret_cast<std::byte*>(&y), 4}, 9);
      auto r7a = t.irecv(0, {reinterpret_cast<std::byte*>(&x), 4}, 7);
      auto r7b = t.irecv(0, {reinterpret_cast<std::byte*>(&z), 4}, 7);
      t.wait(r7b, soon());  // completes the older tag-7 receive first
      t.wait(r9, soon());
      t.wait(r7a, soon());
      if (x != 11 || y != 22 || z != 33) throw std::runtime_error("mismatched tags or order");
    }
  });
}

TEST_CASE("local: messages of one tag arrive in order while slots are reused, under oversubscription") {
  // Ordering property under slot reuse. (The scan race fixed with
  // `published` needs a preemption inside one scan; this test does not
  // force it reliably — the n = 8 generic-pipeline test under load caught it.)
  // Busy threads add preemption.
  std::atomic<bool> stop{false};
  std::vector<std::thread> noise;
  for (int i = 0; i < 4; ++i)
    noise.emplace_back([&] {
      while (!stop) std::this_thread::yield();
    });
  // The sender posts bursts into freshly freed slots (lowest index first)
  // while the receiver, with a full window of receives, keeps scanning.
  constexpr int window = 24, bursts = 3000, messages = window * bursts;
  std::vector<int> values(messages);
  for (int i = 0; i < messages; ++i) values[i] = i;
  int out_of_order = 0;
  ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
    if (t.rank() == 0) {
      std::vector<ddl::local_transport::request> inflight(window);
      for (int b = 0; b < bursts; ++b) {
        for (int k = 0; k < window; ++k)
          inflight[k] = t.isend(1, {reinterpret_cast<const std::byte*>(&values[b * window + k]), sizeof(int)}, 5);
        for (auto& r : inflight) t.wait(r, soon());
      }
    } else {
      std::vector<int> got(window);
      std::vector<ddl::local_transport::request> rs(window);
      int next = 0;
      for (int i = 0; i < messages + window; ++i) {
        auto& r = rs[i % window];
        if (i >= window) {
          t.wait(r, soon());
          out_of_order += got[i % window] != next++;
        }
        if (i < messages) r = t.irecv(0, {reinterpret_cast<std::byte*>(&got[i % window]), sizeof(int)}, 5);
      }
    }
  });
  stop = true;
  for (auto& th : noise) th.join();
  CHECK(out_of_order == 0);
}

TEST_CASE("local: a size mismatch is a transport_error on the receiver") {
  CHECK_THROWS_AS(ddl::local_fabric::run(2,
                                         [](ddl::local_transport& t) {
                                           std::int64_t v = 5;
                                           if (t.rank() == 0) {
                                             auto s = t.isend(1, {reinterpret_cast<const std::byte*>(&v), 8}, 1);
                                             t.wait(s, soon(500ms));
                                           } else {
                                             std::int32_t w = 0;
                                             auto r = t.irecv(0, {reinterpret_cast<std::byte*>(&w), 4}, 1);
                                             t.wait(r, soon());
                                           }
                                         }),
                  ddl::transport_error);
}

TEST_CASE("local: a destroyed send is withdrawn, the receiver times out") {
  ddl::local_fabric fabric(2);
  std::atomic<bool> dropped{false};
  bool timed_out = false;
  constexpr std::size_t bytes = ddl::local_transport::eager_bytes + 8;  // not copied at the send
  fabric.run_on([&](ddl::local_transport& t) {
    if (t.rank() == 0) {
      std::byte v[bytes] = {};
      { auto s = t.isend(1, {v, bytes}, 3); }
      dropped = true;
    } else {
      while (!dropped) std::this_thread::yield();
      std::byte w[bytes];
      auto r = t.irecv(0, {w, bytes}, 3);
      try {
        t.wait(r, soon(100ms));
      } catch (const ddl::timeout_error& e) {
        timed_out = e.peer() == 0;
      }
    }
  });
  CHECK(timed_out);
}

TEST_CASE("local: a small send is copied at once and complete on return; its buffer may be reused") {
  ddl::local_fabric fabric(2);
  std::atomic<bool> sent{false};
  std::int64_t got[4] = {};
  bool complete_at_send = false;
  fabric.run_on([&](ddl::local_transport& t) {
    if (t.rank() == 0) {
      std::int64_t v[4] = {1, 2, 3, 4};
      static_assert(sizeof v <= ddl::local_transport::eager_bytes);
      auto s = t.isend(1, {reinterpret_cast<const std::byte*>(v), sizeof v}, 7);
      complete_at_send = !s.active();
      std::memset(v, 0xff, sizeof v);  // the receiver must still see 1, 2, 3, 4
      sent = true;
    } else {
      while (!sent) std::this_thread::yield();
      auto r = t.irecv(0, {reinterpret_cast<std::byte*>(got), sizeof got}, 7);
      t.wait(r, soon());
    }
  });
  CHECK(complete_at_send);
  CHECK(got[0] == 1);
  CHECK(got[3] == 4);
}

TEST_CASE("local: too many sends in flight is an error, not a hang") {
  ddl::local_fabric fabric(2);
  auto t = fabric.transport(0);
  std::byte v[64] = {};  // above eager_bytes: each send stays in flight until received
  std::vector<ddl::local_transport::request> reqs;
  for (int i = 0; i < ddl::local_transport::max_in_flight; ++i) reqs.push_back(t.isend(1, {v, sizeof v}, 1));
  CHECK_THROWS_AS(t.isend(1, {v, sizeof v}, 1), ddl::transport_error);
  // Small sends complete at once: half a mailbox of them never counts against
  // the requests a rank may hold; past that they are ordinary requests.
  ddl::local_fabric f2(2);
  auto t2 = f2.transport(0);
  std::vector<ddl::local_transport::request> small;
  for (int i = 0; i < ddl::local_transport::max_in_flight / 2 + ddl::local_transport::max_in_flight; ++i)
    small.push_back(t2.isend(1, {v, 4}, 1));
  CHECK(std::count_if(small.begin(), small.end(), [](const auto& r) { return !r.active(); }) ==
        ddl::local_transport::max_in_flight / 2);
  CHECK_THROWS_AS(t2.isend(1, {v, 4}, 1), ddl::transport_error);
}

TEST_CASE("local: a rank that throws aborts the others at once, and its error is the one rethrown") {
  const auto start = std::chrono::steady_clock::now();
  try {
    ddl::local_fabric::run(3, [](ddl::local_transport& t) {
      if (t.rank() == 1) throw std::logic_error("rank 1 broke");
      int w = 0;
      auto r = t.irecv(1, {reinterpret_cast<std::byte*>(&w), 4}, 1);
      t.wait(r, soon(60000ms));
    });
    FAIL("no exception");
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()) == "rank 1 broke");
  }
  CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("rank runner: the first failure in time is reported once and rethrown, not the lowest rank's") {
  // Rank 3 fails first; ranks 0-2 fail only after being told (as a fabric's
  // aborted waits do). What surfaces is rank 3's own exception, type kept.
  std::atomic<int> calls{0}, told{-1};
  std::string why;
  std::atomic<int> ran{0};
  try {
    ddl::detail::run_rank_threads(
        5,
        [&](int r) {
          ran.fetch_add(1);
          if (r == 3) throw std::logic_error("rank 3 broke");
          if (r == 4) return;  // a rank that finishes normally
          while (told.load() < 0) std::this_thread::yield();
          throw ddl::transport_error("rank " + std::to_string(told.load()) + " failed: " + why);
        },
        [&](int r, const std::string& what) {
          calls.fetch_add(1);
          why = what;
          told.store(r);
        });
    FAIL("no exception");
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()) == "rank 3 broke");
  }
  CHECK(ran.load() == 5);
  CHECK(calls.load() == 1);
  CHECK(told.load() == 3);
  CHECK(why == "rank 3 broke");

  // No failure: every rank runs, nothing is reported.
  calls = 0;
  ran = 0;
  ddl::detail::run_rank_threads(
      3, [&](int) { ran.fetch_add(1); }, [&](int, const std::string&) { calls.fetch_add(1); });
  CHECK(ran.load() == 3);
  CHECK(calls.load() == 0);

  // A non-standard exception is reported as "unknown exception" and rethrown as is.
  try {
    ddl::detail::run_rank_threads(
        2, [](int r) { if (r == 1) throw 42; }, [&](int, const std::string& what) { why = what; });
    FAIL("no exception");
  } catch (int v) {
    CHECK(v == 42);
  }
  CHECK(why == "unknown exception");
}

TEST_CASE("local: the other ranks learn which rank failed and why") {
  std::vector<std::string> seen(3);
  CHECK_THROWS_AS(ddl::local_fabric::run(3,
                                         [&](ddl::local_transport& t) {
                                           if (t.rank() == 2) throw std::runtime_error("out of coffee");
                                           int w = 0;
                                           try {
                                             // The post itself throws when rank 2 has already failed.
                                             auto r = t.irecv(2, {reinterpret_cast<std::byte*>(&w), 4}, 1);
                                             t.wait(r, soon(60000ms));
                                           } catch (const ddl::transport_error& e) {
                                             seen[static_cast<std::size_t>(t.rank())] = e.what();
                                             throw;
                                           }
                                         }),
                  std::runtime_error);
  for (int r : {0, 1}) {
    CAPTURE(seen[static_cast<std::size_t>(r)]);
    CHECK(seen[static_cast<std::size_t>(r)].find("rank 2 failed: out of coffee") != std::string::npos);
  }
}

TEST_CASE("local: invalid peers and null buffers are rejected") {
  ddl::local_fabric fabric(2);
  auto t = fabric.transport(0);
  int v = 0;
  CHECK_THROWS_AS(t.isend(2, {reinterpret_cast<const std::byte*>(&v), 4}, 1), ddl::invalid_argument);
  CHECK_THROWS_AS(t.irecv(-1, {reinterpret_cast<std::byte*>(&v), 4}, 1), ddl::invalid_argument);
  CHECK_THROWS_AS(t.isend(1, {nullptr, 4}, 1), ddl::invalid_argument);
  CHECK_THROWS_AS(ddl::local_fabric(0), ddl::invalid_argument);
}

TEST_CASE("generic pipeline: receive into scratch, then reduce (transport without irecv_reduce)") {
  // The ring over copy_only must give the same exact results as over the
  // fused transport, with tiny chunks so the scratch ring wraps many times.
  ddl::options o;
  o.chunk_bytes = 64;
  o.pipeline_depth = 3;
  for (int n : {1, 2, 3, 5, 8}) {
    CAPTURE(n);
    failure_log log;
    const auto counts = matrix_counts(n, 4099);
    const std::size_t maxc = 4099;
    std::vector<std::byte> expected(maxc * 8);
    thread_barrier bar(n);
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      copy_only t{&lt};
      ddl::communicator<ddl::ring, copy_only> comm(t, o);
      for (ddl::dtype dt : ddl::all_dtypes)
        ddl::visit_dtype(dt, [&](auto tag) {
          using T = decltype(tag);
          for (std::size_t count : counts)
            for (ddl::op op : ddl::all_ops) {
              std::vector<T> in(count), out(count);
              for (std::size_t i = 0; i < count; ++i) in[i] = to_element<T>(input_value(dt, op, t.rank(), i));
              if (count) std::memset(out.data(), sentinel, count * sizeof(T));
              comm.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), op);
              for (std::size_t i = 0; i < count; ++i)
                if (!same_bits(out[i], expected_value<T>(op, n, i))) {
                  log.add(std::string("copy_only all_reduce ") + ddl::name_of(dt) + " " + ddl::name_of(op) +
                          " count " + std::to_string(count) + " element " + std::to_string(i));
                  break;
                }
            }
        });
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

// Recursive doubling's whole matrix (every dtype, op, count, in and out of
// place, input untouched) on 1-9 ranks, folds included, with 64-byte chunks
// and a window of `depth`: over `local_transport` itself (`fused`: it
// reduces as it receives) or through copy_only (it cannot).
static void recursive_doubling_matrix(bool fused, std::size_t depth, std::initializer_list<std::size_t> extra_counts) {
  ddl::options o;
  o.chunk_bytes = 64;
  o.pipeline_depth = depth;
  for (int n = 1; n <= 9; ++n) {
    CAPTURE(n);
    failure_log log;
    auto counts = matrix_counts(n, 4099);
    counts.insert(counts.end(), extra_counts);
    std::vector<std::byte> expected(4099 * 8);
    thread_barrier bar(n);
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      auto on = [&](auto& t) {
        matrix_rank(t, counts, log, o, ddl::recursive_doubling{}, expected.data(), true, [&] { bar.arrive_and_wait(); });
      };
      if (fused) {
        on(lt);
      } else {
        copy_only t{&lt};
        on(t);
      }
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("generic pipeline: recursive doubling reduces into the buffer it sends, each slice once sent") {
  // Without irecv_reduce (MPI's case) every exchange receives and reduces into
  // the buffer it is sending from: a slice may be overwritten only after its
  // send completed. Tiny chunks and a shallow window make slices overtake
  // each other.
  recursive_doubling_matrix(false, 2, {});
}

TEST_CASE("recursive doubling over a transport that reduces as it receives lands what it reduces into its buffer") {
  // local_transport reduces as it receives, reading the peer's buffer: an
  // exchange into the buffer it sends (in place, and every exchange after
  // the first) lands chunks in the workspace and combines each once sent,
  // from two chunks up; below that the buffer and the workspace alternate.
  // A ring of 3 chunks; counts of one chunk, of 2-3 (20, 40, 48 elements of
  // 2-8 bytes) and far past the ring.
  recursive_doubling_matrix(true, 3, {20, 40, 48});
}

// copy_only that also completes requests without blocking: the multi-ring
// pipelined across levels runs on it (chunks land in the workspace, then
// are reduced), as over MPI.
struct copy_only_polled : copy_only {
  bool test(request& r) { return inner->test(r); }
  void await_progress() { inner->await_progress(); }
};
static_assert(ddl::detail::can_pipeline_v<copy_only_polled>);
static_assert(!ddl::detail::can_pipeline_v<copy_only>);

TEST_CASE("generic pipeline: the multi-ring pipelined across levels lands chunks in its workspace") {
  // The full matrix on 2x3 and 2x2x2 boxes, 3 segments with tiny chunks, 4 with
  // 1 MiB ones: several segments' stages in flight at once over a
  // transport without irecv_reduce, each combining from its own part of the
  // workspace.
  ddl::options tiny, whole;
  tiny.chunk_bytes = 64;
  tiny.pipeline_depth = 2;
  for (const char* spec : {"2:10GB/s:1us,3:1GB/s:10us", "2:10GB/s:1us,2:1GB/s:10us,2:100MB/s:50us"}) {
    const auto topo = ddl::topology::parse(spec);
    const int n = topo.size();
    for (const auto& run : {std::pair<int, ddl::options>{3, tiny}, {4, whole}}) {
      const int segments = run.first;
      const ddl::options& o = run.second;
      ddl::plan p = ddl::best_plan(topo, 64e6, {ddl::candidates::multi_ring_only});
      p.segments = segments;
      CAPTURE(ddl::describe(topo, p));
      failure_log log;
      // Tiny chunks: counts up to 1009 (thousands of chunks per step already).
      const auto counts = matrix_counts(n, o.chunk_bytes < 4096 ? 0 : 4099);
      std::vector<std::byte> expected(4099 * 8);
      thread_barrier bar(n);
      ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
        copy_only_polled t{{&lt}};
        matrix_rank(t, counts, log, o, ddl::planned(topo, p), expected.data(), true, [&] { bar.arrive_and_wait(); });
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
  }
}

TEST_CASE("stream-ordered transport: each slice is one message, whatever the chunk size") {
  // chunk_bytes = 64 would cut a ring step of 4099 floats into dozens of
  // chunks; a stream-ordered transport gets one message per step: a ring
  // all-reduce sends 2(n-1) times per rank, with the same exact results.
  ddl::options o;
  o.chunk_bytes = 64;
  for (int n : {1, 2, 3, 5, 8}) {
    CAPTURE(n);
    failure_log log;
    std::vector<std::size_t> sends(static_cast<std::size_t>(n)), chunked_sends(static_cast<std::size_t>(n));
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      const auto r = static_cast<std::size_t>(lt.rank());
      whole_slices t{&lt, &sends[r]};
      ddl::communicator<ddl::ring, whole_slices> comm(t, o);
      for (ddl::dtype dt : ddl::all_dtypes)
        ddl::visit_dtype(dt, [&](auto tag) {
          using T = decltype(tag);
          for (std::size_t count : matrix_counts(n, 4099))
            for (ddl::op op : ddl::all_ops) {
              std::vector<T> in(count), out(count);
              for (std::size_t i = 0; i < count; ++i) in[i] = to_element<T>(input_value(dt, op, t.rank(), i));
              if (count) std::memset(out.data(), sentinel, count * sizeof(T));
              const std::size_t before = sends[r];
              comm.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), op);
              if (count == 4099 && sends[r] - before != static_cast<std::size_t>(2 * (n - 1)))
                log.add("ring all_reduce of 4099 elements: " + std::to_string(sends[r] - before) + " sends, want " +
                        std::to_string(2 * (n - 1)));
              for (std::size_t i = 0; i < count; ++i)
                if (!same_bits(out[i], expected_value<T>(op, n, i))) {
                  log.add(std::string("whole_slices all_reduce ") + ddl::name_of(dt) + " " + ddl::name_of(op) +
                          " count " + std::to_string(count) + " element " + std::to_string(i));
                  break;
                }
            }
        });
      // Doubling strategies (fold, exchange, halving steps) through whole slices too.
      ddl::communicator<ddl::halving_doubling, whole_slices> hd(t, o);
      ddl::communicator<ddl::recursive_doubling, whole_slices> rd(t, o);
      for (std::size_t count : matrix_counts(n, 4099)) {
        std::vector<double> in(count), out_hd(count), out_rd(count);
        for (std::size_t i = 0; i < count; ++i) in[i] = input_value(ddl::dtype::float64, ddl::op::sum, t.rank(), i);
        hd.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out_hd), ddl::op::sum);
        rd.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out_rd), ddl::op::sum);
        for (std::size_t i = 0; i < count; ++i)
          if (!same_bits(out_hd[i], expected_value<double>(ddl::op::sum, n, i)) ||
              !same_bits(out_rd[i], expected_value<double>(ddl::op::sum, n, i))) {
            log.add("whole_slices doubling all_reduce count " + std::to_string(count) + " element " +
                    std::to_string(i));
            break;
          }
      }
      // The control: the same call over a transport that is not stream-ordered is chunked.
      counted<false> ct{&lt, &chunked_sends[r]};
      ddl::communicator<ddl::ring, counted<false>> plain(ct, o);
      std::vector<float> in(4099, 1.0f), out(4099);
      plain.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), ddl::op::sum);
      if (n > 1 && chunked_sends[r] <= static_cast<std::size_t>(2 * (n - 1)))
        log.add("control: only " + std::to_string(chunked_sends[r]) + " chunked sends");
      if (out[4098] != static_cast<float>(n)) log.add("plain ring all_reduce is wrong");
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE_TEMPLATE("results are bit-identical on every rank and across runs (non-integer data)", S, ddl::ring,
                   ddl::recursive_doubling, ddl::halving_doubling, ddl::multi_ring<ddl::dynamic_extents>,
                   ddl::one_shot, ddl::two_shot) {
  // Random floats make sums round. Each strategy still combines in one
  // fixed order (the ring per block; the doubling algorithms always as
  // lower rank (op) higher rank), so every rank must hold the same bits, run
  // after run. min/max on values with -0/+0 ties check operand order too.
  for (int n : {3, 8, 13}) {
    for (ddl::dtype dt : {ddl::dtype::float32, ddl::dtype::float64, ddl::dtype::float16, ddl::dtype::bfloat16}) {
      for (ddl::op op : {ddl::op::sum, ddl::op::min, ddl::op::avg}) {
        CAPTURE(n);
        CAPTURE(ddl::name_of(dt));
        CAPTURE(ddl::name_of(op));
        const std::size_t count = 30011;
        const std::size_t bytes = count * ddl::size_of(dt);
        std::vector<std::vector<std::byte>> results(static_cast<std::size_t>(n) * 2, std::vector<std::byte>(bytes));
        S strategy = [&] {
          if constexpr (std::is_same_v<S, ddl::multi_ring<ddl::dynamic_extents>>)
            return n == 8 ? S({2, 4}, {1, 0}) : S({n});
          else
            return S{};
        }();
        ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
          ddl::communicator<S, ddl::local_transport> comm(t, strategy);
          ddl::visit_dtype(dt, [&](auto tag) {
            using T = decltype(tag);
            std::mt19937 gen(1234u + static_cast<unsigned>(t.rank()));
            std::normal_distribution<double> dist(0.0, 1.0);
            std::vector<T> in(count);
            for (std::size_t i = 0; i < count; ++i)
              in[i] = T(static_cast<float>(i % 97 == 0 ? ((t.rank() & 1) ? -0.0 : 0.0) : dist(gen)));
            for (int run = 0; run < 2; ++run) {
              auto& out = results[static_cast<std::size_t>(run * n + t.rank())];
              comm.all_reduce(ddl::host_view(std::as_const(in)),
                              ddl::host_view(reinterpret_cast<T*>(out.data()), count), op);
            }
          });
        });
        for (std::size_t k = 1; k < results.size(); ++k) CHECK(results[k] == results[0]);
      }
    }
  }
}

#if defined(__linux__)
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include "ddl/shm/process.hpp"

TEST_CASE("process watch: a child is running, stopped, then gone; a reused pid or another machine is not taken for it") {
  // What the MPI transport uses to learn that an awaited peer's process
  // exited: a real child process, stopped and killed by signals.
  using ddl::detail::process_state;
  const ddl::detail::process_id me = ddl::detail::this_process();
  REQUIRE(me.machine != 0);
  CHECK(ddl::detail::state_of(me, me.machine) == process_state::running);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (;;) ::pause();  // only signals end it
  }
  ddl::detail::process_id c;
  c.pid = child;
  c.machine = me.machine;
  char state = 0;
  REQUIRE(ddl::detail::read_stat(child, state, c.start));
  CHECK(ddl::detail::state_of(c, me.machine) == process_state::running);
  CHECK(ddl::detail::state_of(c, me.machine + 1) == process_state::unknown);  // another machine: not looked at
  ddl::detail::process_id reused = c;
  reused.start += 1;  // the same pid under another start time: a later process
  CHECK(ddl::detail::state_of(reused, me.machine) == process_state::gone);

  int status = 0;
  ::kill(child, SIGSTOP);
  REQUIRE(::waitpid(child, &status, WUNTRACED) == child);
  CHECK(WIFSTOPPED(status));
  CHECK(ddl::detail::state_of(c, me.machine) == process_state::stopped);
  ::kill(child, SIGCONT);
  REQUIRE(::waitpid(child, &status, WCONTINUED) == child);
  CHECK(ddl::detail::state_of(c, me.machine) == process_state::running);

  ::kill(child, SIGKILL);
  // Dead but not reaped (a zombie): already gone.
  for (int i = 0; i < 1000 && ddl::detail::state_of(c, me.machine) != process_state::gone; ++i)
    std::this_thread::sleep_for(1ms);
  CHECK(ddl::detail::state_of(c, me.machine) == process_state::gone);
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(ddl::detail::state_of(c, me.machine) == process_state::gone);  // reaped: no /proc entry
  CHECK(std::string(ddl::detail::name_of(process_state::gone)) == "exited");
}
#endif

TEST_CASE("one_shot: through its stage and around it, call after call, every result exact") {
  // Sizes that grow, shrink and cross every stage limit (the transport
  // stages' counters up to 64 KiB, the strategy's stage up to 16 KiB out of
  // place and 256 KiB in place; in int32s: 16384, 4096, 65536; above them in
  // place, segments of 16384 landed through 4 slots: 65537 is 5, 147461 10,
  // 262144 16), ranks that are all
  // in place, all out of place, or some of each (then the stage is not used
  // by anyone), and ranks late at random: a rank may write a stage slot, or
  // a landed segment into its buffer, only once every peer has finished
  // reading it, so any slip shows as a wrong sum.
  const std::vector<std::size_t> sizes{1,     3,      1000, 4096, 4097,   16384, 16385, 65536,
                                       65537, 147461, 999,  2,    262144, 70000, 16384, 4096, 5};
  static_assert(ddl::one_shot::land_segment == 16384 * sizeof(std::int32_t) && ddl::one_shot::land_slots == 4);
  for (int n : {2, 3, 5}) {
    CAPTURE(n);
    std::atomic<int> wrong{0};
    std::string first;  // written by the first rank to find a wrong element
    ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
      ddl::options o;
      o.timeout = std::chrono::seconds(30);
      ddl::communicator<ddl::one_shot, ddl::local_transport> comm(t, o);
      const int r = t.rank();
      std::mt19937 rng(static_cast<unsigned>(r) * 7919u + 1u);
      std::vector<std::int32_t> in, out;
      for (int call = 0; call < 240; ++call) {
        const std::size_t count = sizes[static_cast<std::size_t>(call) % sizes.size()];
        const bool in_place = call % 3 == 0 || (call % 3 == 2 && r % 2 == 0);
        auto value = [&](int rank, std::size_t i) { return (rank + 1) * 1000 + call * 7 + static_cast<int>(i % 13); };
        in.resize(count);
        out.assign(count, -1);
        for (std::size_t i = 0; i < count; ++i) in[i] = value(r, i);
        if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
        if (in_place) {
          comm.all_reduce(ddl::host_view(in), ddl::op::sum);
          out = in;
        } else {
          comm.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), ddl::op::sum);
        }
        for (std::size_t i = 0; i < count; ++i) {
          std::int32_t want = 0;
          for (int p = 0; p < n; ++p) want += value(p, i);
          if (out[i] != want) {
            if (wrong++ == 0)
              first = "rank " + std::to_string(r) + ", call " + std::to_string(call) + ", count " +
                      std::to_string(count) + (in_place ? " in place" : " out of place") + ": element " +
                      std::to_string(i) + " is " + std::to_string(out[i]) + ", not " + std::to_string(want);
            break;
          }
        }
      }
    });
    CHECK_MESSAGE(wrong.load() == 0, first);
  }
}

#if defined(__linux__)
#include <sys/resource.h>

#include "ddl/shm/shared_stages.hpp"

TEST_CASE("shared stages: two ranks share when each opened the other's; a group shares when all its pairs do") {
  // This process plays rank 0 of 4; the rows of ranks 1-3 are made up.
  // Machines {0, 1} and {2, 3}; rank 1 also opened rank 2's stage, but not
  // the other way round: one-sided, so 1 and 2 do not share.
  ddl::detail::shared_stages s;
  const auto f = s.create();
  REQUIRE(f.fd >= 0);
  REQUIRE(s.open_peer(1, static_cast<std::int64_t>(::getpid()), f, 4));  // rank 1's stage: here our own file
  const auto mine = s.row(0, 4);
  const std::size_t w = ddl::detail::shared_stages::row_words(4);
  REQUIRE(mine.size() == w);
  CHECK(mine[0] == 0b0011u);
  std::vector<std::uint64_t> rows(4 * w, 0);
  rows[0] = mine[0];
  rows[1 * w] = 0b0111u;  // rank 1: itself, 0 and 2
  rows[2 * w] = 0b1100u;  // rank 2: itself and 3
  rows[3 * w] = 0b1100u;
  s.agree(rows, 0, 4);
  CHECK_FALSE(s.shared());
  CHECK(s.shared_among(0, 1, 2));
  CHECK(s.shared_among(2, 1, 2));
  CHECK_FALSE(s.shared_among(1, 1, 2));  // one-sided
  CHECK_FALSE(s.shared_among(0, 1, 4));
  CHECK_FALSE(s.shared_among(0, 2, 2));
  CHECK(s.shared_among(3, 1, 1));
  CHECK_FALSE(s.shared_among(3, 1, 2));  // past the last rank
  // Memory read (`read`): rank 0 read its peer's probe word (here its own);
  // rows of 1-3 say no reads, so no pair but none reads.
  CHECK(mine[w / 2] == 0b0011u);
  CHECK_FALSE(s.readable());
  CHECK_FALSE(s.readable_among(0, 1, 2));
  CHECK(s.readable_among(3, 1, 1));
  std::uint64_t word = 0, value = 42;
  CHECK(s.read(1, reinterpret_cast<const std::byte*>(&value), reinterpret_cast<std::byte*>(&word), 8) == 0);
  CHECK(word == 42);
  CHECK(s.read(2, reinterpret_cast<const std::byte*>(&value), reinterpret_cast<std::byte*>(&word), 8) == EPERM);
  CHECK(s.read(1, reinterpret_cast<const std::byte*>(std::uintptr_t{8}), reinterpret_cast<std::byte*>(&word), 8) == EFAULT);
  CHECK(s.own(64, "test") != nullptr);   // rank 0 shares with rank 1: its stage stays
  CHECK(s.peer(1, 8, "test") != nullptr);
  CHECK_THROWS_AS(s.peer(2, 8, "test"), ddl::invalid_argument);  // never opened

  // A rank that shares with none keeps no stage, yet answers for the others.
  ddl::detail::shared_stages lone;
  REQUIRE(lone.create().fd >= 0);
  rows[0] = 0b0001u;
  lone.agree(rows, 0, 4);
  CHECK_FALSE(lone.shared_among(0, 1, 2));
  CHECK(lone.shared_among(2, 1, 2));
  CHECK_THROWS_AS(lone.own(64, "test"), ddl::invalid_argument);

  // Every pair: shared.
  ddl::detail::shared_stages all;
  REQUIRE(all.create().fd >= 0);
  std::vector<std::uint64_t> full(2 * ddl::detail::shared_stages::row_words(2), 0b11u);
  all.agree(full, 0, 2);
  CHECK(all.shared());
  CHECK(all.shared_among(0, 1, 2));
  CHECK(all.readable());
  CHECK(all.readable_among(0, 1, 2));
  // Every pair shares, but one rank reads none (its second half bare).
  ddl::detail::shared_stages some;
  REQUIRE(some.create().fd >= 0);
  std::vector<std::uint64_t> one_bare = full;
  one_bare[1] = 0b01u;
  some.agree(one_bare, 0, 2);
  CHECK(some.shared());
  CHECK_FALSE(some.readable());
  // A peer opened without trying to read: not readable.
  ddl::detail::shared_stages quiet;
  const auto qf = quiet.create();
  REQUIRE(quiet.open_peer(1, static_cast<std::int64_t>(::getpid()), qf, 2, false));
  CHECK(quiet.row(0, 2)[1] == 0b01u);
}

// Page faults this thread has taken so far (minor: the page was in memory or
// could be allocated without I/O).
static long minor_faults() {
  struct rusage ru {};
  ::getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt;
}

TEST_CASE("shared stages: a new mapping, own or a peer's, has its first warm_bytes faulted in; past them pages fault on touch") {
  // The direct strategies' counters, slots and broadcast ring lie there.
  static_assert(ddl::detail::direct_base::stage_prefix <= ddl::detail::shared_stages::warm_bytes);
  ddl::detail::shared_stages s;
  const auto f = s.create();
  REQUIRE(f.fd >= 0);
  REQUIRE(s.open_peer(1, static_cast<std::int64_t>(::getpid()), f, 2));  // rank 1's stage: our own file again
  s.agree(std::vector<std::uint64_t>(2 * ddl::detail::shared_stages::row_words(2), 0b11u), 0, 2);
  REQUIRE(s.shared());
  constexpr std::size_t warm = ddl::detail::shared_stages::warm_bytes, bytes = warm + (std::size_t{512} << 10);
  std::byte* own = s.own(bytes, "test");
  const std::byte* peer = s.peer(1, bytes, "test");
  // Touches a page every 4 KiB of [from, to): writes to the own mapping, reads of the peer's.
  auto faults_touching = [&](std::size_t from, std::size_t to) {
    const long before = minor_faults();
    unsigned sum = 0;
    for (std::size_t i = from; i < to; i += 4096) {
      *static_cast<volatile std::byte*>(own + i) = std::byte{1};
      sum += static_cast<unsigned>(*static_cast<const volatile std::byte*>(peer + i));
    }
    CHECK(sum == (to - from + 4095) / 4096);  // the peer's mapping shows the owner's writes
    return minor_faults() - before;
  };
  const long in_warm = faults_touching(0, warm), past_warm = faults_touching(warm, bytes);
  CAPTURE(in_warm);
  CAPTURE(past_warm);
  // Past the warm bytes each page faults once in each mapping, 2 a page;
  // inside them none (unwarmed, 2 as well). Compared per page, so faults of
  // a sanitizer's own (its shadow of each page touched, alike on both sides
  // of the line) cancel: plainly 0 against 2 a page, under ThreadSanitizer
  // 4 against 6, AddressSanitizer 0.25 against 2.2.
  const double per_page_in = static_cast<double>(in_warm) / (warm / 4096),
               per_page_past = static_cast<double>(past_warm) / ((bytes - warm) / 4096);
  CHECK(per_page_past - per_page_in >= 1.5);
}
#endif

namespace {
// A threads transport that says whether its ranks may read each other's
// buffers now (`peers_readable`: CUDA ranks on devices without peer access
// may not) and, with Flagged, runs small one_shot calls itself, as
// cuda_peer_transport's flag regions do: here the ranks meet at a barrier
// and each reduces every rank's input in rank order.
struct flag_table {
  explicit flag_table(int n) : in(static_cast<std::size_t>(n)), stamp(static_cast<std::size_t>(n)), bar(n) {}
  std::vector<const std::byte*> in;
  std::vector<ddl::tag> stamp;
  ddl::thread_barrier bar;
};
template <bool Flagged>
struct gated {
  static constexpr bool peer_memory = true;
  static constexpr std::size_t flagged_bytes = 1024;
  ddl::local_transport* inner;
  bool readable = true;
  flag_table* table = nullptr;
  std::size_t flagged_calls = 0;
  using request = ddl::local_transport::request;
  int rank() const { return inner->rank(); }
  int size() const { return inner->size(); }
  bool peers_readable() const { return readable; }
  request isend(int p, ddl::const_bytes b, ddl::tag t) { return inner->isend(p, b, t); }
  request irecv(int p, ddl::mutable_bytes b, ddl::tag t) { return inner->irecv(p, b, t); }
  request irecv_reduce(int p, ddl::mutable_bytes d, ddl::const_bytes l, ddl::reduction r, ddl::tag t) {
    return inner->irecv_reduce(p, d, l, r, t);
  }
  void wait(request& r, ddl::deadline d) { inner->wait(r, d); }
  template <bool F = Flagged, std::enable_if_t<F, int> = 0>
  bool flagged_ready() const {
    return readable;
  }
  template <bool F = Flagged, std::enable_if_t<F, int> = 0>
  void flagged_all_reduce(const std::byte* in, std::byte* out, std::size_t count, ddl::reduction red, ddl::tag stamp,
                          std::chrono::nanoseconds) {
    const auto r = static_cast<std::size_t>(rank());
    table->in[r] = in;
    table->stamp[r] = stamp;
    table->bar.arrive_and_wait();
    for (ddl::tag s : table->stamp)
      if (s != stamp) throw ddl::mismatch_error("gated: stamps differ");
    std::vector<std::byte> sum(count * ddl::size_of(red.type));
    ddl::host::reduce_many(sum.data(), reinterpret_cast<const void* const*>(table->in.data()), size(), count, red);
    ddl::host::finalize(sum.data(), count, red, size());
    table->bar.arrive_and_wait();  // every rank has read every input
    if (count) std::memcpy(out, sum.data(), sum.size());
    ++flagged_calls;
  }
  // As cuda_peer_transport's: two_shot's whole all-reduce, any size (here
  // the same meeting and reduction as above; what is checked is who runs it).
  template <bool F = Flagged, std::enable_if_t<F, int> = 0>
  void flagged_two_shot(const std::byte* in, std::byte* out, std::size_t count, ddl::reduction red, ddl::tag stamp,
                        std::chrono::nanoseconds timeout) {
    const std::size_t before = flagged_calls;
    flagged_all_reduce(in, out, count, red, stamp, timeout);
    flagged_calls = before;
    ++two_shot_calls;
  }
  std::size_t two_shot_calls = 0;
};
static_assert(ddl::has_peer_memory_v<gated<false>> && !ddl::has_flagged_all_reduce_v<gated<false>>);
static_assert(ddl::has_flagged_all_reduce_v<gated<true>>);
static_assert(!ddl::has_flagged_all_reduce_v<ddl::group_view<gated<true>>>);  // the whole group only
static_assert(!ddl::has_flagged_two_shot_v<gated<false>> && ddl::has_flagged_two_shot_v<gated<true>>);
static_assert(!ddl::has_flagged_two_shot_v<ddl::group_view<gated<true>>>);

// Rank `rank`'s float64 inputs for `op`, `count` of them.
std::vector<double> float64_inputs(ddl::op op, int rank, std::size_t count) {
  std::vector<double> g(count);
  for (std::size_t i = 0; i < count; ++i) g[i] = input_value(ddl::dtype::float64, op, rank, i);
  return g;
}
// Logs the first element of `got` (from element `offset` of the result) that
// is not the all-reduce of `op` over `n` ranks' float64 inputs.
void check_reduced(failure_log& log, const std::vector<double>& got, ddl::op op, int n, const std::string& what,
                   std::size_t offset = 0) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!same_bits(got[i], expected_value<double>(op, n, offset + i))) {
      log.add(std::string(ddl::name_of(op)) + " " + what + " wrong at " + std::to_string(i));
      return;
    }
}
}  // namespace

TEST_CASE("peers_readable: the direct strategies refuse ranks that cannot read each other, and auto plans without them") {
  for (bool readable : {true, false}) {
    CAPTURE(readable);
    failure_log log;
    ddl::local_fabric::run(3, [&](ddl::local_transport& lt) {
      gated<false> t{&lt, readable};
      if (ddl::peers_reachable(t) != readable) log.add("peers_reachable does not follow peers_readable");
      if (ddl::peers_reachable(ddl::group_view<gated<false>>(t, 0, 1, 3)) != readable)
        log.add("group_view does not forward peers_readable");
      if (ddl::plan_for::transport(t).peer_memory != readable) log.add("the planner does not follow peers_readable");
      std::vector<double> g = float64_inputs(ddl::op::sum, t.rank(), 1001);
      try {  // refused when the communicator is made
        ddl::communicator<ddl::two_shot, gated<false>> direct(t);
        direct.all_reduce(ddl::host_view(g), ddl::op::sum);
        if (!readable) log.add("two_shot ran on ranks that cannot read each other");
      } catch (const ddl::invalid_argument& e) {
        if (readable) log.add(std::string("two_shot refused readable ranks: ") + e.what());
        else if (std::string(e.what()).find("use ring, multi_ring or auto") == std::string::npos)
          log.add(std::string("the refusal does not say what to use: ") + e.what());
      }
      ddl::communicator<ddl::auto_strategy, gated<false>> any(t);
      std::vector<double> h = float64_inputs(ddl::op::sum, t.rank(), 1001);
      any.all_reduce(ddl::host_view(h), ddl::op::sum);
      check_reduced(log, h, ddl::op::sum, 3, "auto all_reduce");
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("flagged_all_reduce: one_shot hands a transport's own small calls to it, larger ones to messages; the "
          "planner prices them as one round") {
  for (int n : {1, 2, 3, 5}) {
    CAPTURE(n);
    failure_log log;
    flag_table table(n);
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      gated<true> t{&lt, true, &table};
      if (ddl::plan_for::transport(t).one_round_bytes != gated<true>::flagged_bytes)
        log.add("the planner does not price flagged calls as one round");
      ddl::communicator<ddl::one_shot, gated<true>> comm(t);
      for (ddl::op op : ddl::all_ops)
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{128}, std::size_t{129}, std::size_t{4099}}) {
          // (a call of no elements returns before any strategy runs)
          const bool flagged = n > 1 && count > 0 && count * sizeof(double) <= gated<true>::flagged_bytes;
          const std::size_t before = t.flagged_calls;
          std::vector<double> g = float64_inputs(op, t.rank(), count);
          comm.all_reduce(ddl::host_view(g), op);
          if ((t.flagged_calls - before == 1) != flagged)
            log.add(std::string(ddl::name_of(op)) + " count " + std::to_string(count) + ": flagged " +
                    std::to_string(t.flagged_calls - before) + " times");
          check_reduced(log, g, op, n, "count " + std::to_string(count));
        }
      gated<true> off{&lt, false, &table};
      if (ddl::plan_for::transport(off).one_round_bytes != 0)
        log.add("the planner prices flagged calls a transport cannot run");
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("flagged_two_shot: two_shot hands a transport's whole all-reduces to it at every size, reduce-scatter and "
          "all-gather to messages; the planner prices it as one round for all-reduces only") {
  for (int n : {1, 2, 3, 5}) {
    CAPTURE(n);
    failure_log log;
    flag_table table(n);
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      gated<true> t{&lt, true, &table};
      if (!ddl::plan_for::transport(t).two_shot_one_round) log.add("the planner does not price two_shot as one round");
      ddl::communicator<ddl::two_shot, gated<true>> comm(t);
      for (ddl::op op : ddl::all_ops)
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{129}, std::size_t{100003}}) {
          const bool whole = n > 1 && count > 0;
          const std::size_t before = t.two_shot_calls;
          std::vector<double> g = float64_inputs(op, t.rank(), count);
          comm.all_reduce(ddl::host_view(g), op);
          if ((t.two_shot_calls - before == 1) != whole)
            log.add(std::string(ddl::name_of(op)) + " count " + std::to_string(count) + ": run whole " +
                    std::to_string(t.two_shot_calls - before) + " times");
          check_reduced(log, g, op, n, "count " + std::to_string(count));
          // The other collectives go through messages, and right.
          const ddl::block mine = ddl::block_of(count, n, t.rank());
          std::vector<double> part(mine.size), whole_out(count);
          g = float64_inputs(op, t.rank(), count);
          const std::size_t calls = t.two_shot_calls + t.flagged_calls;
          comm.reduce_scatter(ddl::host_view(std::as_const(g)), ddl::host_view(part), op);
          check_reduced(log, part, op, n, "count " + std::to_string(count) + " reduce_scatter", mine.offset);
          for (std::size_t i = 0; i < mine.size; ++i) part[i] = expected_value<double>(op, n, mine.offset + i);
          comm.all_gather(ddl::host_view(std::as_const(part)), ddl::host_view(whole_out));
          if (t.two_shot_calls + t.flagged_calls != calls) log.add("reduce_scatter or all_gather ran as an all-reduce");
          check_reduced(log, whole_out, op, n, "count " + std::to_string(count) + " all_gather");
        }
      gated<true> off{&lt, false, &table};
      if (ddl::plan_for::transport(off).two_shot_one_round)
        log.add("the planner prices whole two_shot calls a transport cannot run");
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("stream-ordered transport: an asynchronous collective is issued at once on the caller's thread") {
  for (int n : {1, 3}) {
    CAPTURE(n);
    failure_log log;
    std::vector<std::size_t> sends(static_cast<std::size_t>(n));
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      whole_slices t{&lt, &sends[static_cast<std::size_t>(lt.rank())]};
      ddl::options o;
      o.async_progress = ddl::progress::thread;  // asked for, and not taken: the transport is stream-ordered
      ddl::communicator<ddl::ring, whole_slices> comm(t, o);
      if (comm.progress_mode() != ddl::progress::deferred) log.add("a progress thread over a stream-ordered transport");
      std::vector<float> a(4099), b(17);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(input_value(ddl::dtype::float32, ddl::op::sum, t.rank(), i));
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(input_value(ddl::dtype::float32, ddl::op::sum, t.rank(), i));
      auto ra = comm.all_reduce_async(ddl::host_view(a), ddl::op::sum);
      if (!ra.test()) log.add("not issued at submission");
      auto rb = comm.all_reduce_async(ddl::host_view(b), ddl::op::sum);
      rb.wait();
      ra.wait();
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!same_bits(a[i], expected_value<float>(ddl::op::sum, n, i))) {
          log.add("async all_reduce wrong at " + std::to_string(i));
          break;
        }
      for (std::size_t i = 0; i < b.size(); ++i)
        if (!same_bits(b[i], expected_value<float>(ddl::op::sum, n, i))) {
          log.add("second async all_reduce wrong at " + std::to_string(i));
          break;
        }
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}
