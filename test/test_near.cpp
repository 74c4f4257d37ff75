// Near ranks (`staged/near.hpp`): device memory shared between the ranks of
// one host, messages device to device, through a fake device that shares its
// memory (`fake_device.hpp`'s `sharing_device`; its copies and reductions run
// late, in stream order, so an ordering mistake shows as wrong data). What a
// GPU adds (CUDA IPC handles, their cache, the runtime's refusals) is checked
// on a lent GPU (bench/tools/gpu_checks.sh ipc).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "fake_device.hpp"
#include "matrix.hpp"
#include "support.hpp"
#include <ddl/staged/transport.hpp>

namespace {

using ddl_test::on_device;
using ddl_test::sharing_device;
using near_transport = ddl::staged_transport<ddl::local_transport, sharing_device>;

ddl::staging_options near_options() {
  ddl::staging_options so;
  so.slot_bytes = 192;
  so.slots = 3;
  so.bounce_bytes = 0;  // every call through the transport's messages
  so.near_bounce_bytes = 0;
  return so;
}

// Where a rank's buffers lie: the device's shareable allocations; host
// memory that says it is on the device (rank 0 only: its peers' reductions
// read its small messages from a staging slot, its larger ones from shared
// scratch, and it reduces on the host); device memory the device will not
// share (every rank: a pool's, its messages through shared scratch).
enum class buffers { shareable, rank0_host, pool };

// The correctness matrix with every pair near. `share_all`: every message's
// bytes shared (the strategies' host tables too); else host memory goes
// inline in the notes up to a note's bytes, and through shared scratch past.
template <class Strategy>
void near_matrix(int n, Strategy s, ddl_test::failure_log& log, bool share_all,
                 buffers kind = buffers::shareable) {
  const auto counts = ddl_test::matrix_counts(n, 1031);
  const std::size_t bytes = ddl_test::matrix_bytes(counts);
  std::vector<std::vector<std::byte>> expected(static_cast<std::size_t>(n), std::vector<std::byte>(bytes));
  ddl::options o;
  o.chunk_bytes = 1000;
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    sharing_device dev;
    dev.share_all = share_all;
    std::byte* in = kind == buffers::pool ? dev.allocate_pool(bytes) : dev.allocate(bytes);
    std::byte* out = kind == buffers::pool ? dev.allocate_pool(bytes) : dev.allocate(bytes);
    {
      near_transport t(lt, dev, near_options());
      for (int q = 0; q < n; ++q)
        if (q != lt.rank() && !t.near(q)) log.add("rank " + std::to_string(q) + " not near on " + std::to_string(lt.rank()));
      const bool own = kind == buffers::rank0_host && lt.rank() == 0;
      ddl_test::matrix_rank(t, counts, log, o, s, expected[static_cast<std::size_t>(lt.rank())].data(), false, [] {},
                            own ? nullptr : in, own ? nullptr : out, on_device);
    }
    if (dev.slots_alive != 0) log.add("staging slots leaked on rank " + std::to_string(lt.rank()));
  });
}

}  // namespace

