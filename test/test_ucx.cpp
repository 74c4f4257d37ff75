// The UCX transport over real processes started by ddl-run (no MPI): the
// collective matrix, every collective beside it, mismatches, aborts, a rank
// killed mid-collective; and, in one process, the rendezvous's errors.
// CTest runs `ddl-run -n N ddl_test_ucx` (ucx.nN), the same with
// UCX_TLS=tcp, and `ddl_test_ucx --test-case='ucx rendezvous*'` alone.
#ifdef DDL_TEST_UCX_MPI
#define DOCTEST_CONFIG_IMPLEMENT
#include <ddl/mpi.hpp>
#else
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#endif
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ddl/staged/transport.hpp>
#include <ddl/ucx.hpp>

#include "fake_device.hpp"
#include "matrix.hpp"
#include "support.hpp"

using namespace ddl_test;

static_assert(ddl::check_transport<ddl::ucx_transport>());
static_assert(ddl::has_test_v<ddl::ucx_transport> && ddl::has_irecv_any_v<ddl::ucx_transport> &&
              ddl::has_abort_v<ddl::ucx_transport> && ddl::has_wait_until_v<ddl::ucx_transport> &&
              ddl::has_read_peer_v<ddl::ucx_transport> && ddl::has_peer_buffer_v<ddl::ucx_transport>);

namespace {

#ifdef DDL_TEST_UCX_MPI
// Built as ddl_test_ucx_mpi: an MPI job (mpiexec) running ddl over UCX, the
// ranks meeting through an mpi_store.
bool launched() { return true; }
std::unique_ptr<ddl::ucx_transport> world() {
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  ddl::mpi_store store(MPI_COMM_WORLD);
  return std::make_unique<ddl::ucx_transport>(store, r, n);
}
std::unique_ptr<ddl::ucx_cluster> cluster_of(const ddl::detect_options& o) {
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  ddl::mpi_store store(MPI_COMM_WORLD);
  return std::make_unique<ddl::ucx_cluster>(store, r, n, o);
}
#else
bool launched() { return std::getenv("DDL_RENDEZVOUS") != nullptr; }
std::unique_ptr<ddl::ucx_transport> world() { return std::make_unique<ddl::ucx_transport>(); }
std::unique_ptr<ddl::ucx_cluster> cluster_of(const ddl::detect_options& o) { return std::make_unique<ddl::ucx_cluster>(o); }
#endif

// How many ranks of `t` report `yes` (every rank learns it).
int count_on(ddl::ucx_transport& t, bool yes) {
  ddl::communicator<ddl::ring, ddl::ucx_transport> comm(t);
  std::vector<int> v{yes ? 1 : 0};
  comm.all_reduce(ddl::host_view(v), ddl::op::sum);
  return v[0];
}

template <class Strategy>
void ucx_matrix(ddl::ucx_transport& t, const Strategy& s, std::size_t large = 65539, ddl::options o = {}) {
  failure_log log;
  const auto counts = matrix_counts(t.size(), large);
  std::vector<std::byte> expected(large * 8);
  matrix_rank(t, counts, log, o, s, expected.data(), false, [] {});
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

ddl::multi_ring<ddl::dynamic_extents> box_for(int n) {
  int a = 1;
  for (int f = 1; f * f <= n; ++f)
    if (n % f == 0) a = f;
  return ddl::multi_ring<ddl::dynamic_extents>(ddl::dynamic_extents{a, n / a}, {1, 0});
}

// A fresh directory for the one-process rendezvous tests.
std::string fresh_dir() {
  char dir[] = "/tmp/ddl-test-ucx-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  return dir;
}

std::string rendezvous_dir() { return ddl::rendezvous_dir_from_env(); }

}  // namespace

TEST_CASE("ucx: every strategy passes the matrix") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  ucx_matrix(t, ddl::ring{}, (std::size_t{1} << 20) + 3);
  ucx_matrix(t, ddl::recursive_doubling{});
  ddl::options tiny;
  tiny.chunk_bytes = 256;
  tiny.pipeline_depth = 2;
  ucx_matrix(t, ddl::recursive_doubling{}, 4099, tiny);
  ucx_matrix(t, ddl::halving_doubling{});
  ucx_matrix(t, box_for(t.size()));
  ucx_matrix(t, box_for(t.size()).pipelined(3));
  ucx_matrix(t, ddl::auto_strategy{}, 300007);
  if (t.stages_shared()) {
    ucx_matrix(t, ddl::one_shot{});
    ucx_matrix(t, ddl::two_shot{});
  }
}

