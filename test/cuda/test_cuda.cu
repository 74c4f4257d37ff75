// The CUDA back-end on a real GPU: device reductions of both engines (ddl's
// kernel, CCCL's cub::DeviceTransform) against the host kernels (bit for bit),
// every collective over cuda_peer_transport with 1-8 ranks on one GPU, and
// device buffers through the staging pipeline. Buffers are
// thrust::device_vector; inputs and expected results are computed on the
// device (thrust::tabulate over the suite's exact-integer pattern) and
// compared there (thrust::mismatch on the bits).
// Without a device it reports "skipped: no CUDA device" and exits 77, which
// CTest shows as skipped (never as a pass).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/mismatch.h>
#include <thrust/tabulate.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <ddl/cuda.hpp>

#include "../support.hpp"
#include "device_checks.hpp"

namespace {

// Host data to the device at `offset` (synchronous: a collective on any
// stream reads it afterwards), and back.
template <class T>
void upload(dvec<T>& d, const std::vector<T>& h, std::size_t offset = 0) {
  thrust::copy(h.begin(), h.end(), d.begin() + static_cast<std::ptrdiff_t>(offset));
}
template <class T>
std::vector<T> download(const dvec<T>& d, std::size_t n, std::size_t offset = 0) {
  std::vector<T> h(n);
  thrust::copy(d.begin() + static_cast<std::ptrdiff_t>(offset), d.begin() + static_cast<std::ptrdiff_t>(offset + n),
               h.begin());
  return h;
}

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Equal bits, except that any NaN equals any NaN: the host and the GPU make
// different NaNs of inf * 0 (the sign, the payload).
template <class T>
bool same_or_both_nan(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) == 0) continue;
    if constexpr (std::is_integral_v<T>) {
      return false;
    } else {
      const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
      if (!(x != x && y != y)) return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("cuda: DDL_CUDA_REDUCE names an engine or is an error naming it") {
  CHECK(std::string(ddl::cuda::name_of(ddl::cuda::default_reduce_engine())) ==
        (std::getenv("DDL_CUDA_REDUCE") ? std::getenv("DDL_CUDA_REDUCE") : "kernel"));
  CHECK(std::string(ddl::cuda::name_of(ddl::cuda::reduce_engine::cub)) == "cub");
  CHECK(ddl::cuda::has_cub_engine);  // DDL_CUDA_CUB_ENGINE (test/cuda/CMakeLists.txt); the consumer checks the other side
}

TEST_CASE("cuda: device reductions of both engines equal the host kernels bit for bit, aligned or not, in place or not") {
  std::mt19937 gen(7);
  std::normal_distribution<double> dist(0.0, 100.0);
  for (ddl::cuda::reduce_engine engine : {ddl::cuda::reduce_engine::kernel, ddl::cuda::reduce_engine::cub})
    for (ddl::dtype dt : ddl::all_dtypes)
      for (ddl::op o : ddl::all_ops)
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000003}})
          for (std::size_t off : {std::size_t{0}, std::size_t{1}})
            ddl::visit_dtype(dt, [&](auto tag) {
              using T = decltype(tag);
              CAPTURE(ddl::cuda::name_of(engine));
              CAPTURE(ddl::name_of(dt));
              CAPTURE(ddl::name_of(o));
              CAPTURE(count);
              CAPTURE(off);
              std::vector<T> a(count), b(count);
              for (std::size_t i = 0; i < count; ++i) {
                a[i] = T(static_cast<float>(std::round(dist(gen))));
                b[i] = T(static_cast<float>(std::round(dist(gen))));
              }
              const ddl::reduction r{dt, o};
              std::vector<T> want(count);
              ddl::host::reduce(want.data(), a.data(), b.data(), count, r);
              ddl::host::finalize(want.data(), count, r, 3);
              dvec<T> da(count + 1), db(count + 1), dc(count + 1);
              upload(da, a, off);
              upload(db, b, off);
              ddl::cuda::reduce(raw(dc, off), raw(da, off), raw(db, off), count, r, nullptr, engine);
              ddl::cuda::finalize(raw(dc, off), count, r, 3, nullptr, engine);
              CHECK(same(download(dc, count, off), want));
              ddl::cuda::reduce(raw(da, off), raw(da, off), raw(db, off), count, r, nullptr, engine);  // dst == a
              ddl::cuda::finalize(raw(da, off), count, r, 3, nullptr, engine);
              CHECK(same(download(da, count, off), want));
              upload(da, a, off);
              ddl::cuda::reduce(raw(db, off), raw(da, off), raw(db, off), count, r, nullptr, engine);  // dst == b
              ddl::cuda::finalize(raw(db, off), count, r, 3, nullptr, engine);
              CHECK(same(download(db, count, off), want));
            });
}

