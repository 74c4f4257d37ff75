// The CUDA back-end on a real GPU: device reductions against the host
// kernels (bit for bit), every collective over cuda_peer_transport with 1-8
// ranks on one GPU, and device buffers through the staging pipeline.
// Without a device it reports "skipped: no CUDA device" and exits 77, which
// CTest shows as skipped (never as a pass).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <random>
#include <vector>

#include <ddl/cuda.hpp>

#include "../support.hpp"

namespace {

template <class T>
struct device_buffer {
  explicit device_buffer(std::size_t n) : count(n) {
    DDL_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T) + 64));
  }
  ~device_buffer() { (void)cudaFree(ptr); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  T* get(std::size_t offset = 0) const { return static_cast<T*>(ptr) + offset; }
  // cudaMemcpy from pageable memory may return before the DMA lands, and a
  // non-blocking stream does not wait for it: finish the copy here, so a
  // collective on any stream reads the uploaded data.
  void upload(const std::vector<T>& v, std::size_t offset = 0) const {
    DDL_CUDA_CHECK(cudaMemcpy(get(offset), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    DDL_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download(std::size_t n, std::size_t offset = 0) const {
    std::vector<T> v(n);
    DDL_CUDA_CHECK(cudaMemcpy(v.data(), get(offset), n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  void* ptr = nullptr;
  std::size_t count;
};

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Exact-integer inputs of `rank` for op `o` (the suite's shared pattern).
template <class T>
std::vector<T> inputs(ddl::op o, int rank, std::size_t count) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = ddl_test::to_element<T>(ddl_test::input_value(ddl::dtype_of_v<T>, o, rank, i));
  return v;
}
template <class T>
std::vector<T> expected(ddl::op o, int ranks, std::size_t count) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = ddl_test::expected_value<T>(o, ranks, i);
  return v;
}

}  // namespace

TEST_CASE("cuda: device reductions equal the host kernels bit for bit, aligned or not, in place or not") {
  std::mt19937 gen(7);
  std::normal_distribution<double> dist(0.0, 100.0);
  for (ddl::dtype dt : ddl::all_dtypes)
    for (ddl::op o : ddl::all_ops)
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000003}})
        for (std::size_t off : {std::size_t{0}, std::size_t{1}})
          ddl::visit_dtype(dt, [&](auto tag) {
            using T = decltype(tag);
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
            device_buffer<T> da(count + 1), db(count + 1), dc(count + 1);
            da.upload(a, off);
            db.upload(b, off);
            ddl::cuda::reduce(dc.get(off), da.get(off), db.get(off), count, r, nullptr);
            ddl::cuda::finalize(dc.get(off), count, r, 3, nullptr);
            CHECK(same(dc.download(count, off), want));
            ddl::cuda::reduce(da.get(off), da.get(off), db.get(off), count, r, nullptr);  // dst == a
            ddl::cuda::finalize(da.get(off), count, r, 3, nullptr);
            CHECK(same(da.download(count, off), want));
            da.upload(a, off);
            ddl::cuda::reduce(db.get(off), da.get(off), db.get(off), count, r, nullptr);  // dst == b
            ddl::cuda::finalize(db.get(off), count, r, 3, nullptr);
            CHECK(same(db.download(count, off), want));
          });
}

template <class Strategy>
void peer_collectives(int n, const Strategy& s, ddl_test::failure_log& log) {
  const std::vector<std::size_t> counts{0, 1, static_cast<std::size_t>(n) + 1, 1009, (std::size_t{1} << 20) + 3};
  ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));  // every rank on GPU 0
  fab.run([&](ddl::cuda_peer_transport& t) {
    cudaStream_t stream = nullptr;
    DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ddl::communicator<Strategy, ddl::cuda_peer_transport> comm(t, s);
    const int r = t.rank();
    for (ddl::dtype dt : ddl::all_dtypes)
      ddl::visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        for (std::size_t count : counts)
          for (ddl::op o : ddl::all_ops) {
            auto where = [&](const char* what) {
              return s.describe() + " " + what + " n=" + std::to_string(n) + " rank=" + std::to_string(r) +
                     " dtype=" + ddl::name_of(dt) + " op=" + ddl::name_of(o) + " count=" + std::to_string(count);
            };
            const auto in = inputs<T>(o, r, count);
            const auto want = expected<T>(o, n, count);
            device_buffer<T> din(count), dout(count);
            din.upload(in);
            comm.all_reduce(ddl::device_view(static_cast<const T*>(din.get()), count, 0, stream),
                            ddl::device_view(dout.get(), count, 0, stream), o);
            DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
            if (!same(dout.download(count), want)) log.add(where("all_reduce out-of-place"));
            if (!same(din.download(count), in)) log.add(where("all_reduce modified its input"));
            comm.all_reduce(ddl::device_view(din.get(), count, 0, stream), o);
            DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
            if (!same(din.download(count), want)) log.add(where("all_reduce in-place"));
            const ddl::block mine = ddl::block_of(count, n, r);
            din.upload(in);
            comm.reduce_scatter(ddl::device_view(static_cast<const T*>(din.get()), count, 0, stream),
                                ddl::device_view(dout.get(), mine.size, 0, stream), o);
            DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
            const std::vector<T> block_want(want.begin() + static_cast<std::ptrdiff_t>(mine.offset),
                                            want.begin() + static_cast<std::ptrdiff_t>(mine.offset + mine.size));
            if (!same(dout.download(mine.size), block_want)) log.add(where("reduce_scatter"));
            // all_gather: every rank contributes its block of the expected result.
            device_buffer<T> dblock(mine.size);
            dblock.upload(block_want);
            comm.all_gather(ddl::device_view(static_cast<const T*>(dblock.get()), mine.size, 0, stream),
                            ddl::device_view(dout.get(), count, 0, stream));
            DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
            if (!same(dout.download(count), want)) log.add(where("all_gather"));
          }
      });
    DDL_CUDA_CHECK(cudaStreamDestroy(stream));
  });
}