TEST_CASE("ucx: near ranks: device buffers between processes go device to device over UCX as over MPI (a fake "
          "device that shares its memory)") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  using near = ddl::staged_transport<ddl::ucx_transport, sharing_device>;
  sharing_device dev;
  ddl::staging_options so;
  so.bounce_bytes = 0;
  so.near_bounce_bytes = 0;
  const auto counts = matrix_counts(t.size(), 4099);
  const std::size_t bytes = matrix_bytes(counts);
  std::byte* in = dev.allocate(bytes);
  std::byte* out = dev.allocate(bytes);
  near st(t, dev, so);
  int wrong_near = 0;
  for (int q = 0; q < t.size(); ++q)
    if (q != t.rank() && st.near(q) != t.stages_shared()) ++wrong_near;
  CHECK(count_on(t, wrong_near > 0) == 0);
  failure_log log;
  std::vector<std::byte> expected(bytes);
  matrix_rank(st, counts, log, {}, ddl::ring{}, expected.data(), false, [] {}, in, out, ddl_test::on_device);
  matrix_rank(st, counts, log, {}, box_for(t.size()), expected.data(), false, [] {}, in, out, ddl_test::on_device);
  if (st.device_peers()) {  // one_shot and two_shot reading the peers' device memory
    matrix_rank(st, counts, log, {}, ddl::two_shot{}, expected.data(), false, [] {}, in, out, ddl_test::on_device);
    matrix_rank(st, counts, log, {}, ddl::one_shot{}, expected.data(), false, [] {}, in, out, ddl_test::on_device);
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());
  CHECK(count_on(t, log.count() > 0) == 0);
}

TEST_CASE("ucx: ranks of one host share stages unless UCX_TLS keeps them apart or DDL_UCX_SHM=0; every rank agrees") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  const char* shm = std::getenv("DDL_UCX_SHM");
  CHECK(t.stages_shared() == !(shm && std::string(shm) == "0"));
  CHECK(t.stamps_in_tags());
  for (int q = 0; q < t.size(); ++q) CHECK(t.host_of(q) == t.host_of(t.rank()));
}

TEST_CASE("ucx: broadcast from every root, all_to_all, gather, scatter, reduce; blocking and asynchronous") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  const int n = t.size(), r = t.rank();
  failure_log log;
  ddl::communicator<ddl::auto_strategy, ddl::ucx_transport> comm(t);
  for (std::size_t count : {std::size_t(1), std::size_t(1001), (std::size_t(1) << 16) + 1})
    for (int root = 0; root < n; ++root) check_broadcast(comm, r, count, root, log, "broadcast");
  for (std::size_t per : {std::size_t(0), std::size_t(1), std::size_t(1001), std::size_t(1) << 17})
    for (bool counts : {false, true}) {
      const auto parts = all_to_all_parts(n, per, counts);
      for (bool in_place : {false, true})
        for (bool async : {false, true})
          check_all_to_all<double>(comm, r, parts, {counts, in_place, async}, log, "per " + std::to_string(per));
    }
  for (std::size_t per : {std::size_t(0), std::size_t(1), std::size_t(1001), std::size_t(4097)})
    for (int root : {0, n - 1})
      for (bool scatter : {false, true})
        for (bool in_place : {false, true})
          check_rooted<ddl::bfloat16>(comm, r, n, per, root, {scatter, in_place, in_place != (root == 0)}, log,
                                      "per " + std::to_string(per));
  for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(1001), std::size_t(8195)})
    for (ddl::op o : ddl::all_ops)
      for (bool in_place : {false, true})
        check_reduce<double>(comm, r, n, count, n - 1, o, in_place, !in_place, log, "count " + std::to_string(count));
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("ucx: send, recv, sendrecv and recv_any beside collectives; an unmatched receive times out") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  const int n = t.size(), r = t.rank();
  failure_log log;
  ddl::communicator<ddl::auto_strategy, ddl::ucx_transport> comm(t);
  for (std::size_t per : {std::size_t(0), std::size_t(1), std::size_t(1001), std::size_t(1) << 18}) {
    const std::string where = "per " + std::to_string(per);
    for (bool async : {false, true}) check_transfers<double>(comm, r, n, per, async, log, where);
    check_sendrecv<std::int32_t>(comm, r, n, per, log, "sendrecv " + where);
    check_any_source<ddl::half>(comm, r, n, per, log, "recv_any " + where);
  }
  if (n > 1) {
    ddl::options o = comm.opts();
    const ddl::options patient = o;
    o.timeout = std::chrono::milliseconds(300);
    comm.set_options(o);
    if (r == 0) {
      std::vector<float> got(3);
      std::string what;
      try {
        comm.recv(ddl::host_view(got), 1, 9);
      } catch (const ddl::timeout_error& e) {
        what = e.what();
        CHECK(e.peer() == 1);
      }
      CHECK_MESSAGE(what.find("recv from rank 1 under tag 9") != std::string::npos, what);
    }
    comm.set_options(patient);
    std::vector<float> v(1001, 1.0f);
    comm.all_reduce(ddl::host_view(v), ddl::op::sum);  // everyone waits here for rank 0's timeout
    CHECK(v.back() == static_cast<float>(n));
    check_transfers<float>(comm, r, n, 3, true, log, "after the timeout");
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("ucx: asynchronous all-reduces on the progress thread equal the blocking ones") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  const int n = t.size(), r = t.rank();
  ddl::communicator<ddl::auto_strategy, ddl::ucx_transport> comm(t);
  std::vector<std::vector<float>> bufs;
  std::vector<std::size_t> counts{1, 17, 1001, 65537, 300007};
  for (std::size_t c : counts) {
    bufs.emplace_back(c);
    for (std::size_t i = 0; i < c; ++i) bufs.back()[i] = static_cast<float>((i % 101) * (r + 1));
  }
  std::vector<ddl::collective_request> pending;
  for (auto& b : bufs) pending.push_back(comm.all_reduce_async(ddl::host_view(b), ddl::op::sum));
  for (auto& p : pending) p.wait();
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  for (std::size_t k = 0; k < counts.size(); ++k) {
    bool ok = true;
    for (std::size_t i = 0; i < counts[k] && ok; ++i) ok = bufs[k][i] == static_cast<float>(i % 101) * ranks_sum;
    CHECK_MESSAGE(ok, "count " << counts[k]);
  }
}

