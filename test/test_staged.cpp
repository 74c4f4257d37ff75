// The staging pipeline (device buffers over a host transport) on the CPU,
// through a fake device whose copies and reductions run late, in stream
// order, one per poll (`fake_device.hpp`), so every ordering mistake in the
// pipeline shows as wrong data.
#include <doctest/doctest.h>

#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "fake_device.hpp"
#include "matrix.hpp"
#include "support.hpp"
#include <ddl/staged/transport.hpp>

namespace {

using ddl_test::on_device;
using ddl_test::slow_device;

// The matrix's largest count. Under ThreadSanitizer (staged.tsan) every poll
// of the slow device is instrumented and 4099 elements took two thirds of that
// test's time; there the largest count is 1009 (still 42 pieces of 192 bytes
// through 3 slots per 8-byte buffer, and calls on both sides of bounce_bytes).
#if defined(__SANITIZE_THREAD__)
constexpr std::size_t staged_large = 0;
#else
constexpr std::size_t staged_large = 4099;
#endif

template <bool Direct, class Strategy>
void staged_matrix(int n, Strategy s, ddl_test::failure_log& log, ddl::staging_options so, ddl::location at = {}) {
  using T = ddl::staged_transport<ddl::local_transport, slow_device<Direct>>;
  const auto counts = ddl_test::matrix_counts(n, staged_large);
  std::vector<std::vector<std::byte>> expected(static_cast<std::size_t>(n), std::vector<std::byte>(4099 * 8));
  ddl::options o;
  o.chunk_bytes = 1000;  // several pieces per chunk, pieces not multiples of chunks
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    slow_device<Direct> dev;
    {
      T t(lt, dev, so);
      ddl_test::matrix_rank(t, counts, log, o, s, expected[static_cast<std::size_t>(lt.rank())].data(), false, [] {},
                            nullptr, nullptr, at);
    }
    if (dev.slots_alive != 0) log.add("staging slots leaked on rank " + std::to_string(lt.rank()));
    if (dev.pinned != 0) log.add("the bounce buffer is still pinned on rank " + std::to_string(lt.rank()));
  });
}

}  // namespace