TEST_CASE("near: the correctness matrix device to device, buffers shared and host tables inline") {
  ddl_test::failure_log log;
  for (int n : {1, 2, 3, 5}) near_matrix(n, ddl::ring{}, log, false);
  near_matrix(3, ddl::halving_doubling{}, log, false);
  near_matrix(4, ddl::recursive_doubling{}, log, false);
  near_matrix(6, ddl::multi_ring<ddl::dynamic_extents>({2, 3}, {1, 0}), log, false);
  near_matrix(6, ddl::multi_ring<ddl::dynamic_extents>({3, 2}).direct_first(), log, false);
  near_matrix(3, ddl::ring{}, log, false, buffers::rank0_host);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("near: the correctness matrix on device memory the device will not share (a pool's), through shared scratch") {
  ddl_test::failure_log log;
  for (int n : {2, 3, 5}) near_matrix(n, ddl::ring{}, log, false, buffers::pool);
  near_matrix(4, ddl::recursive_doubling{}, log, false, buffers::pool);
  near_matrix(6, ddl::multi_ring<ddl::dynamic_extents>({2, 3}, {1, 0}), log, false, buffers::pool);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("near: a pool's buffer goes through scratch blocks kept and reused; a small message inline, no scratch") {
  constexpr int n = 3;
  std::vector<int> first(n), later(n), small(n), shares_first(n), shares_later(n);
  std::vector<float> got(n), got_small(n);
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    const auto r = static_cast<std::size_t>(lt.rank());
    sharing_device dev;
    near_transport t(lt, dev, near_options());
    ddl::communicator<ddl::ring, near_transport> comm(t);
    auto* a = reinterpret_cast<float*>(dev.allocate_pool(30000 * sizeof(float)));
    auto view = [](float* p, std::size_t count) {
      auto v = ddl::host_view(p, count);
      v.where = on_device;
      return v;
    };
    for (int i = 0; i < 30000; ++i) a[i] = 1.0f;
    comm.all_reduce(view(a, 30000), ddl::op::sum);
    first[r] = dev.scratch_allocs;
    shares_first[r] = dev.shares;
    for (int k = 0; k < 4; ++k) comm.all_reduce(view(a, 30000), ddl::op::sum);
    later[r] = dev.scratch_allocs;
    shares_later[r] = dev.shares;
    got[r] = a[29999];
    auto* b = reinterpret_cast<float*>(dev.allocate_pool(6 * sizeof(float)));  // 8 bytes a piece: inline
    for (int i = 0; i < 6; ++i) b[i] = static_cast<float>(lt.rank());
    comm.all_reduce(view(b, 6), ddl::op::sum);
    small[r] = dev.scratch_allocs;
    got_small[r] = b[5];
  });
  for (int r = 0; r < n; ++r) {
    CHECK(got[r] == 243.0f);  // 3^5
    CHECK(got_small[r] == 3.0f);
    CHECK(first[r] >= 1);
    CHECK(later[r] == first[r]);                // kept and reused: nothing allocated once warm
    CHECK(shares_later[r] == shares_first[r]);  // the same blocks, shared once each
    CHECK(small[r] == later[r]);
  }
}

TEST_CASE("near: one_shot and two_shot read the peers' device memory where it lies: the matrix") {
  ddl_test::failure_log log;
  for (int n : {1, 2, 3, 5}) near_matrix(n, ddl::two_shot{}, log, false);
  for (int n : {2, 3}) near_matrix(n, ddl::two_shot{}, log, false, buffers::pool);  // through scratch
  near_matrix(3, ddl::two_shot{}, log, false, buffers::rank0_host);
  for (int n : {2, 3, 5}) near_matrix(n, ddl::one_shot{}, log, false);
  near_matrix(3, ddl::one_shot{}, log, false, buffers::pool);
  near_matrix(2, ddl::one_shot{}, log, false, buffers::rank0_host);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("near: one_shot and two_shot need every pair near, and device buffers") {
  constexpr int n = 4;
  std::vector<std::string> refused(n), one_refused(n), host(n), one_host(n);
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    const auto r = static_cast<std::size_t>(lt.rank());
    sharing_device dev;
    if (lt.rank() == 1) dev.refuse = {0};
    near_transport t(lt, dev, near_options());
    using ddl_test::error_of;
    refused[r] = error_of<ddl::invalid_argument>([&] { ddl::communicator<ddl::two_shot, near_transport> c(t); });
    one_refused[r] = error_of<ddl::invalid_argument>([&] { ddl::communicator<ddl::one_shot, near_transport> c(t); });
  });
  ddl::local_fabric::run(2, [&](ddl::local_transport& lt) {
    const auto r = static_cast<std::size_t>(lt.rank());
    sharing_device dev;
    near_transport t(lt, dev, near_options());
    ddl::communicator<ddl::two_shot, near_transport> two(t);
    ddl::communicator<ddl::one_shot, near_transport> one(t);
    std::vector<float> v(100, 1.0f);
    using ddl_test::error_of;
    host[r] = error_of<ddl::invalid_argument>([&] { two.all_reduce(ddl::host_view(v), ddl::op::sum); });
    one_host[r] = error_of<ddl::invalid_argument>([&] { one.all_gather(ddl::host_view(v.data(), 50), ddl::host_view(v)); });
  });
  for (const auto& w : refused) CHECK(w.find("use ring, multi_ring or auto") != std::string::npos);
  for (const auto& w : one_refused) CHECK(w.find("use ring, multi_ring or auto") != std::string::npos);
  for (int r = 0; r < 2; ++r) {
    CHECK(host[static_cast<std::size_t>(r)].find("device buffers only") != std::string::npos);
    CHECK(one_host[static_cast<std::size_t>(r)].find("device buffers only") != std::string::npos);
  }
}