TEST_CASE("ucx: a collective one rank disagrees on is a mismatch_error on every rank; a count mismatch too") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  const int n = t.size(), r = t.rank();
  if (n < 2) return;
  {
    ddl::communicator<ddl::ring, ddl::ucx_transport> comm(t);
    std::vector<float> v(1000, 1.0f), out(1000 * static_cast<std::size_t>(n));
    std::string what;
    try {
      if (r == n - 1) comm.all_gather(ddl::host_view(std::as_const(v)), ddl::host_view(out));
      else comm.all_reduce(ddl::host_view(v), ddl::op::sum);
    } catch (const ddl::mismatch_error& e) {
      what = e.what();
    }
    CHECK_MESSAGE(what.find("ranks disagree on the collective") != std::string::npos, what);
  }
  auto fresh_ = world();  // the group is given up after a mismatch
  ddl::ucx_transport& fresh = *fresh_;
  ddl::communicator<ddl::ring, ddl::ucx_transport> comm(fresh);
  std::vector<double> v(r == n - 1 ? 2003 : 2000, 1.0);
  std::string what;
  try {
    comm.all_reduce(ddl::host_view(v), ddl::op::sum);
  } catch (const ddl::mismatch_error& e) {
    what = e.what();
  }
  CHECK_MESSAGE(what.find("call mismatch") != std::string::npos, what);
}

TEST_CASE("ucx: communicator::abort on one rank ends the others' pending calls at once, naming it") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  const int n = t.size(), r = t.rank();
  if (n < 2) return;
  ddl::communicator<ddl::ring, ddl::ucx_transport> comm(t);
  const auto start = std::chrono::steady_clock::now();
  std::string what;
  if (r == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    comm.abort("giving up on purpose");
  } else {
    std::vector<float> v(100000, 1.0f);
    try {
      comm.all_reduce(ddl::host_view(v), ddl::op::sum);
    } catch (const ddl::transport_error& e) {
      what = e.what();
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK_MESSAGE(what.find("giving up on purpose") != std::string::npos, what);
    CHECK(took < 5.0);
  }
}

