#pragma once
// What the GPU tests (test_cuda.cu, test_cuda_mpi.cu) check device results
// with: thrust device vectors, the suite's exact-integer inputs and expected
// results computed on the device (thrust::tabulate), and bit-for-bit
// comparison there (thrust::mismatch).
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/mismatch.h>
#include <thrust/tabulate.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include <ddl/core/buffer.hpp>
#include <ddl/core/dtype.hpp>
#include <ddl/core/op.hpp>
#include <ddl/strategy/partition.hpp>

#include "../support.hpp"

namespace {

template <class T>
using dvec = thrust::device_vector<T>;

template <class T>
T* raw(dvec<T>& v, std::size_t offset = 0) {
  return thrust::raw_pointer_cast(v.data()) + offset;
}

// The suite's exact-integer input of `rank`, and the exact reduction over
// `ranks`, as device functors for thrust::tabulate (offset: first index).
template <class T>
struct input_fn {
  ddl::op o;
  int rank;
  std::size_t first;
  __host__ __device__ T operator()(std::size_t i) const {
    return ddl_test::to_element<T>(ddl_test::input_value(ddl::dtype_of_v<T>, o, rank, first + i));
  }
};
template <class T>
struct expected_fn {
  ddl::op o;
  int ranks;
  std::size_t first;
  __host__ __device__ T operator()(std::size_t i) const { return ddl_test::expected_value<T>(o, ranks, first + i); }
};

// Equal bits (NaN payloads and signed zeros included).
template <class T>
struct same_bits_fn {
  __host__ __device__ bool operator()(const T& a, const T& b) const {
    unsigned char x[sizeof(T)], y[sizeof(T)];
    memcpy(x, &a, sizeof(T));
    memcpy(y, &b, sizeof(T));
    for (std::size_t k = 0; k < sizeof(T); ++k)
      if (x[k] != y[k]) return false;
    return true;
  }
};

// -1 when the first `n` elements of `got` and `want` have the same bits, else
// the first index that differs; on `stream`, compared on the device.
template <class T>
long first_difference(const T* got, const T* want, std::size_t n, cudaStream_t stream) {
  const auto p = thrust::mismatch(thrust::cuda::par.on(stream), got, got + n, want, same_bits_fn<T>{});
  return p.first == got + n ? -1 : static_cast<long>(p.first - got);
}

// Every dtype, op and count of `counts` through all_reduce (in place and
// out of place, the input left as it was), reduce_scatter and all_gather of
// `comm` (this rank `r` of `n`, buffers on device `dev`, work on `stream`),
// each result compared on the device with the exact one; failures named in
// `log` after `what`.
template <class Comm>
void device_collectives(Comm& comm, const std::string& what, int n, int r, int dev,
                        const std::vector<std::size_t>& counts, cudaStream_t stream, ddl_test::failure_log& log) {
  const auto on = thrust::cuda::par.on(stream);
  for (ddl::dtype dt : ddl::all_dtypes)
    ddl::visit_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t count : counts)
        for (ddl::op o : ddl::all_ops) {
          auto check = [&](const char* step, const T* got, const T* want, std::size_t m) {
            const long at = first_difference(got, want, m, stream);
            if (at >= 0)
              log.add(what + " " + step + " n=" + std::to_string(n) + " rank=" + std::to_string(r) +
                      " dtype=" + ddl::name_of(dt) + " op=" + ddl::name_of(o) + " count=" + std::to_string(count) +
                      ": first wrong element " + std::to_string(at));
          };
          dvec<T> in(count), din(count), dout(count), want(count);
          thrust::tabulate(on, in.begin(), in.end(), input_fn<T>{o, r, 0});
          thrust::tabulate(on, want.begin(), want.end(), expected_fn<T>{o, n, 0});
          thrust::copy(on, in.begin(), in.end(), din.begin());
          comm.all_reduce(ddl::device_view(static_cast<const T*>(raw(din)), count, dev, stream),
                          ddl::device_view(raw(dout), count, dev, stream), o);
          check("all_reduce out-of-place", raw(dout), raw(want), count);
          check("all_reduce modified its input", raw(din), raw(in), count);
          comm.all_reduce(ddl::device_view(raw(din), count, dev, stream), o);
          check("all_reduce in-place", raw(din), raw(want), count);
          const ddl::block mine = ddl::block_of(count, n, r);
          thrust::copy(on, in.begin(), in.end(), din.begin());
          comm.reduce_scatter(ddl::device_view(static_cast<const T*>(raw(din)), count, dev, stream),
                              ddl::device_view(raw(dout), mine.size, dev, stream), o);
          check("reduce_scatter", raw(dout), raw(want, mine.offset), mine.size);
          // all_gather: every rank contributes its block of the expected result.
          dvec<T> dblock(mine.size);
          thrust::tabulate(on, dblock.begin(), dblock.end(), expected_fn<T>{o, n, mine.offset});
          comm.all_gather(ddl::device_view(static_cast<const T*>(raw(dblock)), mine.size, dev, stream),
                          ddl::device_view(raw(dout), count, dev, stream));
          check("all_gather", raw(dout), raw(want), count);
        }
    });
}

}  // namespace