TEST_CASE("near: the correctness matrix with every message's bytes shared") {
  ddl_test::failure_log log;
  for (int n : {2, 3}) near_matrix(n, ddl::ring{}, log, true);
  near_matrix(5, ddl::halving_doubling{}, log, true);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("near: a buffer is shared once and opened once per peer; a new allocation is opened anew") {
  constexpr int n = 3;
  std::vector<int> shares(n), opens_once(n), opens_again(n), opens_new(n);
  std::vector<float> got(n), got_new(n);
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    const auto r = static_cast<std::size_t>(lt.rank());
    sharing_device dev;
    near_transport t(lt, dev, near_options());
    ddl::communicator<ddl::ring, near_transport> comm(t);
    const int probe_opens = dev.opens;  // the peers' probes
    auto* a = reinterpret_cast<float*>(dev.allocate(3000 * sizeof(float)));
    auto view = [](float* p) {
      auto v = ddl::host_view(p, 3000);
      v.where = on_device;
      return v;
    };
    for (int i = 0; i < 3000; ++i) a[i] = 1.0f;
    comm.all_reduce(view(a), ddl::op::sum);
    opens_once[r] = dev.opens - probe_opens;
    for (int k = 0; k < 4; ++k) comm.all_reduce(view(a), ddl::op::sum);
    opens_again[r] = dev.opens - probe_opens;
    shares[r] = dev.shares;
    got[r] = a[2999];
    dev.release(reinterpret_cast<std::byte*>(a));
    auto* b = reinterpret_cast<float*>(dev.allocate(3000 * sizeof(float)));
    for (int i = 0; i < 3000; ++i) b[i] = 2.0f;
    comm.all_reduce(view(b), ddl::op::sum);
    opens_new[r] = dev.opens - probe_opens;
    got_new[r] = b[0];
  });
  for (int r = 0; r < n; ++r) {
    CHECK(got[r] == 243.0f);  // 3^5
    CHECK(got_new[r] == 6.0f);
    CHECK(opens_once[r] >= 1);
    CHECK(opens_once[r] <= n - 1);     // the ring: the left neighbour's buffer, once
    CHECK(opens_again[r] == opens_once[r]);  // cached: four more calls open nothing
    CHECK(shares[r] == 2);                   // the probe and the buffer
    CHECK(opens_new[r] == 2 * opens_once[r]);  // the new allocation's id: opened again
  }
}

TEST_CASE("near: a pair whose devices cannot map each other goes through host memory; the rest stay near") {
  constexpr int n = 4;
  std::vector<std::string> nears(n);
  std::vector<float> got(n);
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    sharing_device dev;
    if (lt.rank() == 1) dev.refuse = {0};  // rank 1 cannot open rank 0's memory
    std::byte* mem = dev.allocate(5000 * sizeof(float));
    auto* a = reinterpret_cast<float*>(mem);
    near_transport t(lt, dev, near_options());
    ddl::communicator<ddl::recursive_doubling, near_transport> comm(t);
    for (int q = 0; q < n; ++q) nears[static_cast<std::size_t>(lt.rank())] += t.near(q) ? '1' : '0';
    for (int i = 0; i < 5000; ++i) a[i] = static_cast<float>(lt.rank() + i % 7);
    auto v = ddl::host_view(a, 5000);
    v.where = on_device;
    comm.all_reduce(v, ddl::op::sum);
    got[static_cast<std::size_t>(lt.rank())] = a[4999] - 4.0f * static_cast<float>(4999 % 7);
  });
  CHECK(nears[0] == "0011");  // both ranks of the pair agree that it is not near
  CHECK(nears[1] == "0011");
  CHECK(nears[2] == "1101");
  CHECK(nears[3] == "1110");
  for (int r = 0; r < n; ++r) CHECK(got[r] == 6.0f);  // 0 + 1 + 2 + 3
}