TEST_CASE("ucx cluster: one host is one node; a faked two-node layout is renumbered node by node through a second "
          "rendezvous, and the all-reduce over it is exact") {
  if (!launched()) return;
  if (std::getenv("DDL_TOPOLOGY") || std::getenv("DDL_PROBE")) return;  // the defaults are what is tested
  {
    auto c = cluster_of({});
    CHECK(c->layout().nodes == 1);
    CHECK(c->transport().rank() == c->layout().local_rank);
    REQUIRE(c->topo().count() == 1u);
    CHECK(c->topo().size() == c->transport().size());
    CHECK_MESSAGE(c->report().find("1 node(s) x " + std::to_string(c->transport().size())) != std::string::npos,
                  c->report());
  }
  auto w = world();
  const int n = w->size(), r = w->rank();
  if (n < 2 || n % 2) return;
  // Interleaved on purpose: even ranks on node 0, odd on node 1.
  ddl::detect_options o;
  o.node_colour = r % 2;
  auto c = cluster_of(o);
  ddl::ucx_transport& t = c->transport();
  const auto& L = c->layout();
  CHECK(L.nodes == 2);
  CHECK(L.uniform);
  CHECK(L.node == r % 2);
  CHECK(t.rank() == L.node * (n / 2) + L.local_rank);
  REQUIRE(c->topo().count() == (n > 2 ? 2u : 1u));
  // The new numbering reaches the right processes: rank k of the cluster
  // is the process that was rank (k % (n/2)) * 2 + k / (n/2).
  ddl::communicator<ddl::auto_strategy, ddl::ucx_transport> comm(t, ddl::auto_strategy(c->topo()));
  std::vector<std::int64_t> was(static_cast<std::size_t>(n), 0);
  was[static_cast<std::size_t>(t.rank())] = r;
  comm.all_reduce(ddl::host_view(was), ddl::op::sum);
  for (int k = 0; k < n; ++k) CHECK(was[static_cast<std::size_t>(k)] == (k % (n / 2)) * 2 + k / (n / 2));
  std::vector<std::int64_t> g(10007);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<std::int64_t>(i) * (t.rank() + 1);
  comm.all_reduce(ddl::host_view(g), ddl::op::sum);
  bool ok = true;
  for (std::size_t i = 0; i < g.size(); ++i) ok = ok && g[i] == static_cast<std::int64_t>(i) * n * (n + 1) / 2;
  CHECK(ok);
}

TEST_CASE("ucx cluster: DDL_TOPOLOGY=auto probes node leaders over UCX and every rank ends with the same topology") {
  if (!launched()) return;
  auto w = world();
  const int n = w->size(), r = w->rank();
  if (n < 4 || n % 2) return;  // needs at least two faked nodes of two ranks
  ddl::detect_options o;
  o.node_colour = r / 2;  // nodes of 2 ranks
  o.probe_bytes = 64 << 10;
  setenv("DDL_TOPOLOGY", "auto", 1);
  auto c = cluster_of(o);
  unsetenv("DDL_TOPOLOGY");
  const auto& topo = c->topo();
  CHECK(c->report().find("hierarchy probed") != std::string::npos);
  CHECK(topo.size() == n);
  CHECK(topo[0].extent == 2);  // ranks per node first
  REQUIRE(topo.count() >= 2);
  for (std::size_t l = 0; l < topo.count(); ++l) {
    CHECK(topo[l].bandwidth > 1e6);
    CHECK(topo[l].bandwidth < 10e12);
    CHECK(topo[l].latency > 0);
  }
  for (std::size_t l = 1; l < topo.count(); ++l) {
    CHECK(topo[l].exchange > 0);
    CHECK(topo[l].exchange <= topo[l].bandwidth);
  }
  CHECK(c->report().find("flows at once") != std::string::npos);
  // Every rank ended with rank 0's topology.
  ddl::communicator<ddl::auto_strategy, ddl::ucx_transport> comm(c->transport(), ddl::auto_strategy(topo));
  std::vector<double> mine, max_of;
  for (std::size_t l = 0; l < topo.count(); ++l)
    for (double v : {double(topo[l].extent), topo[l].bandwidth, topo[l].latency, topo[l].exchange}) mine.push_back(v);
  max_of = mine;
  comm.all_reduce(ddl::host_view(max_of), ddl::op::max);
  CHECK(max_of == mine);
  std::vector<float> v(4099, 1.0f);
  comm.all_reduce(ddl::host_view(v), ddl::op::sum);
  CHECK(v[4098] == static_cast<float>(n));
}

