// The staging pipeline (device buffers over a host transport) on the CPU:
// a "device" whose copies and reductions run late, in stream order, one per
// poll, so every ordering mistake in the pipeline shows as wrong data.
#include <doctest/doctest.h>

#include <deque>
#include <functional>
#include <vector>

#include "matrix.hpp"
#include "support.hpp"
#include <ddl/staged/transport.hpp>

namespace {

template <bool Direct>
class slow_device {
 public:
  static constexpr bool direct = Direct;
  struct event {
    std::uint64_t seq = 0;
  };

  std::byte* allocate_slot(std::size_t n) {
    ++slots_alive;
    auto* p = new std::byte[n];
    std::memset(p, 0x5A, n);
    return p;
  }
  void release_slot(std::byte* p, std::size_t) {
    --slots_alive;
    delete[] p;
  }
  event copy(std::byte* dst, const std::byte* src, std::size_t n) {
    return queue([=] { std::memmove(dst, src, n); });
  }
  event reduce(std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, ddl::reduction r) {
    return queue([=] { ddl::host::reduce(dst, a, b, count, r); });
  }
  event mark() { return queue([] {}); }
  // One queued operation completes per poll, in order: a slow, in-order stream.
  bool ready(event& e) {
    if (done_ < e.seq && !work_.empty()) {
      work_.front()();
      work_.pop_front();
      ++done_;
    }
    return done_ >= e.seq;
  }
  // Local operations join the same stream: everything queued runs first.
  ddl::memory_ops memory(const ddl::location&) {
    ddl::memory_ops m = ddl::host_memory_ops();
    m.ctx = this;
    m.copy = [](void* c, std::byte* d, const std::byte* s, std::size_t n) {
      static_cast<slow_device*>(c)->flush();
      std::memmove(d, s, n);
    };
    m.reduce = [](void* c, std::byte* d, const std::byte* a, const std::byte* b, std::size_t n, ddl::reduction r) {
      static_cast<slow_device*>(c)->flush();
      ddl::host::reduce(d, a, b, n, r);
    };
    m.finalize = [](void* c, std::byte* p, std::size_t n, ddl::reduction r, int ranks) {
      static_cast<slow_device*>(c)->flush();
      ddl::host::finalize(p, n, r, ranks);
    };
    return m;
  }
  void flush() {
    while (!work_.empty()) {
      work_.front()();
      work_.pop_front();
      ++done_;
    }
  }
  int slots_alive = 0;

 private:
  event queue(std::function<void()> f) {
    work_.push_back(std::move(f));
    return {++queued_};
  }
  std::deque<std::function<void()>> work_;
  std::uint64_t queued_ = 0, done_ = 0;
};

template <bool Direct, class Strategy>
void staged_matrix(int n, Strategy s, ddl_test::failure_log& log, ddl::staging_options so) {
  using T = ddl::staged_transport<ddl::local_transport, slow_device<Direct>>;
  const auto counts = ddl_test::matrix_counts(n, 4099);
  std::vector<std::vector<std::byte>> expected(static_cast<std::size_t>(n), std::vector<std::byte>(4099 * 8));
  ddl::options o;
  o.chunk_bytes = 1000;  // several pieces per chunk, pieces not multiples of chunks
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    slow_device<Direct> dev;
    {
      T t(lt, dev, so);
      ddl_test::matrix_rank(t, counts, log, o, s, expected[static_cast<std::size_t>(lt.rank())].data(), false, [] {});
    }
    if (dev.slots_alive != 0) log.add("staging slots leaked on rank " + std::to_string(lt.rank()));
  });
}

}  // namespace

TEST_CASE("staged: the correctness matrix through a slow in-order device, staged and direct") {
  ddl_test::failure_log log;
  ddl::staging_options so;
  so.slot_bytes = 192;  // divisible by every element size
  so.slots = 3;
  for (int n : {1, 2, 3, 5}) {
    staged_matrix<false>(n, ddl::ring{}, log, so);
    staged_matrix<true>(n, ddl::halving_doubling{}, log, so);
  }
  staged_matrix<false>(4, ddl::recursive_doubling{}, log, so);
  staged_matrix<false>(6, ddl::multi_ring<ddl::dynamic_extents>({2, 3}, {1, 0}), log, so);
  CHECK_MESSAGE(log.count() == 0, log.summary());
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