TEST_CASE("cuda: reduce_many (one kernel over n sources) equals the host's bit for bit, n = 1-32, any source as dst") {
  std::mt19937 gen(11);
  std::normal_distribution<double> dist(0.0, 100.0);
  for (ddl::dtype dt : ddl::all_dtypes)
    for (ddl::op o : ddl::all_ops)
      for (int n : {1, 2, 3, 8, 32})
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{100003}})
          for (std::size_t off : {std::size_t{0}, std::size_t{1}})
            ddl::visit_dtype(dt, [&](auto tag) {
              using T = decltype(tag);
              CAPTURE(std::string(ddl::name_of(dt)));
              CAPTURE(std::string(ddl::name_of(o)));
              CAPTURE(n);
              CAPTURE(count);
              CAPTURE(off);
              const ddl::reduction r{dt, o};
              std::vector<std::vector<T>> h(static_cast<std::size_t>(n), std::vector<T>(count));
              std::vector<const void*> hp;
              for (auto& v : h) {
                for (auto& x : v) x = T(static_cast<float>(std::round(dist(gen))));
                hp.push_back(v.data());
              }
              std::vector<T> want(count);
              ddl::host::reduce_many(want.data(), hp.data(), n, count, r);
              std::vector<dvec<T>> d(static_cast<std::size_t>(n), dvec<T>(count + 1));
              std::vector<const void*> dp;
              for (int k = 0; k < n; ++k) {
                upload(d[static_cast<std::size_t>(k)], h[static_cast<std::size_t>(k)], off);
                dp.push_back(raw(d[static_cast<std::size_t>(k)], off));
              }
              DDL_CUDA_CHECK(cudaDeviceSynchronize());
              dvec<T> out(count + 1);
              // Products of many sources overflow to inf, and inf * 0 is a NaN
              // whose bits differ between the host and the GPU.
              ddl::cuda::reduce_many(raw(out, off), dp.data(), n, count, r, nullptr);
              CHECK(same_or_both_nan(download(out, count, off), want));
              // in place: into the last source (every element read before it is written)
              ddl::cuda::reduce_many(raw(d.back(), off), dp.data(), n, count, r, nullptr);
              CHECK(same_or_both_nan(download(d.back(), count, off), want));
            });
  std::vector<const void*> many(33, nullptr);
  float f = 0;
  CHECK_THROWS_WITH_AS(ddl::cuda::reduce_many(&f, many.data(), 33, 1, ddl::reduction{ddl::dtype::float32, ddl::op::sum},
                                              nullptr),
                       doctest::Contains("33 sources"), ddl::invalid_argument);
}

// While one lives, fabrics made are without flag regions' calls
// (`DDL_CUDA_FLAGGED=0`): one_shot and two_shot synchronise by messages.
struct flagged_off {
  flagged_off() { setenv("DDL_CUDA_FLAGGED", "0", 1); }
  ~flagged_off() { unsetenv("DDL_CUDA_FLAGGED"); }
  flagged_off(const flagged_off&) = delete;
  flagged_off& operator=(const flagged_off&) = delete;
};

template <class Strategy>
void peer_collectives(int n, const Strategy& s, ddl_test::failure_log& log) {
  // 16383: one_shot's flagged calls in 16 blocks (float), 8 (16-bit types).
  const std::vector<std::size_t> counts{0, 1, static_cast<std::size_t>(n) + 1, 1009, 16383,
                                        (std::size_t{1} << 20) + 3};
  ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));  // every rank on GPU 0
  fab.run([&](ddl::cuda_peer_transport& t) {
    cudaStream_t stream = nullptr;
    DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ddl::communicator<Strategy, ddl::cuda_peer_transport> comm(t, s);
    device_collectives(comm, s.describe(), n, t.rank(), 0, counts, stream, log);
    DDL_CUDA_CHECK(cudaStreamDestroy(stream));
  });
}