TEST_CASE("ucx cluster: DDL_TOPOLOGY that differs between ranks, or does not fit, is the same error on every rank") {
  if (!launched()) return;
  auto w = world();
  const int n = w->size(), r = w->rank();
  if (n < 2) return;
  const std::string mine = r == 0 ? "1:1GB/s:1us," + std::to_string(n) + ":1GB/s:1us" : std::to_string(n) + ":1GB/s:1us";
  setenv("DDL_TOPOLOGY", mine.c_str(), 1);
  bool caught = false;
  try {
    cluster_of({});
  } catch (const ddl::topology_error& e) {
    caught = std::string(e.what()).find("DDL_TOPOLOGY differs between ranks") != std::string::npos;
  }
  unsetenv("DDL_TOPOLOGY");
  CHECK(count_on(*w, caught) == n);
  setenv("DDL_TOPOLOGY", (std::to_string(n + 1) + ":1GB/s:1us").c_str(), 1);
  caught = false;
  try {
    cluster_of({});
  } catch (const ddl::topology_error&) {
    caught = true;
  }
  unsetenv("DDL_TOPOLOGY");
  CHECK(count_on(*w, caught) == n);
}

// Run by CTest under `ddl-run --keep-going`: rank `victim` (the last) dies
// by SIGKILL in its 5th all-reduce; every survivor must end its call with an
// error naming it within DDL_TEST_KILL_BOUND seconds (2 by default) of the
// kill, and say so in a file; rank 0 prints one line for CTest to match.
TEST_CASE("ucx kill: a rank killed mid-collective is named by every survivor within the bound") {
  if (!launched()) return;
  auto world_ = world();
  ddl::ucx_transport& t = *world_;
  const int n = t.size(), r = t.rank(), victim = n - 1;
  REQUIRE(n >= 2);
  const double bound = std::getenv("DDL_TEST_KILL_BOUND") ? std::atof(std::getenv("DDL_TEST_KILL_BOUND")) : 2.0;
  const std::string dir = rendezvous_dir();
  // A directory used before (an MPI job's DDL_RENDEZVOUS) may hold an old
  // outcome: each rank removes its own before its first call, so before
  // rank 0 can finish one.
  ::mkdir(dir.c_str(), 0700);  // an MPI job's directory may not exist yet (ddl-run makes its own)
  std::remove((dir + "/outcome." + std::to_string(r)).c_str());
  ddl::communicator<ddl::ring, ddl::ucx_transport> comm(t);
  std::vector<float> v(std::size_t{1} << 20, 1.0f);
  std::string what;
  double noticed = 0;
  try {
    for (int call = 0; call < 1000; ++call) {
      if (r == victim && call == 5) {
        std::ofstream(dir + "/killed_at") << ddl::detail::steady_seconds() << "\n";
        ::raise(SIGKILL);
      }
      comm.all_reduce(ddl::host_view(v), ddl::op::sum);
    }
  } catch (const ddl::error& e) {
    what = e.what();
    noticed = ddl::detail::steady_seconds();
  }
  double killed = 0;
  std::ifstream(dir + "/killed_at") >> killed;
  const double after = noticed - killed;
  const bool named = what.find("rank " + std::to_string(victim) + " (pid") != std::string::npos;
  const bool ok = named && killed > 0 && after < bound;
  CHECK_MESSAGE(ok, "after " << after << " s: " << what);
  std::ofstream(dir + "/outcome." + std::to_string(r)) << (ok ? "ok " : "bad ") << after << "\n";
  if (r != 0) return;
  int good = 0;
  double worst = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int q = 0; q < victim; ++q) {
    std::string word;
    double s = 0;
    while (std::chrono::steady_clock::now() < until) {
      std::ifstream f(dir + "/outcome." + std::to_string(q));
      if (f >> word >> s) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (word == "ok") ++good, worst = std::max(worst, s);
  }
  if (good == victim)
    std::printf("ucx kill: %d of %d survivors named rank %d within %.2f s (bound %.1f s)\n", good, victim, victim, worst,
                bound);
}

// --- One process: the rendezvous's errors ------------------------------------

TEST_CASE("ucx rendezvous: a missing rank is a timeout_error naming it; an unwritable store an invalid_argument") {
  if (launched()) return;
  const std::string dir = fresh_dir();
  std::string what;
  std::vector<int> silent;
  try {
    ddl::ucx_transport t(ddl::file_store(dir), 0, 3, std::chrono::milliseconds(500), "missing");
  } catch (const ddl::timeout_error& e) {
    what = e.what();
    silent = e.silent();
  }
  CHECK_MESSAGE(what.find("rank(s) 1, 2 of 3 never joined the rendezvous") != std::string::npos, what);
  CHECK(silent == std::vector<int>{1, 2});
  CHECK_THROWS_WITH_AS(ddl::file_store("/proc/ddl-cannot-be-here"), doctest::Contains("rendezvous directory"),
                       ddl::invalid_argument);
}