TEST_CASE("staged: the correctness matrix through a slow in-order device, staged and direct") {
  ddl_test::failure_log log;
  ddl::staging_options so;
  so.slot_bytes = 192;  // divisible by every element size
  so.slots = 3;
  so.bounce_bytes = 0;  // every call through the pipeline
  for (int n : {1, 2, 3, 5}) {
    staged_matrix<false>(n, ddl::ring{}, log, so);
    staged_matrix<true>(n, ddl::halving_doubling{}, log, so);
  }
  staged_matrix<false>(4, ddl::recursive_doubling{}, log, so);
  staged_matrix<false>(6, ddl::multi_ring<ddl::dynamic_extents>({2, 3}, {1, 0}), log, so);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("staged: calls up to bounce_bytes run whole on the host transport, larger ones through the pipeline, in one communicator") {
  ddl_test::failure_log log;
  ddl::staging_options so;
  so.slot_bytes = 192;
  so.slots = 3;
  so.bounce_bytes = 1000;  // the matrix's counts reach 1009 elements or more: both kinds of call, interleaved
  for (int n : {1, 2, 3, 5}) {
    staged_matrix<false>(n, ddl::ring{}, log, so, on_device);
    staged_matrix<true>(n, ddl::auto_strategy{}, log, so, on_device);
  }
  staged_matrix<false>(4, ddl::recursive_doubling{}, log, so, on_device);
  so.bounce_bytes = std::size_t{1} << 30;  // every call bounces; host buffers too (used where they lie)
  staged_matrix<false>(3, ddl::halving_doubling{}, log, so, on_device);
  staged_matrix<false>(3, ddl::ring{}, log, so);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("staged: all_to_all of device buffers through the pipeline, whatever bounce_bytes says (ranks' sizes differ)") {
  ddl_test::failure_log log;
  for (std::size_t bounce : {std::size_t(0), std::size_t(1000)})
    for (int n : {1, 2, 3, 5}) {
      ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
        slow_device<false> dev;
        ddl::staging_options so;
        so.slot_bytes = 192;
        so.slots = 3;
        so.bounce_bytes = bounce;
        ddl::staged_transport<ddl::local_transport, slow_device<false>> t(lt, dev, so);
        ddl::communicator<ddl::auto_strategy, decltype(t)> comm(t);
        for (std::size_t per : {std::size_t(1), std::size_t(301)}) {
          const auto parts = ddl_test::all_to_all_parts(n, per, true);  // counts that differ between pairs
          for (bool in_place : {false, true})
            ddl_test::check_all_to_all<float>(comm, lt.rank(), parts, {true, in_place, per == 1}, log,
                                              "n " + std::to_string(n) + " bounce " + std::to_string(bounce),
                                              on_device);
        }
      });
    }
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("staged: gather, scatter and reduce of device buffers, as messages through the pipeline") {
  ddl_test::failure_log log;
  for (int n : {1, 2, 3, 5}) {
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      slow_device<false> dev;
      ddl::staging_options so;
      so.slot_bytes = 192;
      so.slots = 3;
      ddl::staged_transport<ddl::local_transport, slow_device<false>> t(lt, dev, so);
      ddl::communicator<ddl::auto_strategy, decltype(t)> comm(t);
      for (std::size_t per : {std::size_t(1), std::size_t(301)})
        for (bool scatter : {false, true})
          for (bool in_place : {false, true})
            ddl_test::check_rooted<float>(comm, lt.rank(), n, per, n / 2, {scatter, in_place, per == 1}, log,
                                          "n " + std::to_string(n), on_device);
      // A reduce bounces (default bounce_bytes: whole on the host side), unless told not to
      for (std::size_t bounce : {std::size_t(0), so.bounce_bytes}) {
        ddl::staging_options bo = so;
        bo.bounce_bytes = bounce;
        ddl::staged_transport<ddl::local_transport, slow_device<false>> bt(lt, dev, bo);
        ddl::communicator<ddl::auto_strategy, decltype(bt)> bc(bt);
        for (std::size_t count : {std::size_t(1), std::size_t(301)})
          for (bool in_place : {false, true})
            ddl_test::check_reduce<float>(bc, lt.rank(), n, count, n - 1, ddl::op::sum, in_place, count == 1, log,
                                          "reduce n " + std::to_string(n) + " bounce " + std::to_string(bounce),
                                          on_device);
      }
    });
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("staged: a call that bounces copies its device buffer once each way, pinned once, and reuses it; host "
          "buffers take no copy") {
  std::vector<int> copies(3), pins(3), pinned(3);
  std::vector<float> got(3);
  ddl::local_fabric::run(3, [&](ddl::local_transport& lt) {
    slow_device<false> dev;
    const auto r = static_cast<std::size_t>(lt.rank());
    {
      ddl::staging_options so;
      so.slot_bytes = 256;
      so.bounce_bytes = 4096;
      ddl::staged_transport<ddl::local_transport, slow_device<false>> t(lt, dev, so);
      ddl::communicator<ddl::ring, ddl::staged_transport<ddl::local_transport, slow_device<false>>> comm(t);
      std::vector<float> h(1000, 2.0f);  // host memory: run on the host transport where it lies
      comm.all_reduce(ddl::host_view(h.data(), h.size()), ddl::op::sum);
      if (dev.copies != 0 || dev.pins != 0 || h[999] != 6.0f) got[r] = -2;
      std::vector<float> g(1000, 1.0f);  // 4000 bytes: bounces
      auto v = ddl::host_view(g.data(), g.size());
      v.where = on_device;
      for (int k = 0; k < 3; ++k) comm.all_reduce(v, ddl::op::sum);
      copies[r] = dev.copies;  // in and out, three times
      pins[r] = dev.pins;
      got[r] = g[999];
      std::vector<float> big(2000, 1.0f);  // 8000 bytes: the pipeline, 32 pieces a message
      auto w = ddl::host_view(big.data(), big.size());
      w.where = on_device;
      comm.all_reduce(w, ddl::op::sum);
      if (big[1999] != 3.0f) got[r] = -1;
    }
    pinned[r] = dev.pinned;
  });
  for (int r = 0; r < 3; ++r) {
    CHECK(copies[r] == 6);
    CHECK(pins[r] == 1);
    CHECK(pinned[r] == 0);
    CHECK(got[r] == 27.0f);
  }
}

TEST_CASE("staged: asynchronous calls, bounced and piece by piece, in flight together, each equal to its blocking "
          "result") {
  using staged = ddl::staged_transport<ddl::local_transport, slow_device<false>>;
  for (ddl::progress mode : {ddl::progress::thread, ddl::progress::deferred}) {
    CAPTURE(static_cast<int>(mode));
    ddl_test::failure_log log;
    ddl::local_fabric::run(3, [&](ddl::local_transport& lt) {
      slow_device<false> dev;
      ddl::staging_options so;
      so.slot_bytes = 256;
      so.bounce_bytes = 2048;  // 500 floats bounce, 1000 do not
      staged t(lt, dev, so);
      ddl::options o;
      o.async_progress = mode;
      ddl::communicator<ddl::auto_strategy, staged> comm(t, o);
      const int r = lt.rank();
      std::vector<std::vector<float>> bufs;
      for (int k = 0; k < 6; ++k) bufs.emplace_back(k % 2 ? 1000 : 500, static_cast<float>(r + k));
      std::vector<ddl::collective_request> reqs;
      for (auto& b : bufs) {
        auto v = ddl::host_view(b.data(), b.size());
        v.where = on_device;
        reqs.push_back(comm.all_reduce_async(v, ddl::op::sum));
      }
      std::vector<float> g(300, static_cast<float>(r));  // a broadcast behind them: bounced
      auto gv = ddl::host_view(g.data(), g.size());
      gv.where = on_device;
      reqs.push_back(comm.broadcast_async(gv, 2));
      for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) it->wait();  // waited in reverse
      for (int k = 0; k < 6; ++k) {
        const float want = static_cast<float>(3 * k + 3);  // (0+k) + (1+k) + (2+k)
        const auto& b = bufs[static_cast<std::size_t>(k)];
        if (b.front() != want || b.back() != want)
          log.add("call " + std::to_string(k) + " on rank " + std::to_string(r) + ": " + std::to_string(b.back()));
      }
      if (g.front() != 2.0f || g.back() != 2.0f) log.add("broadcast on rank " + std::to_string(r));
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("staged: bounced calls whose input and output lie in different memories (host and device views)") {
  using staged = ddl::staged_transport<ddl::local_transport, slow_device<false>>;
  std::vector<std::string> bad;
  std::mutex m;
  ddl::local_fabric::run(3, [&](ddl::local_transport& lt) {
    slow_device<false> dev;
    ddl::staging_options so;
    so.bounce_bytes = 1 << 20;
    staged t(lt, dev, so);
    ddl::communicator<ddl::ring, staged> comm(t);
    const int r = lt.rank();
    auto at = [](ddl::buffer_view v, bool device) {
      if (device) v.where = on_device;
      return v;
    };
    auto fail = [&](const std::string& what) {
      std::lock_guard<std::mutex> g(m);
      bad.push_back(what + " on rank " + std::to_string(r));
    };
    const std::size_t count = 301;
    const ddl::block mine = ddl::block_of(count, 3, r);
    for (bool in_dev : {false, true}) {
      const std::string how = in_dev ? "device in, host out" : "host in, device out";
      std::vector<float> in(count), out(count, -1.0f);
      for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r * 1000 + static_cast<int>(i));
      const std::vector<float> kept = in;
      comm.all_reduce(at(ddl::host_view(in.data(), count), in_dev), at(ddl::host_view(out.data(), count), !in_dev),
                      ddl::op::sum);
      for (std::size_t i = 0; i < count; ++i)
        if (out[i] != static_cast<float>(3000 + 3 * static_cast<int>(i))) {
          fail("all_reduce " + how);
          break;
        }
      if (in != kept) fail("all_reduce " + how + ": input modified");
      std::vector<float> block(mine.size, -1.0f);
      comm.reduce_scatter(at(ddl::host_view(in.data(), count), in_dev), at(ddl::host_view(block.data(), mine.size), !in_dev),
                          ddl::op::sum);
      for (std::size_t k = 0; k < mine.size; ++k)
        if (block[k] != static_cast<float>(3000 + 3 * static_cast<int>(mine.offset + k))) {
          fail("reduce_scatter " + how);
          break;
        }
      if (in != kept) fail("reduce_scatter " + how + ": input modified");
      std::vector<float> own(mine.size), all(count, -1.0f);
      for (std::size_t k = 0; k < mine.size; ++k) own[k] = static_cast<float>(mine.offset + k);
      comm.all_gather(at(ddl::host_view(own.data(), mine.size), in_dev), at(ddl::host_view(all.data(), count), !in_dev));
      for (std::size_t i = 0; i < count; ++i)
        if (all[i] != static_cast<float>(i)) {
          fail("all_gather " + how);
          break;
        }
    }
  });
  const std::string first = bad.empty() ? std::string() : bad.front();
  CHECK_MESSAGE(bad.empty(), first);
}

TEST_CASE("staged: a broadcast that bounces is planned with the host transport's costs, and may meet through its "
          "stages") {
  // local_transport has stages and waits on them (the direct broadcast);
  // the staged transport does not: a call of up to bounce_bytes runs on
  // the host, larger ones piece by piece through the device.
  using staged = ddl::staged_transport<ddl::local_transport, slow_device<false>>;
  const std::size_t bounce = 64 << 10;
  std::vector<std::string> bad;
  std::mutex m;
  auto fail = [&](std::string s) {
    std::lock_guard<std::mutex> lock(m);
    bad.push_back(std::move(s));
  };
  ddl::local_fabric::run(3, [&](ddl::local_transport& lt) {
    slow_device<false> dev;
    ddl::staging_options so;
    so.bounce_bytes = bounce;
    staged t(lt, dev, so);
    ddl::communicator<ddl::ring, staged> comm(t);
    const ddl::topology topo = comm.link_topology();
    bool direct = false;
    for (std::size_t bytes : {std::size_t{8}, std::size_t{4096}, bounce, bounce + 4, std::size_t{1} << 22}) {
      const bool host = bytes <= bounce;
      const ddl::broadcast_plan want =
          host ? ddl::broadcast_choice(bytes, topo, 4, ddl::broadcast_algorithm::automatic,
                                       ddl::broadcast_costs_of(t.host()))
               : ddl::broadcast_choice(bytes, topo, 4, ddl::broadcast_algorithm::automatic, ddl::broadcast_costs_of(t));
      const ddl::broadcast_plan got = comm.broadcast_plan_for(bytes);
      if (got.describe() != want.describe())
        fail(std::to_string(bytes) + " B: " + got.describe() + ", the call runs " + want.describe());
      if (!host && got.algo == ddl::broadcast_algorithm::direct) fail(std::to_string(bytes) + " B: direct, not bounced");
      direct = direct || got.algo == ddl::broadcast_algorithm::direct;
    }
    if (!direct) fail("no bounced size meets through the stages");
    // Forced: bounced calls meet through the host's stages, larger ones are refused.
    ddl::options o;
    o.broadcast = ddl::broadcast_algorithm::direct;
    ddl::communicator<ddl::ring, staged> forced(t, o);
    for (std::size_t count : {std::size_t{1}, std::size_t{1000}, bounce / 4}) {
      std::vector<float> g(count, static_cast<float>(lt.rank() + 1));
      auto v = ddl::host_view(g.data(), g.size());
      v.where = on_device;
      forced.broadcast(v, 2);
      if (g.front() != 3.0f || g.back() != 3.0f) fail("forced direct, " + std::to_string(count) + " floats: wrong");
    }
    std::vector<float> g(bounce / 4 + 1, 1.0f);
    auto v = ddl::host_view(g.data(), g.size());
    v.where = on_device;
    try {
      forced.broadcast(v, 0);
      fail("forced direct past bounce_bytes: returned");
    } catch (const ddl::invalid_argument& e) {
      if (std::string(e.what()).find("'direct'") == std::string::npos) fail(e.what());
    }
  });
  for (const auto& b : bad) CHECK_MESSAGE(false, b);
  CHECK(bad.empty());
}

TEST_CASE("staged: ranks that disagree on bounce_bytes get mismatch_error on every rank, never a wrong result") {
  std::vector<std::string> errors(3);
  ddl::local_fabric::run(3, [&](ddl::local_transport& lt) {
    slow_device<false> dev;
    ddl::staging_options so;
    so.bounce_bytes = lt.rank() == 1 ? 0 : 4096;  // rank 1 stages, the others bounce
    ddl::staged_transport<ddl::local_transport, slow_device<false>> t(lt, dev, so);
    ddl::options o;
    o.timeout = std::chrono::seconds(20);
    ddl::communicator<ddl::ring, ddl::staged_transport<ddl::local_transport, slow_device<false>>> comm(t, o);
    std::vector<float> g(100, 1.0f);
    auto v = ddl::host_view(g.data(), g.size());
    v.where = on_device;
    try {
      comm.all_reduce(v, ddl::op::sum);
      errors[static_cast<std::size_t>(lt.rank())] = "returned";
    } catch (const ddl::mismatch_error& e) {
      errors[static_cast<std::size_t>(lt.rank())] = e.what();
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(lt.rank())] = std::string("other error: ") + e.what();
    }
  });
  for (const auto& e : errors) {
    INFO(e);
    CHECK(e.find("disagree on whether the call runs through host memory") != std::string::npos);
  }
}

TEST_CASE("staged: DDL_STAGING_BOUNCE sets bounce_bytes") {
  setenv("DDL_STAGING_BOUNCE", "64K", 1);
  CHECK(ddl::staging_options::from_env().bounce_bytes == 65536);
  setenv("DDL_STAGING_BOUNCE", "0", 1);
  CHECK(ddl::staging_options::from_env().bounce_bytes == 0);
  setenv("DDL_STAGING_BOUNCE", "lots", 1);
  CHECK_THROWS_AS(ddl::staging_options::from_env(), ddl::invalid_argument);
  unsetenv("DDL_STAGING_BOUNCE");
  CHECK(ddl::staging_options::from_env().bounce_bytes == ddl::staging_options{}.bounce_bytes);
}

TEST_CASE("staged: pieces of one message are in flight together (the copy overlaps the transfer)") {
  ddl_test::thread_barrier bar(2);
  std::vector<std::size_t> in_flight(2);
  std::vector<float> got;
  ddl::local_fabric::run(2, [&](ddl::local_transport& lt) {
    slow_device<false> dev;
    ddl::staging_options so;
    so.slot_bytes = 256;
    so.slots = 4;
    ddl::staged_transport<ddl::local_transport, slow_device<false>> t(lt, dev, so);
    std::vector<float> a(1000, 2.0f), b(1000, 0.0f);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto bytes = [](std::vector<float>& v) { return ddl::mutable_bytes{reinterpret_cast<std::byte*>(v.data()), v.size() * 4}; };
    if (lt.rank() == 0) {
      auto s = t.isend(1, bytes(a), 9);  // 16 pieces, 4 slots: the first 4 start at once
      in_flight[0] = t.pieces_in_flight();
      bar.arrive_and_wait();
      t.wait(s, until);
      in_flight[1] = t.pieces_in_flight();
    } else {
      bar.arrive_and_wait();
      auto r = t.irecv_reduce(0, bytes(b), bytes(a), ddl::reduction{ddl::dtype::float32, ddl::op::sum}, 9);
      t.wait(r, until);
      got = b;
    }
  });
  CHECK(in_flight[0] == 4);
  CHECK(in_flight[1] == 0);
  REQUIRE(got.size() == 1000);
  for (float v : got) REQUIRE(v == 4.0f);
}

TEST_CASE("staged: a peer that never sends times out, and slots come back") {
  bool threw = false;
  int alive = -1;
  ddl::local_fabric::run(2, [&](ddl::local_transport& lt) {
    slow_device<false> dev;
    {
      ddl::staged_transport<ddl::local_transport, slow_device<false>> t(lt, dev);
      std::vector<std::byte> buf(64);
      if (lt.rank() == 0) {
        auto r = t.irecv(1, ddl::mutable_bytes{buf.data(), buf.size()}, 3);
        try {
          t.wait(r, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
        } catch (const ddl::timeout_error& e) {
          threw = e.peer() == 1;
        }
      }
    }
    if (lt.rank() == 0) alive = dev.slots_alive;
  });
  CHECK(threw);
  CHECK(alive == 0);
  slow_device<false> dev;
  ddl::local_fabric::run(1, [&](ddl::local_transport& lt) {
    ddl::staging_options bad;
    bad.slots = 0;
    CHECK_THROWS_AS((ddl::staged_transport<ddl::local_transport, slow_device<false>>(lt, dev, bad)), ddl::invalid_argument);
  });
}
