// Asynchronous collectives and the barrier over in-process ranks, in both
// progress modes: several in flight, every dtype and op, deadlines, errors,
// completion callbacks, one driver of the transport at a time. Every result
// is compared with an independent reference (the exact expected value) and
// with the blocking path on the same inputs.
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