TEST_CASE("ucx rendezvous: ranks that disagree on the world size, and two processes claiming one rank, fail on every rank") {
  if (launched()) return;
  const std::string dir = fresh_dir();
  ddl::file_store store(dir);
  auto attempt = [&](int rank, int size, const char* name) {
    try {
      ddl::ucx_transport t(store, rank, size, std::chrono::seconds(5), name);
    } catch (const ddl::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  {
    std::string a, b;
    std::thread ta([&] { a = attempt(0, 2, "size"); });
    std::thread tb([&] { b = attempt(1, 3, "size"); });
    ta.join();
    tb.join();
    CHECK_MESSAGE(a.find("ranks disagree on the world size: rank 1 says 3 ranks, rank 0 says 2") != std::string::npos, a);
    CHECK_MESSAGE(b.find("ranks disagree on the world size: rank 0 says 2 ranks, rank 1 says 3") != std::string::npos, b);
  }
  {
    std::string a, b, c;
    std::thread ta([&] { a = attempt(0, 2, "twice"); });
    std::thread tb([&] { b = attempt(0, 2, "twice"); });
    while (store.add("ddl.ucx.twice.claim.0", 0) < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread tc([&] { c = attempt(1, 2, "twice"); });
    ta.join();
    tb.join();
    tc.join();
    for (const std::string* s : {&a, &b, &c}) CHECK_MESSAGE(s->find("two processes claim rank 0") != std::string::npos, *s);
  }
  CHECK_THROWS_WITH_AS(ddl::ucx_transport(store, 2, 2), doctest::Contains("rank 2 of 2"), ddl::invalid_argument);
}

TEST_CASE("ucx rendezvous: rank and size from the launcher's variables, or an error naming them") {
  if (launched()) return;
  ::setenv("RANK", "1", 1);
  ::unsetenv("WORLD_SIZE");
  CHECK_THROWS_WITH_AS(ddl::launch_from_env(), doctest::Contains("WORLD_SIZE is not set while RANK is"),
                       ddl::invalid_argument);
  ::setenv("WORLD_SIZE", "1", 1);
  CHECK_THROWS_WITH_AS(ddl::launch_from_env(), doctest::Contains("rank 1 of 1"), ddl::invalid_argument);
  ::setenv("WORLD_SIZE", "4", 1);
  const ddl::launch_info who = ddl::launch_from_env();
  CHECK(who.rank == 1);
  CHECK(who.size == 4);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::setenv("SLURM_PROCID", "3", 1);
  ::setenv("SLURM_NTASKS", "5", 1);
  CHECK(ddl::launch_from_env().from == "SLURM_PROCID/SLURM_NTASKS");
  ::unsetenv("SLURM_PROCID");
  ::unsetenv("SLURM_NTASKS");
  if (!std::getenv("OMPI_COMM_WORLD_RANK") && !std::getenv("PMI_RANK"))
    CHECK_THROWS_WITH_AS(ddl::launch_from_env(), doctest::Contains("no rank and world size"), ddl::invalid_argument);
  ::setenv("DDL_RENDEZVOUS", "tcp://host:1234", 1);
  CHECK_THROWS_WITH_AS(ddl::rendezvous_dir_from_env(), doctest::Contains("expected file:///path"),
                       ddl::invalid_argument);
  ::unsetenv("DDL_RENDEZVOUS");
}

#ifdef DDL_TEST_UCX_MPI
int main(int argc, char** argv) {
  ddl::mpi_session mpi(argc, argv);
  doctest::Context ctx(argc, argv);
  // The kill case runs only when asked for by name (bench/cluster's cluster.kill.ucx).
  bool named = false;
  for (int i = 1; i < argc; ++i) named = named || std::string(argv[i]).rfind("--test-case=", 0) == 0;
  if (!named) ctx.addFilter("test-case-exclude", "ucx kill*,ucx rendezvous*");
  const int failed = ctx.run() != 0;
  if (named) {  // a rank may have been killed: no MPI call over the world (it would wait for it), no finalize
    std::fflush(stdout);
    std::_Exit(failed);
  }
  int r = 0, failures = failed;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) std::printf("ucx over an MPI job: %d rank(s) failed\n", failures);
  return failed;
}
#endif
