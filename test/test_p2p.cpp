// Point-to-point transfers over in-process ranks: send and recv, recv_any,
// sendrecv; parked beside later calls, matched in issue order, bad
// arguments and unmatched receives.
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