TEST_CASE("near: near ranks in blocks (hosts) are a level of their own for auto, which runs exact over them") {
  constexpr int n = 4;
  std::vector<std::string> shapes(n);
  ddl_test::failure_log log;
  const auto counts = ddl_test::matrix_counts(n, 1031);
  const std::size_t bytes = ddl_test::matrix_bytes(counts);
  std::vector<std::vector<std::byte>> expected(n, std::vector<std::byte>(bytes));
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    sharing_device dev;
    const int r = lt.rank();
    dev.refuse = r < 2 ? std::vector<int>{2, 3} : std::vector<int>{0, 1};  // two "hosts" of two
    std::byte* in = dev.allocate(bytes);
    std::byte* out = dev.allocate(bytes);
    near_transport t(lt, dev, near_options());
    const ddl::topology topo = t.topology();
    std::string shape;
    for (std::size_t l = 0; l < topo.count(); ++l) shape += std::to_string(topo[l].extent) + " ";
    if (topo.count() == 2 && topo[0].bandwidth > topo[1].bandwidth) shape += "near-first";
    shapes[static_cast<std::size_t>(r)] = shape;
    ddl::options o;
    o.chunk_bytes = 1000;
    ddl_test::matrix_rank(t, counts, log, o, ddl::auto_strategy{}, expected[static_cast<std::size_t>(r)].data(),
                          false, [] {}, in, out, on_device);
  });
  for (const auto& s : shapes) CHECK(s == "2 2 near-first");
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("near: a direct-first multi-ring reads the device memory of its first dimension's near ranks, rings "
          "across") {
  // Two "hosts" of two near ranks each: the first dimension in order (pairs
  // of consecutive ranks) reads its members' buffers where they lie; the
  // second crosses the hosts as a ring of messages through host memory.
  constexpr int n = 4;
  ddl_test::failure_log log;
  std::vector<std::string> across(n);
  const auto counts = ddl_test::matrix_counts(n, 1031);
  const std::size_t bytes = ddl_test::matrix_bytes(counts);
  for (const buffers kind : {buffers::shareable, buffers::pool}) {
    std::vector<std::vector<std::byte>> expected(n, std::vector<std::byte>(bytes));
    ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
      sharing_device dev;
      const int r = lt.rank();
      dev.refuse = r < 2 ? std::vector<int>{2, 3} : std::vector<int>{0, 1};
      std::byte* in = kind == buffers::pool ? dev.allocate_pool(bytes) : dev.allocate(bytes);
      std::byte* out = kind == buffers::pool ? dev.allocate_pool(bytes) : dev.allocate(bytes);
      near_transport t(lt, dev, near_options());
      ddl::options o;
      o.chunk_bytes = 1000;
      auto pairs_first = ddl::multi_ring<ddl::dynamic_extents>({2, 2});
      pairs_first.direct_first();
      ddl_test::matrix_rank(t, counts, log, o, pairs_first, expected[static_cast<std::size_t>(r)].data(), false, [] {},
                            in, out, on_device);
      if (kind == buffers::pool) return;
      // First in order the dimension across the hosts: not near, refused on every rank.
      auto hosts_first = ddl::multi_ring<ddl::dynamic_extents>({2, 2}, {1, 0});
      hosts_first.direct_first();
      ddl::communicator<ddl::multi_ring<ddl::dynamic_extents>, near_transport> comm(t, hosts_first, o);
      auto v = ddl::host_view(reinterpret_cast<float*>(in), 100);
      v.where = on_device;
      across[static_cast<std::size_t>(r)] =
          ddl_test::error_of<ddl::invalid_argument>([&] { comm.all_reduce(v, ddl::op::sum); });
    });
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());
  for (const auto& w : across) CHECK(w.find("use the plain multi_ring") != std::string::npos);
  // Rank 3 calls with one element fewer: every rank's error names ranks 2 and 3.
  // The ranks are threads: one that has given up must keep its memory until
  // the others are done (a peer may still be reading it when it hears).
  std::vector<std::string> mismatch(n);
  ddl::thread_barrier done(n);
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    sharing_device dev;
    const int r = lt.rank();
    dev.refuse = r < 2 ? std::vector<int>{2, 3} : std::vector<int>{0, 1};
    std::byte* mem = dev.allocate(4000);
    near_transport t(lt, dev, near_options());
    ddl::options o;
    o.timeout = std::chrono::seconds(5);
    auto pairs_first = ddl::multi_ring<ddl::dynamic_extents>({2, 2});
    pairs_first.direct_first();
    ddl::communicator<ddl::multi_ring<ddl::dynamic_extents>, near_transport> comm(t, pairs_first, o);
    auto v = ddl::host_view(reinterpret_cast<float*>(mem), r == 3 ? 999 : 1000);
    v.where = on_device;
    mismatch[static_cast<std::size_t>(r)] = ddl_test::error_of<>([&] { comm.all_reduce(v, ddl::op::sum); });
    done.arrive_and_wait();
  });
  for (int r = 0; r < n; ++r) {  // the pair itself, and the other pair through the broken group
    INFO(mismatch[static_cast<std::size_t>(r)]);
    CHECK(mismatch[static_cast<std::size_t>(r)].find("rank 2") != std::string::npos);
    CHECK(mismatch[static_cast<std::size_t>(r)].find("rank 3") != std::string::npos);
  }
  // Only the second pair is not near: every rank refuses the call at once,
  // the first pair too (it would reduce, then wait at the ring across for
  // ranks that refused).
  std::vector<std::string> half(n);
  std::vector<double> took(n);
  ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
    sharing_device dev;
    const int r = lt.rank();
    dev.refuse = r < 2 ? std::vector<int>{2, 3} : std::vector<int>{0, 1, 5 - r};
    std::byte* mem = dev.allocate(4000);
    near_transport t(lt, dev, near_options());
    ddl::options o;
    o.timeout = std::chrono::seconds(20);
    auto pairs_first = ddl::multi_ring<ddl::dynamic_extents>({2, 2});
    pairs_first.direct_first();
    ddl::communicator<ddl::multi_ring<ddl::dynamic_extents>, near_transport> comm(t, pairs_first, o);
    auto v = ddl::host_view(reinterpret_cast<float*>(mem), 1000);
    v.where = on_device;
    const auto start = std::chrono::steady_clock::now();
    half[static_cast<std::size_t>(r)] = ddl_test::error_of<>([&] { comm.all_reduce(v, ddl::op::sum); });
    took[static_cast<std::size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  for (int r = 0; r < n; ++r) {
    INFO(half[static_cast<std::size_t>(r)]);
    CHECK(half[static_cast<std::size_t>(r)].find("ranks 2 to 3") != std::string::npos);
    CHECK(half[static_cast<std::size_t>(r)].find("use the plain multi_ring") != std::string::npos);
    CHECK(took[static_cast<std::size_t>(r)] < 10.0);  // refused before any message, not at the 20 s deadline
  }
}