TEST_CASE("cuda: every collective over cuda_peer_transport, 1-8 ranks on one GPU, every dtype and op") {
  ddl_test::failure_log log;
  for (int n = 1; n <= 8; ++n) {
    peer_collectives(n, ddl::ring{}, log);
    peer_collectives(n, ddl::halving_doubling{}, log);
    peer_collectives(n, ddl::recursive_doubling{}, log);
  }
  peer_collectives(6, ddl::multi_ring<ddl::dynamic_extents>({2, 3}, {1, 0}), log);
  peer_collectives(8, ddl::auto_strategy(ddl::topology::parse("2:200GB/s:10us,4:100GB/s:10us")), log);
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

TEST_CASE("cuda: random floats give the same bits on every rank") {
  for (int n : {3, 8}) {
    const std::size_t count = 300007;
    std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
    ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
    fab.run([&](ddl::cuda_peer_transport& t) {
      ddl::communicator<ddl::ring, ddl::cuda_peer_transport> comm(t);
      std::mt19937 gen(11u + static_cast<unsigned>(t.rank()));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> h(count);
      for (auto& v : h) v = dist(gen);
      device_buffer<float> d(count);
      d.upload(h);
      comm.all_reduce(ddl::device_view(d.get(), count, 0, t.stream()), ddl::op::sum);
      DDL_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
      out[static_cast<std::size_t>(t.rank())] = d.download(count);
    });
    for (int r = 1; r < n; ++r) CHECK(same(out[static_cast<std::size_t>(r)], out[0]));
  }
}

TEST_CASE("cuda: device buffers through the staging pipeline over a host transport") {
  for (int n : {2, 3, 5}) {
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
        ddl::staged_transport<ddl::local_transport, ddl::cuda::staging_device> t(lt, dev, so);
        ddl::communicator<ddl::ring, decltype(t)> comm(t);
        for (ddl::op o : ddl::all_ops) {
          const auto in = inputs<double>(o, lt.rank(), count);
          device_buffer<double> d(count);
          d.upload(in);
          comm.all_reduce(ddl::device_view(d.get(), count, 0, stream), o);
          DDL_CUDA_CHECK(cudaStreamSynchronize(stream));
          if (!same(d.download(count), expected<double>(o, n, count)))
            log.add("staged n=" + std::to_string(n) + " op=" + ddl::name_of(o) + " rank=" + std::to_string(lt.rank()));
        }
      }
      DDL_CUDA_CHECK(cudaStreamDestroy(stream));
    });
    CHECK_MESSAGE(log.count() == 0, log.summary());
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

int main(int argc, char** argv) {
  if (ddl::cuda::device_count() == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