TEST_CASE("cuda: every collective over cuda_peer_transport, 1-8 ranks on one GPU, every dtype and op") {
  ddl_test::failure_log log;
  for (int n = 1; n <= 8; ++n) {
    peer_collectives(n, ddl::ring{}, log);
    peer_collectives(n, ddl::halving_doubling{}, log);
    peer_collectives(n, ddl::recursive_doubling{}, log);
    peer_collectives(n, ddl::one_shot{}, log);
    peer_collectives(n, ddl::two_shot{}, log);  // whole calls through the flag regions (flagged_two_shot)
    flagged_off messages;
    peer_collectives(n, ddl::two_shot{}, log);
  }
  peer_collectives(6, ddl::multi_ring<ddl::dynamic_extents>({2, 3}, {1, 0}), log);
  peer_collectives(8, ddl::auto_strategy(ddl::topology::parse("2:200GB/s:10us,4:100GB/s:10us")), log);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("cuda: all_to_all of device buffers over cuda_peer_transport, even parts and counts, 1-8 ranks on one GPU") {
  ddl_test::failure_log log;
  for (int n = 1; n <= 8; ++n) {
    ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
    fab.run([&](ddl::cuda_peer_transport& t) {
      cudaStream_t stream = nullptr;
      DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      ddl::communicator<ddl::auto_strategy, ddl::cuda_peer_transport> comm(t);
      const int r = t.rank();
      const auto me = static_cast<std::size_t>(r), ranks = static_cast<std::size_t>(n);
      for (std::size_t per : {std::size_t(0), std::size_t(1), std::size_t(1009), (std::size_t{1} << 18) + 3})
        for (bool counts : {false, true}) {
          std::vector<std::size_t> sends(ranks), recvs(ranks);
          auto part = [&](std::size_t a, std::size_t b) { return counts ? per * ((a * 3 + b * 5 + 1) % 4) / 3 : per; };
          for (std::size_t k = 0; k < ranks; ++k) {
            sends[k] = part(me, k);
            recvs[k] = part(k, me);
          }
          std::vector<float> h_in, want;
          for (std::size_t k = 0; k < ranks; ++k)
            for (std::size_t i = 0; i < sends[k]; ++i) h_in.push_back(ddl_test::all_to_all_value<float>(r, static_cast<int>(k), i));
          for (std::size_t k = 0; k < ranks; ++k)
            for (std::size_t i = 0; i < recvs[k]; ++i) want.push_back(ddl_test::all_to_all_value<float>(static_cast<int>(k), r, i));
          dvec<float> din(h_in.size()), dout(want.size());
          upload(din, h_in);
          const auto in = ddl::device_view(static_cast<const float*>(raw(din)), h_in.size(), 0, stream);
          const auto out = ddl::device_view(raw(dout), want.size(), 0, stream);
          if (counts) comm.all_to_all(in, sends, out, recvs);
          else comm.all_to_all(in, out);
          DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
          const std::string what = (counts ? "with counts" : "even") + std::string(" n=") + std::to_string(n) +
                                   " rank=" + std::to_string(r) + " per=" + std::to_string(per);
          if (!same(download(dout, want.size()), want)) log.add(what + ": out of place wrong");
          if (!counts) {  // in place
            comm.all_to_all(ddl::device_view(raw(din), h_in.size(), 0, stream), ddl::device_view(raw(din), h_in.size(), 0, stream));
            DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
            if (!same(download(din, want.size()), want)) log.add(what + ": in place wrong");
          }
        }
      DDL_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("cuda: gather, scatter and reduce of device buffers over cuda_peer_transport, 1-8 ranks on one GPU") {
  ddl_test::failure_log log;
  for (int n = 1; n <= 8; ++n) {
    ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
    fab.run([&](ddl::cuda_peer_transport& t) {
      cudaStream_t stream = nullptr;
      DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      ddl::communicator<ddl::auto_strategy, ddl::cuda_peer_transport> comm(t);
      const int r = t.rank(), root = n / 2;
      const auto ranks = static_cast<std::size_t>(n);
      for (std::size_t per : {std::size_t(1), std::size_t(1009), (std::size_t{1} << 18) + 3}) {
        // Gather: rank k's part all_to_all_value(k, root, i), every part on the root.
        std::vector<float> mine(per), whole;
        for (std::size_t i = 0; i < per; ++i) mine[i] = ddl_test::all_to_all_value<float>(r, root, i);
        for (std::size_t k = 0; k < ranks; ++k)
          for (std::size_t i = 0; i < per; ++i) whole.push_back(ddl_test::all_to_all_value<float>(static_cast<int>(k), root, i));
        dvec<float> dpart(per), dwhole(r == root ? whole.size() : 0);
        upload(dpart, mine);
        comm.gather(ddl::device_view(static_cast<const float*>(raw(dpart)), per, 0, stream),
                    r == root ? ddl::device_view(raw(dwhole), whole.size(), 0, stream) : ddl::buffer_view{}, root);
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
        const std::string what = " n=" + std::to_string(n) + " rank=" + std::to_string(r) + " per=" + std::to_string(per);
        if (r == root && !same(download(dwhole, whole.size()), whole)) log.add("gather" + what);
        // Scatter: the root's part for rank k all_to_all_value(root, k, i).
        std::vector<float> parts, want(per);
        for (std::size_t k = 0; k < ranks; ++k)
          for (std::size_t i = 0; i < per; ++i) parts.push_back(ddl_test::all_to_all_value<float>(root, static_cast<int>(k), i));
        for (std::size_t i = 0; i < per; ++i) want[i] = ddl_test::all_to_all_value<float>(root, r, i);
        if (r == root) upload(dwhole, parts);
        comm.scatter(r == root ? ddl::device_view(static_cast<const float*>(raw(dwhole)), parts.size(), 0, stream)
                               : ddl::const_buffer_view{},
                     ddl::device_view(raw(dpart), per, 0, stream), root);
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (!same(download(dpart, per), want)) log.add("scatter" + what);
        // Reduce: the sum of every rank's gather part, on the root.
        std::vector<float> sum(per, 0.0f);
        for (std::size_t k = 0; k < ranks; ++k)
          for (std::size_t i = 0; i < per; ++i) sum[i] += ddl_test::all_to_all_value<float>(static_cast<int>(k), root, i);
        upload(dpart, mine);
        comm.reduce(ddl::device_view(static_cast<const float*>(raw(dpart)), per, 0, stream),
                    r == root ? ddl::device_view(raw(dpart), per, 0, stream) : ddl::buffer_view{}, ddl::op::sum, root);
        DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (!same(download(dpart, per), r == root ? sum : mine)) log.add("reduce" + what);
      }
      DDL_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

// The all-reduce times (us, float sum in place, every rank on the GPU) of
// H100 runs (bench/results/gpu-h100.md): ring, recursive doubling, halving
// doubling, one_shot, two_shot at 1, 4, 16, 64, 256 MiB.
struct measured_row {
  int ranks;
  double us[5][5];  // [algorithm][size]
};
// 2026-11-26, two_shot by messages (now: DDL_CUDA_FLAGGED=0), median of 10
// (gpu-raw/h100-2026-11-26/).
constexpr measured_row h100_messages[] = {
    {2, {{52.3, 62.9, 63.7, 130.0, 466.5}, {42.0, 42.6, 71.3, 240.4, 904.3}, {62.3, 54.4, 69.6, 131.9, 465.3},
         {45.1, 51.2, 77.0, 252.8, 925.6}, {58.2, 60.5, 62.0, 144.5, 478.6}}},
    {4, {{344.7, 341.6, 315.1, 441.4, 1424.3}, {127.3, 145.3, 168.8, 552.9, 2151.9}, {269.0, 273.9, 270.2, 371.5, 1356.2},
         {175.0, 169.4, 240.5, 694.5, 2535.5}, {264.1, 254.7, 261.7, 343.1, 1065.2}}},
    {8, {{1944.8, 1936.8, 1990.7, 1832.3, 3111.7}, {452.8, 460.8, 599.9, 1941.5, 7782.6}, {965.9, 908.8, 908.0, 949.5, 3098.4},
         {709.2, 750.5, 824.2, 2268.7, 7986.4}, {1110.6, 1044.8, 1112.4, 1151.6, 2453.5}}},
};
// 2026-11-27, two_shot run whole (flagged_two_shot), medians of 3 runs of
// 10 calls (gpu-raw/h100-2026-11-27/run2/medians/).
constexpr measured_row h100_whole[] = {
    {2, {{59.5, 73.0, 72.9, 140.7, 480.0}, {43.2, 49.0, 71.4, 243.4, 918.3}, {58.1, 62.3, 69.7, 136.7, 475.2},
         {51.5, 56.2, 86.5, 266.9, 938.5}, {33.9, 39.3, 52.8, 151.0, 491.2}}},
    {4, {{426.7, 455.6, 419.9, 490.3, 1448.8}, {149.2, 139.0, 170.1, 562.5, 2200.4}, {301.0, 288.3, 282.3, 370.3, 1372.7},
         {180.1, 187.5, 249.2, 714.1, 2562.2}, {52.5, 60.3, 102.8, 300.0, 1052.1}}},
    {8, {{2194.0, 2297.3, 2259.1, 2792.2, 3140.2}, {528.4, 592.2, 677.1, 1975.4, 7942.7}, {985.2, 1005.3, 1005.8, 1045.7, 3139.0},
         {788.4, 763.0, 866.7, 2330.9, 8274.2}, {73.4, 83.9, 186.1, 585.7, 2192.9}}},
};

// auto's in-place plans at 1-256 MiB over fabrics of each row's ranks (with
// or without the flag regions' calls) run within `slack` of the row's best.
void auto_follows(const measured_row (&rows)[3], bool flagged, double slack) {
  for (const measured_row& row : rows) {
    const int n = row.ranks;
    CAPTURE(n);
    CAPTURE(flagged);
    std::unique_ptr<flagged_off> off(flagged ? nullptr : new flagged_off);
    ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
    off.reset();
    std::vector<ddl::topology> topos(static_cast<std::size_t>(n));
    std::vector<std::string> plans(static_cast<std::size_t>(n));
    fab.run([&](ddl::cuda_peer_transport& t) {
      ddl::communicator<ddl::auto_strategy, ddl::cuda_peer_transport> comm(t);
      topos[static_cast<std::size_t>(t.rank())] = comm.strategy().topo();
      std::string seen;
      for (int k = 0; k < 5; ++k) {
        const std::size_t bytes = std::size_t{1} << (20 + 2 * k);
        const ddl::plan p = comm.strategy().choose(bytes, ddl::candidates::all, true);
        int a = 0;  // the measured row this plan ran as
        switch (p.algo) {
          case ddl::algorithm::multi_ring: a = p.direct_first ? 4 : 0; break;
          case ddl::algorithm::recursive_doubling: a = 1; break;
          case ddl::algorithm::halving_doubling: a = 2; break;
          case ddl::algorithm::one_shot: a = 3; break;
          case ddl::algorithm::two_shot: a = 4; break;
        }
        double best = row.us[0][k];
        for (int b = 1; b < 5; ++b) best = std::min(best, row.us[b][k]);
        seen += std::to_string(bytes >> 20) + " MiB " + ddl::name_of(p.algo) +
                (row.us[a][k] <= slack * best ? " ok; " : " SLOW; ");
      }
      plans[static_cast<std::size_t>(t.rank())] = seen;
    });
    for (int r = 0; r < n; ++r) {
      const ddl::topology& topo = topos[static_cast<std::size_t>(r)];
      REQUIRE(topo.count() == 1);
      CHECK(topo[0].extent == n);
      CHECK(topo[0].latency == doctest::Approx(ddl::cuda_peer_transport::step_latency_per_rank * n));
      CHECK(topo[0].bandwidth == doctest::Approx(ddl::cuda_peer_transport::link_bandwidth));
      CHECK(plans[static_cast<std::size_t>(r)] == plans[0]);
    }
    INFO(plans[0]);
    CHECK(plans[0].find("SLOW") == std::string::npos);
  }
}

TEST_CASE("cuda: auto prices a step at a latency per rank of the fabric, and its plans run within 10% of the best "
          "measured on an H100") {
  auto_follows(h100_messages, false, 1.10);
  auto_follows(h100_whole, true, 1.10);
  // DDL_TOPOLOGY, where set, is what the planner sees instead.
  setenv("DDL_TOPOLOGY", "2:7GB/s:3us", 1);
  ddl::cuda_peer_fabric fab(2, std::vector<int>{0, 0});
  std::vector<double> latency(2);
  fab.run([&](ddl::cuda_peer_transport& t) { latency[static_cast<std::size_t>(t.rank())] = t.topology()[0].latency; });
  unsetenv("DDL_TOPOLOGY");
  CHECK(latency[0] == doctest::Approx(3e-6));
  CHECK(latency[1] == doctest::Approx(3e-6));
}

// Rank `rank`'s random float at `i`: a hash's 24 bits times 2^-24..2^7, signed
// (varied magnitudes, so the order of additions shows in the bits).
struct random_float_fn {
  int rank;
  __host__ __device__ float operator()(std::size_t i) const {
    const std::uint64_t h = ddl_test::hash(rank, i, 99);
    const float mant = static_cast<float>(h & 0xffffff) / 16777216.0f;
    const int scale = static_cast<int>((h >> 24) % 32) - 24;
    return ((h >> 40) & 1 ? -1.0f : 1.0f) * ldexpf(mant, scale);
  }
};

template <class Strategy>
void random_floats_same_bits(const Strategy& s) {
  CAPTURE(s.describe());
  for (int n : {3, 8}) {
    CAPTURE(n);
    const std::size_t count = 300007;
    std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
    ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
    fab.run([&](ddl::cuda_peer_transport& t) {
      ddl::communicator<Strategy, ddl::cuda_peer_transport> comm(t, s);
      dvec<float> d(count);
      thrust::tabulate(thrust::cuda::par.on(t.stream()), d.begin(), d.end(), random_float_fn{t.rank()});
      comm.all_reduce(ddl::device_view(raw(d), count, 0, t.stream()), ddl::op::sum);
      DDL_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
      out[static_cast<std::size_t>(t.rank())] = download(d, count);
    });
    for (int r = 1; r < n; ++r) CHECK(same(out[static_cast<std::size_t>(r)], out[0]));
  }
}

TEST_CASE("cuda: random floats give the same bits on every rank") {
  random_floats_same_bits(ddl::ring{});
  random_floats_same_bits(ddl::one_shot{});
  random_floats_same_bits(ddl::two_shot{});
  flagged_off messages;
  random_floats_same_bits(ddl::two_shot{});
}

// Rank r's gradient i at element k: exact in every dtype, so the average
// over n ranks is exact too (sum over r of (r + 1) * m = m n (n + 1) / 2,
// m = (i + k) % 7 + 1; n + 1 even for the n used below).
template <class T>
struct grad_fn {
  int rank, tensor;
  __host__ __device__ T operator()(std::size_t k) const {
    return T(static_cast<float>((rank + 1) * static_cast<int>((static_cast<std::size_t>(tensor) + k) % 7 + 1)));
  }
};
template <class T>
struct grad_avg_fn {
  int ranks, tensor;
  __host__ __device__ T operator()(std::size_t k) const {
    return T(static_cast<float>((ranks + 1) * static_cast<int>((static_cast<std::size_t>(tensor) + k) % 7 + 1) / 2));
  }
};

TEST_CASE("cuda: asynchronous collectives and gradient buckets on device buffers, in stream order") {
  for (int n : {1, 3, 5}) {
    CAPTURE(n);
    ddl_test::failure_log log;
    ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
    fab.run([&](ddl::cuda_peer_transport& t) {
      cudaStream_t stream = nullptr;
      DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      {
        const auto on = thrust::cuda::par.on(stream);
        const int r = t.rank();
        auto check = [&](const std::string& what, const float* got, const float* want, std::size_t m) {
          const long at = first_difference(got, want, m, stream);
          if (at >= 0)
            log.add(what + " rank=" + std::to_string(r) + ": first wrong element " + std::to_string(at));
        };
        ddl::communicator<ddl::auto_strategy, ddl::cuda_peer_transport> comm(t);
        // Several in flight, a blocking call between them, waited in reverse order.
        const std::size_t count = 100003;
        std::vector<dvec<float>> bufs(4, dvec<float>(count));
        dvec<float> want(count), bcast(count);
        for (auto& b : bufs) thrust::tabulate(on, b.begin(), b.end(), input_fn<float>{ddl::op::sum, r, 0});
        thrust::tabulate(on, want.begin(), want.end(), expected_fn<float>{ddl::op::sum, n, 0});
        const int root = n - 1;
        thrust::tabulate(on, bcast.begin(), bcast.end(), input_fn<float>{ddl::op::sum, r == root ? 0 : r + 1, 0});
        auto view = [&](dvec<float>& v) { return ddl::device_view(raw(v), v.size(), 0, stream); };
        auto a = comm.all_reduce_async(view(bufs[0]), ddl::op::sum);
        auto b = comm.all_reduce_async(view(bufs[1]), ddl::op::sum);
        comm.all_reduce(view(bufs[2]), ddl::op::sum);
        auto c = comm.broadcast_async(view(bcast), root);
        auto d = comm.all_reduce_async(view(bufs[3]), ddl::op::sum);
        d.wait();
        c.wait();
        b.wait();
        a.wait();
        for (int k = 0; k < 4; ++k) check("async all_reduce " + std::to_string(k), raw(bufs[static_cast<std::size_t>(k)]), raw(want), count);
        dvec<float> bwant(count);
        thrust::tabulate(on, bwant.begin(), bwant.end(), input_fn<float>{ddl::op::sum, 0, 0});
        check("broadcast_async", raw(bcast), raw(bwant), count);

        // Gradient buckets: float and double tensors of ragged sizes, some
        // tiling one flat buffer (reduced in place), others apart (packed).
        ddl::bucket_options bo;
        bo.bucket_bytes = 64 << 10;
        bo.first_bucket_bytes = 16 << 10;
        ddl::bucketer<decltype(comm)> buckets(comm, ddl::op::avg, bo);
        const std::vector<std::size_t> sizes{3001, 17, 4096, 1, 9000, 12345, 5, 777};
        std::size_t flat_count = 0;
        for (std::size_t i = 0; i < 4; ++i) flat_count += sizes[i];
        dvec<float> flat(flat_count);
        std::vector<dvec<double>> apart;
        std::vector<std::size_t> at;
        for (std::size_t i = 0, o = 0; i < sizes.size(); ++i)
          if (i < 4) {
            at.push_back(o);
            o += sizes[i];
          } else {
            apart.emplace_back(sizes[i]);
          }
        for (std::size_t i = 0; i < sizes.size(); ++i)
          if (i < 4) buckets.add(ddl::device_view(raw(flat, at[i]), sizes[i], 0, stream));
          else buckets.add(ddl::device_view(raw(apart[i - 4]), sizes[i], 0, stream));
        bool some_in_place = false, some_packed = false;
        for (const auto& bk : buckets.layout()) (bk.in_place ? some_in_place : some_packed) = true;
        if (!some_in_place || !some_packed) log.add("expected both in-place and packed buckets");
        for (int step = 0; step < 2; ++step) {
          for (std::size_t i = 0; i < sizes.size(); ++i) {  // the "backward pass" writes gradient i, then marks it
            const int ti = static_cast<int>(i);
            if (i < 4) {
              auto first = flat.begin() + static_cast<std::ptrdiff_t>(at[i]);
              thrust::tabulate(on, first, first + static_cast<std::ptrdiff_t>(sizes[i]), grad_fn<float>{r, ti});
            } else {
              thrust::tabulate(on, apart[i - 4].begin(), apart[i - 4].end(), grad_fn<double>{r, ti});
            }
            buckets.mark_ready(i);
          }
          buckets.wait_all();
          for (std::size_t i = 0; i < sizes.size(); ++i) {
            const int ti = static_cast<int>(i);
            const std::string what = "bucketer step " + std::to_string(step) + " tensor " + std::to_string(i);
            if (i < 4) {
              dvec<float> w(sizes[i]);
              thrust::tabulate(on, w.begin(), w.end(), grad_avg_fn<float>{n, ti});
              check(what, raw(flat, at[i]), raw(w), sizes[i]);
            } else {
              dvec<double> w(sizes[i]);
              thrust::tabulate(on, w.begin(), w.end(), grad_avg_fn<double>{n, ti});
              const long bad = first_difference(raw(apart[i - 4]), raw(w), sizes[i], stream);
              if (bad >= 0) log.add(what + " rank=" + std::to_string(r) + ": first wrong element " + std::to_string(bad));
            }
          }
        }
      }
      DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
      DDL_CUDA_CHECK(cudaStreamDestroy(stream));
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
  }
}

TEST_CASE("cuda: device buffers through the staging pipeline over a host transport, and bounced whole through "
          "pinned shared host memory") {
  for (int n : {2, 3, 5}) {
    for (std::size_t bounce : {std::size_t{0}, std::size_t{1} << 30}) {
      ddl_test::failure_log log;
      const std::size_t count = 100003;
      ddl::local_fabric::run(n, [&](ddl::local_transport& lt) {
        cudaStream_t stream = nullptr;
        DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        {
          ddl::cuda::staging_device dev(0, stream);
          ddl::staging_options so;
          so.slot_bytes = 64 << 10;
          so.slots = 4;
          so.bounce_bytes = bounce;  // 0: piece by piece; else the whole buffer copied each way once
          ddl::staged_transport<ddl::local_transport, ddl::cuda::staging_device> t(lt, dev, so);
          ddl::communicator<ddl::ring, decltype(t)> comm(t);
          const auto on = thrust::cuda::par.on(stream);
          dvec<double> d(count), want(count);
          for (ddl::op o : ddl::all_ops) {
            thrust::tabulate(on, d.begin(), d.end(), input_fn<double>{o, lt.rank(), 0});
            thrust::tabulate(on, want.begin(), want.end(), expected_fn<double>{o, n, 0});
            comm.all_reduce(ddl::device_view(raw(d), count, 0, stream), o);
            const long at = first_difference(raw(d), raw(want), count, stream);
            if (at >= 0)
              log.add("staged n=" + std::to_string(n) + " bounce=" + std::to_string(bounce) + " op=" + ddl::name_of(o) +
                      " rank=" + std::to_string(lt.rank()) +
                      ": first wrong element " + std::to_string(at));
          }
        }
        DDL_CUDA_CHECK(cudaStreamDestroy(stream));
      });
      CHECK_MESSAGE(log.count() == 0, log.summary());
    }
  }
}

TEST_CASE("cuda: flagged calls (no message, one_shot and two_shot): a count or strategy one rank disagrees on is a "
          "mismatch_error on every rank at once, and the buffers are left alone") {
  // one_shot: 4 KB, through its slots; two_shot: 4 MB, any size; "mixed":
  // the last rank runs one_shot where the others run two_shot, same count.
  for (const char* kind : {"one_shot", "two_shot", "mixed"})
  for (int n : {2, 4}) {
    CAPTURE(kind);
    CAPTURE(n);
    const bool mixed = std::string(kind) == "mixed";
    const std::size_t full = std::string(kind) == "two_shot" ? 1000000 : 1000;
    std::vector<std::string> what(static_cast<std::size_t>(n));
    std::vector<long> touched(static_cast<std::size_t>(n), -1);
    ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
    try {
      fab.run([&](ddl::cuda_peer_transport& t) {
        const int r = t.rank();
        ddl::options o;
        o.timeout = std::chrono::seconds(20);
        ddl::communicator<ddl::one_shot, ddl::cuda_peer_transport> one(t, o);
        ddl::communicator<ddl::two_shot, ddl::cuda_peer_transport> two(t, o);
        dvec<float> d(full, 1.0f);
        const bool odd = r == n - 1;
        const std::size_t count = odd && !mixed ? full - 1 : full;
        try {
          const auto v = ddl::device_view(raw(d), count, 0, t.stream());
          if (std::string(kind) == "one_shot" || (mixed && odd)) one.all_reduce(v, ddl::op::sum);
          else two.all_reduce(v, ddl::op::sum);
          what[static_cast<std::size_t>(r)] = "returned normally";
        } catch (const ddl::mismatch_error& e) {
          what[static_cast<std::size_t>(r)] = e.what();
        } catch (const std::exception& e) {
          what[static_cast<std::size_t>(r)] = std::string("not a mismatch_error: ") + e.what();
        }
        DDL_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
        touched[static_cast<std::size_t>(r)] =
            static_cast<long>(thrust::count(thrust::cuda::par.on(t.stream()), d.begin(), d.end(), 1.0f));
      });
    } catch (const std::exception& e) {  // the communicator gave the group up: run() may report it
      MESSAGE(e.what());
    }
    for (int r = 0; r < n; ++r) {
      const std::string& m = what[static_cast<std::size_t>(r)];
      CAPTURE(r);
      CAPTURE(m);
      CHECK(touched[static_cast<std::size_t>(r)] == static_cast<long>(full));  // every element still 1
      CHECK(m.find("call mismatch: ") != std::string::npos);
      if (mixed) CHECK((m.find(" runs one_shot") != std::string::npos || m.find(" runs two_shot, rank " +
                                                                              std::to_string(n - 1) + " one_shot") !=
                                                                              std::string::npos));
    }
  }
}

TEST_CASE("cuda: misuse is an error naming the problem") {
  ddl::cuda_peer_fabric fab(2, {0, 0});
  fab.run([](ddl::cuda_peer_transport& t) {
    ddl::communicator<ddl::ring, ddl::cuda_peer_transport> comm(t);
    std::vector<float> host(16);
    CHECK_THROWS_WITH_AS(comm.all_reduce(ddl::host_view(host), ddl::op::sum),
                         doctest::Contains("use local_transport for host memory"), ddl::invalid_argument);
  });
  CHECK_THROWS_AS(ddl::cuda_peer_fabric(2, {0, 99}), ddl::invalid_argument);
}

TEST_CASE("cuda: a dtype, op or collective one rank disagrees on is a mismatch_error on every rank at once (call stamps)") {
  // As the host transports (test_errors.cpp): the last rank disagrees; its
  // messages carry another stamp, so no transfer combines them, and every
  // rank's call ends with the mismatch named, long before the deadline.
  for (int n : {2, 3, 4}) {
    CAPTURE(n);
    const int odd = n - 1;
    for (const char* field : {"dtype", "op", "collective"}) {
      CAPTURE(field);
      std::vector<std::string> what(static_cast<std::size_t>(n));
      ddl::options o;
      o.timeout = std::chrono::seconds(30);
      const auto start = std::chrono::steady_clock::now();
      ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
      fab.run([&](ddl::cuda_peer_transport& t) {
        ddl::communicator<ddl::ring, ddl::cuda_peer_transport> comm(t, o);
        const std::size_t count = static_cast<std::size_t>(n) * 500;
        dvec<float> f(count, 1.0f);
        dvec<std::int32_t> i(count, 1);
        const int r = t.rank();
        try {
          if (std::string(field) == "dtype" && r == odd)
            comm.all_reduce(ddl::device_view(raw(i), count, 0, t.stream()), ddl::op::sum);
          else if (std::string(field) == "op")
            comm.all_reduce(ddl::device_view(raw(f), count, 0, t.stream()), r == odd ? ddl::op::max : ddl::op::sum);
          else if (std::string(field) == "collective" && r == odd)
            comm.all_gather(ddl::device_view(static_cast<const float*>(raw(f)), 500, 0, t.stream()),
                            ddl::device_view(raw(f), count, 0, t.stream()));
          else
            comm.all_reduce(ddl::device_view(raw(f), count, 0, t.stream()), ddl::op::sum);
          DDL_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
          what[static_cast<std::size_t>(r)] = "returned normally";
        } catch (const ddl::mismatch_error& e) {
          what[static_cast<std::size_t>(r)] = e.what();
        } catch (const std::exception& e) {
          what[static_cast<std::size_t>(r)] = std::string("not a mismatch_error: ") + e.what();
        }
        (void)cudaStreamSynchronize(t.stream());
      });
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      CHECK(took < 10.0);  // at once, not at the 30 s deadline
      for (int r = 0; r < n; ++r) {
        const std::string& m = what[static_cast<std::size_t>(r)];
        CAPTURE(r);
        CAPTURE(m);
        CHECK(m.find("call mismatch: ") != std::string::npos);
        CHECK(m.find(std::string("ranks disagree on the ") + field) != std::string::npos);
        CHECK(m.find("rank " + std::to_string(odd)) != std::string::npos);
      }
    }
  }
}

int main(int argc, char** argv) {
  if (ddl::cuda::device_count() == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