TEST_CASE("near: DDL_CUDA_IPC=0 keeps every message in host memory; near calls bounce only up to near_bounce_bytes") {
  ::setenv("DDL_CUDA_IPC", "0", 1);
  ::setenv("DDL_STAGING_NEAR_BOUNCE", "4K", 1);
  const ddl::staging_options off = ddl::staging_options::from_env();
  ::unsetenv("DDL_CUDA_IPC");
  ::unsetenv("DDL_STAGING_NEAR_BOUNCE");
  CHECK_FALSE(off.near);
  CHECK(off.near_bounce_bytes == 4096);
  std::vector<int> some(2, -1), bounce_small(2), bounce_big(2);
  ddl::local_fabric::run(2, [&](ddl::local_transport& lt) {
    sharing_device dev;
    const auto r = static_cast<std::size_t>(lt.rank());
    {
      near_transport t(lt, dev, off);
      some[r] = t.some_near() || t.near(1 - lt.rank());
    }
    ddl::staging_options on = off;
    on.near = true;
    on.bounce_bytes = 1 << 20;
    near_transport t(lt, dev, on);
    bounce_small[r] = t.bounces(4096);
    bounce_big[r] = t.bounces(4097);
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(some[r] == 0);
    CHECK(bounce_small[r] == 1);
    CHECK(bounce_big[r] == 0);  // below bounce_bytes, above near_bounce_bytes
  }
}

namespace {
// Two ranks call `Strategy`'s all-reduce with `count` and `count - 1`
// elements: what each one's call ended with.
template <class Strategy>
std::vector<std::string> disagree_on_count(unsigned count) {
  std::vector<std::string> what(2);
  ddl::local_fabric::run(2, [&](ddl::local_transport& lt) {
    sharing_device dev;
    std::byte* mem = dev.allocate(count * sizeof(float));
    near_transport t(lt, dev, near_options());
    ddl::options o;
    o.timeout = std::chrono::seconds(5);
    ddl::communicator<Strategy, near_transport> comm(t, Strategy{}, o);
    auto v = ddl::host_view(reinterpret_cast<float*>(mem), lt.rank() == 0 ? count : count - 1);
    v.where = on_device;
    try {
      comm.all_reduce(v, ddl::op::sum);
    } catch (const ddl::error& e) {
      what[static_cast<std::size_t>(lt.rank())] = e.what();
    }
  });
  return what;
}
}  // namespace

TEST_CASE("near: ranks that disagree on the count end with an error naming both, not a wrong result") {
  for (const auto& what : {disagree_on_count<ddl::ring>(1000), disagree_on_count<ddl::two_shot>(10000),
                          disagree_on_count<ddl::one_shot>(10000)})
    for (const auto& w : what) {
      INFO(w);
      CHECK(w.find("rank 0") != std::string::npos);
      CHECK(w.find("rank 1") != std::string::npos);
    }
}

TEST_CASE("near: a buffer freed while registered is an invalid_argument on the next call, not a read of freed memory") {
  std::vector<std::string> what(2);
  ddl::local_fabric::run(2, [&](ddl::local_transport& lt) {
    sharing_device dev;
    near_transport t(lt, dev, near_options());
    ddl::options o;
    o.timeout = std::chrono::seconds(5);
    ddl::communicator<ddl::ring, near_transport> comm(t, ddl::ring{}, o);
    std::byte* mem = dev.allocate(4000);
    auto v = ddl::host_view(reinterpret_cast<float*>(mem), 1000);
    v.where = on_device;
    comm.all_reduce(v, ddl::op::sum);
    if (lt.rank() == 0) dev.release(mem);  // freed; its address is used again below
    try {
      comm.all_reduce(v, ddl::op::sum);
    } catch (const ddl::invalid_argument& e) {
      what[static_cast<std::size_t>(lt.rank())] = std::string("invalid_argument: ") + e.what();
    } catch (const ddl::error& e) {
      what[static_cast<std::size_t>(lt.rank())] = e.what();
    }
  });
  INFO(what[0]);
  INFO(what[1]);
  CHECK(what[0].find("invalid_argument: ") == 0);
  CHECK(what[0].find("freed") != std::string::npos);
  CHECK_FALSE(what[1].empty());  // the peer's call ends too (the group given up), no hang
}

TEST_CASE("near: a peer that never sends times out naming it") {
  bool threw = false;
  ddl::local_fabric::run(2, [&](ddl::local_transport& lt) {
    sharing_device dev;
    near_transport t(lt, dev, near_options());
    std::byte* buf = dev.allocate(64);
    if (lt.rank() == 0) {
      auto r = t.irecv(1, ddl::mutable_bytes{buf, 64}, 3);
      try {
        t.wait(r, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
      } catch (const ddl::timeout_error& e) {
        threw = e.peer() == 1;
      }
    }
  });
  CHECK(threw);
}
