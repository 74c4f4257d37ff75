#pragma once
// Shared helpers for the ddl test suites: integer-valued, index-dependent
// inputs whose reductions are exact in every dtype (host and device code: the
// CUDA tests fill and check device buffers with them through Thrust), a
// thread barrier, and a failure log that worker threads fill and the test
// thread asserts on.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ddl.hpp>

namespace ddl_test {

DDL_HOST_DEVICE inline std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

DDL_HOST_DEVICE inline std::uint64_t hash(int rank, std::size_t index, std::uint64_t salt = 0) {
  return mix(mix(static_cast<std::uint64_t>(rank) * 0x100000001b3ull + salt) ^ index);
}

// Largest |value| per rank such that a sum over 32 ranks stays an exactly
// representable integer at every partial step (bf16: 8 mantissa bits -> 256;
// half: 11 bits -> 2048; the rest have room to spare).
DDL_HOST_DEVICE inline std::int64_t magnitude(ddl::dtype t) {
  switch (t) {
    case ddl::dtype::bfloat16: return 8;
    case ddl::dtype::float16: return 63;
    default: return 100000;
  }
}

// Input of `rank` at element `index` for op `o`, as an exact integer.
// prod: +-1 mostly, +-2 only on ranks divisible by 4 (|product| <= 2^8 for
// 32 ranks), so products stay exact and never overflow int32.
DDL_HOST_DEVICE inline std::int64_t input_value(ddl::dtype t, ddl::op o, int rank, std::size_t index) {
  const std::uint64_t h = hash(rank, index, static_cast<std::uint64_t>(o) + 1);
  if (o == ddl::op::prod) {
    const std::int64_t mag = (rank % 4 == 0 && (h & 1)) ? 2 : 1;
    return (h >> 1) & 1 ? -mag : mag;
  }
  const std::int64_t m = magnitude(t);
  return static_cast<std::int64_t>(h % static_cast<std::uint64_t>(2 * m + 1)) - m;
}

template <class T>
DDL_HOST_DEVICE T to_element(std::int64_t v) {
  if constexpr (std::is_same_v<T, ddl::half> || std::is_same_v<T, ddl::bfloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// Exact reduction of the inputs of `ranks` ranks at `index`, in T (avg
// divided once at the end, as the op defines it).
template <class T>
DDL_HOST_DEVICE T expected_value(ddl::op o, int ranks, std::size_t index) {
  const ddl::dtype t = ddl::dtype_of_v<T>;
  std::int64_t acc = input_value(t, o, 0, index);
  for (int r = 1; r < ranks; ++r) {
    const std::int64_t v = input_value(t, o, r, index);
    switch (o) {
      case ddl::op::sum:
      case ddl::op::avg: acc += v; break;
      case ddl::op::prod: acc *= v; break;
      case ddl::op::min: acc = v < acc ? v : acc; break;
      case ddl::op::max: acc = v > acc ? v : acc; break;
    }
  }
  T e = to_element<T>(acc);
  if (o == ddl::op::avg) {
    using C = ddl::compute_t<T>;
    e = T(C(e) / C(ranks));
  }
  return e;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Sentinel byte for outputs: 0xA5A5... is no integer in any dtype and far
// from every expected value, so an element never written shows up.
constexpr unsigned char sentinel = 0xA5;

// A reusable barrier for the rank threads of one test (yields while waiting).
class thread_barrier {
 public:
  explicit thread_barrier(int n) : n_(n) {}
  void arrive_and_wait() {
    const int gen = generation_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
    } else {
      while (generation_.load(std::memory_order_acquire) == gen) std::this_thread::yield();
    }
  }

 private:
  int n_;
  std::atomic<int> count_{0};
  std::atomic<int> generation_{0};
};

// Failures found by worker threads; the test thread asserts it is empty.
class failure_log {
 public:
  void add(std::string msg) {
    std::lock_guard<std::mutex> lock(m_);
    if (msgs_.size() < 20) msgs_.push_back(std::move(msg));
    ++count_;
  }
  std::size_t count() const { return count_; }
  std::string summary() const {
    std::string s;
    for (const auto& m : msgs_) s += m + "\n";
    return s;
  }

 private:
  std::mutex m_;
  std::vector<std::string> msgs_;
  std::size_t count_ = 0;
};

}  // namespace ddl_test
