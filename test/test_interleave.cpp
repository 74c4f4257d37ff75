// Deterministic interleavings of the in-process mailbox: a hook at the
// receiver's slot scan stops it at a chosen point while the sender posts, so
// an order that load finds once in a thousand runs is forced every time.
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

namespace interleave {
inline std::function<void(const char*, int)>& hook() {
  static std::function<void(const char*, int)> h;
  return h;
}
}  // namespace interleave
#define DDL_LOCAL_TEST_HOOK(point, arg) \
  do {                                  \
    if (::interleave::hook()) ::interleave::hook()(point, arg); \
  } while (0)

#include <doctest/doctest.h>

#include <ddl.hpp>

using namespace std::chrono_literals;

namespace {
// Rank 0 (sender) and rank 1 (receiver) of one fabric, with a far
// deadline, after one message from 0 to 1: the channel exists and its
// slot 0 is free again.
struct two_ranks {
  ddl::local_fabric fab{2};
  ddl::local_transport sender = fab.transport(0);
  ddl::local_transport receiver = fab.transport(1);
  ddl::deadline far = std::chrono::steady_clock::now() + 30s;
  two_ranks() {
    int warm = 0, got_warm = -1;
    auto s = sender.isend(1, {reinterpret_cast<const std::byte*>(&warm), sizeof warm}, 9);
    auto r = receiver.irecv(0, {reinterpret_cast<std::byte*>(&got_warm), sizeof got_warm}, 9);
    receiver.wait(r, far);
    sender.wait(s, far);
    REQUIRE(got_warm == 0);
  }
};

// The calling thread (the receiver) stops once at test point `point` with
// argument `arg`: it sets `phase` to 1 and waits there until another thread
// sets it to 2.
void pause_once_at(const char* point, int arg, std::atomic<int>& phase) {
  const auto me = std::this_thread::get_id();
  interleave::hook() = [&phase, point, arg, me](const char* p, int a) {
    if (std::strcmp(p, point) != 0 || a != arg || std::this_thread::get_id() != me) return;
    int expected = 0;
    if (!phase.compare_exchange_strong(expected, 1)) return;  // once
    while (phase.load() != 2) std::this_thread::yield();
  };
}
}  // namespace

TEST_CASE("mailbox: a newer message posted while the receiver scans is not taken before the older one") {
  // The receiver has read the channel's published count and checked slot 0
  // (free); before it looks at slot 1 the sender posts message 1 into slot 0
  // and message 2 into slot 1. The receiver must not take message 2 for its
  // first receive: per (peer, tag), messages match in posting order.
  two_ranks ranks;
  auto &sender = ranks.sender, &receiver = ranks.receiver;
  const auto far = ranks.far;

  std::atomic<int> phase{0};
  pause_once_at("scan_slot", 1, phase);  // the sender posts both meanwhile
  const int first = 111, second = 222;
  std::thread t([&] {
    while (phase.load() != 1) std::this_thread::yield();
    auto a = sender.isend(1, {reinterpret_cast<const std::byte*>(&first), sizeof first}, 7);
    auto b = sender.isend(1, {reinterpret_cast<const std::byte*>(&second), sizeof second}, 7);
    phase.store(2);
    sender.wait(a, far);
    sender.wait(b, far);
  });
  int x = 0, y = 0;
  auto rx = receiver.irecv(0, {reinterpret_cast<std::byte*>(&x), sizeof x}, 7);
  while (phase.load() == 0) (void)receiver.test(rx);  // scans until the hook has fired
  receiver.wait(rx, far);
  auto ry = receiver.irecv(0, {reinterpret_cast<std::byte*>(&y), sizeof y}, 7);
  receiver.wait(ry, far);
  t.join();
  interleave::hook() = nullptr;
  CHECK(phase.load() == 2);  // the interleaving happened
  CHECK(x == first);
  CHECK(y == second);
}

TEST_CASE("mailbox: a send withdrawn and its slot reused while the receiver claims it is not taken for the old one") {
  // The receiver has picked slot 0 (tag 7) and is about to claim it; the
  // sender withdraws that send and posts a tag-8 message into the same
  // slot. The receiver's claim must fail (the slot's generation moved on):
  // taking the new message would hand tag 8's bytes to a tag-7 receive.
  two_ranks ranks;
  auto &sender = ranks.sender, &receiver = ranks.receiver;
  const auto far = ranks.far;

  // 64 bytes: past the eager limit, so each send is a request the sender holds.
  struct msg {
    int v[16];
  };
  const msg a{{111}}, b{{222}}, c{{333}};
  msg x{}, y{};
  auto bytes = [](const msg& m) { return ddl::const_bytes{reinterpret_cast<const std::byte*>(&m), sizeof m}; };
  auto into = [](msg& m) { return ddl::mutable_bytes{reinterpret_cast<std::byte*>(&m), sizeof m}; };
  auto sa = sender.isend(1, bytes(a), 7);  // slot 0
  ddl::local_transport::request sb;

  std::atomic<int> phase{0};
  pause_once_at("before_claim", 0, phase);  // the sender withdraws and reposts meanwhile
  std::thread t([&] {
    while (phase.load() != 1) std::this_thread::yield();
    sa = ddl::local_transport::request{};  // withdrawn: the slot is free again
    sb = sender.isend(1, bytes(b), 8);      // the same slot, a newer generation
    phase.store(2);
  });
  auto rx = receiver.irecv(0, into(x), 7);
  bool early = false;
  while (phase.load() != 2 && !early) early = receiver.test(rx);  // scans until the hook has fired
  t.join();
  interleave::hook() = nullptr;
  REQUIRE(phase.load() == 2);        // the interleaving happened
  CHECK(!early);
  CHECK(!receiver.test(rx));         // tag 8's message is not the tag-7 receive's
  auto sc = sender.isend(1, bytes(c), 7);
  receiver.wait(rx, far);
  CHECK(x.v[0] == 333);
  auto ry = receiver.irecv(0, into(y), 8);
  receiver.wait(ry, far);
  CHECK(y.v[0] == 222);
  sender.wait(sb, far);
  sender.wait(sc, far);
}
