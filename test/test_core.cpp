// Core pieces: 16-bit conversions against independent references, dtype and
// op names, the block partition, and the host reduction kernels.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ios>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Nearest bfloat16 by brute force: compare the two candidates around f in
// double precision, ties to the even one. Independent of ddl's bit tricks.
std::uint16_t reference_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint16_t lo = static_cast<std::uint16_t>(u >> 16);
  const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
  // IEEE rounding treats the step past the largest finite value as 2^128
  // (an unbounded exponent), not as infinity.
  auto value = [](std::uint16_t b) {
    if ((b & 0x7f80u) == 0x7f80u) return std::ldexp((b & 0x8000u) ? -1.0 : 1.0, 128);
    return double(bits_to_float(std::uint32_t(b) << 16));
  };
  const double dl = std::fabs(value(lo) - double(f));
  const double dh = std::fabs(value(hi) - double(f));
  if ((u & 0xffffu) == 0) return lo;
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}
}  // namespace

#if defined(__FLT16_MAX__)
TEST_CASE("half: every binary16 value round-trips, and float->half rounds like the compiler's _Float16") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const ddl::half h = ddl::half::from_bits(static_cast<std::uint16_t>(b));
    _Float16 ref;
    std::memcpy(&ref, &b, 2);
    const float f = static_cast<float>(h);
    if (std::isnan(static_cast<float>(ref))) {
      CHECK(std::isnan(f));
      continue;
    }
    REQUIRE(f == static_cast<float>(ref));
    REQUIRE(ddl::half(f).bits == h.bits);
  }
  std::mt19937 gen(7);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    const float f = bits_to_float(any(gen));
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    std::uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    REQUIRE_MESSAGE(ddl::half(f).bits == rb, "f=" << f);
  }
  // Halfway cases and the overflow boundary.
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.9802322e-8f, 5.9604645e-8f, 1.0009765625f + 0.00048828125f})
    CHECK(ddl::half(f).bits == [&] { _Float16 r = (_Float16)f; std::uint16_t b; std::memcpy(&b, &r, 2); return b; }());
}
#endif

TEST_CASE_TEMPLATE("16-bit bulk conversions: the x86 paths and the element-wise code agree bit for bit, NaNs included",
                   T, ddl::half, ddl::bfloat16) {
  namespace hd = ddl::host::detail;
  const char* which = hd::have_x86_conversions<T>() ? "8-wide x86 path here, against the element-wise one"
                                                    : "no 8-wide path here: both calls run the element-wise code";
  MESSAGE(std::string(which));
  std::vector<T> h(0x10000);
  for (std::uint32_t b = 0; b < 0x10000; ++b) h[b] = T::from_bits(static_cast<std::uint16_t>(b));
  std::vector<float> fast(h.size()), portable(h.size());
  hd::widen(h.data(), fast.data(), h.size());
  hd::widen(h.data(), portable.data(), h.size(), true);
  for (std::size_t b = 0; b < h.size(); ++b) {
    REQUIRE_MESSAGE(ddl::testing::same_bits(fast[b], portable[b]), "bits " << b);
    REQUIRE(ddl::testing::same_bits(portable[b], static_cast<float>(h[b])));
  }
  // Floats: random bit patterns, and every exponent's rounding boundaries
  // (the 13 bits binary16 drops and the 16 bfloat16 drops at 0, 1,
  // half-1, half, half+1, all ones, odd kept bit + half) with NaN payloads.
  std::vector<float> f;
  std::mt19937 gen(5);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 1000003; ++i) f.push_back(bits_to_float(any(gen)));
  for (std::uint32_t e = 0; e < 256; ++e)
    for (std::uint32_t low : {0x0u, 0x1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu, 0x3000u, 0x7fffu, 0x8000u, 0x8001u,
                              0xffffu, 0x18000u})
      for (std::uint32_t high : {0x0u, 0x20000u, 0x7e0000u, 0x400000u})
        for (std::uint32_t sign : {0x0u, 0x80000000u}) f.push_back(bits_to_float(sign | (e << 23) | high | low));
  std::vector<T> nf(f.size()), np(f.size());
  hd::narrow(f.data(), nf.data(), f.size());
  hd::narrow(f.data(), np.data(), f.size(), true);
  for (std::size_t i = 0; i < f.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &f[i], 4);
    REQUIRE_MESSAGE(nf[i].bits == np[i].bits, "float bits 0x" << std::hex << u);
    REQUIRE(np[i].bits == T(f[i]).bits);
  }
}

TEST_CASE_TEMPLATE("16-bit kernels: every value against every other, every op, the bits of the element-wise steps", T,
                   ddl::half, ddl::bfloat16) {
  // a: every 16-bit pattern (NaNs, infinities, subnormals) and a tail past
  // the kernels' blocks; b and c: a shuffled. The reference is one rounding
  // per step, element by element, through the scalar conversions (checked
  // against independent references in this file). Where two NaNs meet,
  // which payload survives is the compiler's pick of operand order: a NaN
  // is required there, not its bits.
  const std::size_t n = 0x10000 + 37;
  std::vector<T> a(n), b(n), c(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = T::from_bits(static_cast<std::uint16_t>(i * 40503u));
  std::mt19937 gen(3);
  b = a;
  std::shuffle(b.begin(), b.end(), gen);
  c = a;
  std::shuffle(c.begin(), c.end(), gen);
  auto step = [](ddl::op o, T x, T y) {
    const float p = static_cast<float>(x), q = static_cast<float>(y);
    switch (o) {
      case ddl::op::prod: return T(p * q);
      case ddl::op::min: return T(q < p ? q : p);
      case ddl::op::max: return T(p < q ? q : p);
      default: return T(p + q);
    }
  };
  auto same = [](T got, T want) {
    const bool nan = std::isnan(static_cast<float>(want));
    return nan ? std::isnan(static_cast<float>(got)) : got.bits == want.bits;
  };
  for (ddl::op o : ddl::all_ops) {
    const std::string op = ddl::name_of(o);
    CAPTURE(op);
    const ddl::reduction r{ddl::dtype_of_v<T>, o};
    std::vector<T> d(n), in_a = a, in_b = b, many = b;
    ddl::host::reduce(d.data(), a.data(), b.data(), n, r);
    ddl::host::reduce(in_a.data(), in_a.data(), b.data(), n, r);
    ddl::host::reduce(in_b.data(), a.data(), in_b.data(), n, r);
    const void* src[4] = {a.data(), many.data(), c.data(), a.data()};
    ddl::host::reduce_many(many.data(), src, 4, n, r);  // into its second source; rounded after each
    for (std::size_t i = 0; i < n; ++i) {
      const T e = step(o, a[i], b[i]);
      REQUIRE_MESSAGE(same(d[i], e), "a " << a[i].bits << " b " << b[i].bits);
      REQUIRE(same(in_a[i], e));
      REQUIRE(same(in_b[i], e));
      REQUIRE_MESSAGE(same(many[i], step(o, step(o, e, c[i]), a[i])),
                      "a " << a[i].bits << " b " << b[i].bits << " c " << c[i].bits);
    }
    ddl::host::finalize(d.data(), n, r, 7);
    for (std::size_t i = 0; i < n; ++i) {
      const T e = step(o, a[i], b[i]);
      REQUIRE(same(d[i], o == ddl::op::avg ? T(static_cast<float>(e) / 7.0f) : e));
    }
  }
}

TEST_CASE("bfloat16: round to nearest even, against a brute-force reference") {
  std::mt19937 gen(11);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    const float f = bits_to_float(any(gen));
    if (std::isnan(f) || std::isinf(f)) continue;
    const std::uint16_t ref = reference_bf16(f);
    // Values that round past the largest finite bf16 become infinity.
    if ((ref & 0x7f80u) == 0x7f80u) {
      CHECK(std::isinf(static_cast<float>(ddl::bfloat16(f))));
      continue;
    }
    REQUIRE_MESSAGE(ddl::bfloat16(f).bits == ref, "f=" << f);
  }
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto x = ddl::bfloat16::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(x);
    if (std::isnan(f)) {
      CHECK(std::isnan(static_cast<float>(ddl::bfloat16(f))));
      continue;
    }
    REQUIRE(ddl::bfloat16(f).bits == b);
  }
}

TEST_CASE("host::copy: every distance between source and destination, overlapping or not, as memmove") {
  // Pieces where the destination lies 1-63 bytes past the source modulo
  // 4 KiB (apart), memmove elsewhere: the bytes memmove gives, every time.
  const std::size_t span = 3 * 4096 + 200;
  std::vector<unsigned char> init(2 * span + 8192);
  for (std::size_t i = 0; i < init.size(); ++i) init[i] = static_cast<unsigned char>(i * 131 + 7);
  std::vector<std::ptrdiff_t> distances;
  for (std::ptrdiff_t d = -70; d <= 70; ++d) distances.push_back(d);
  for (std::ptrdiff_t d : {4096 - 64, 4096 - 1, 4096, 4096 + 1, 4096 + 16, 4096 + 63, 4096 + 64, 8192 + 48})
    for (std::ptrdiff_t sign : {1, -1}) distances.push_back(sign * d);
  int wrong = 0, cases = 0;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{2047}, std::size_t{2048}, std::size_t{2049},
                            std::size_t{4099}, span}) {
    for (std::ptrdiff_t d : distances) {
      std::vector<unsigned char> got = init, want = init;
      const std::size_t src = 8192 + 256;  // past the farthest distance back (8240)
      const std::size_t dst = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(src) + d);
      ddl::host::copy(got.data() + dst, got.data() + src, bytes);
      std::memmove(want.data() + dst, want.data() + src, bytes);
      ++cases;
      if (got != want) {
        ++wrong;
        INFO("bytes " << bytes << ", destination " << d << " bytes past the source");
        CHECK(got == want);
      }
    }
  }
  CHECK(cases == 7 * 157);
  CHECK(wrong == 0);
}

TEST_CASE("host::stream_copy: the bytes memmove gives, at every alignment, size and overlap; the host table offers it") {
  // Streaming stores from 16-byte boundaries of the destination, a head and
  // a tail copied plainly, small or overlapping ranges as host::copy.
  const std::size_t most = (std::size_t{64} << 10) + 77;
  std::vector<unsigned char> init(2 * most + 256);
  for (std::size_t i = 0; i < init.size(); ++i) init[i] = static_cast<unsigned char>(i * 167 + 3);
  int wrong = 0, cases = 0;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{63}, ddl::host::stream_from - 1,
                            ddl::host::stream_from, ddl::host::stream_from + 1, std::size_t{4096 + 63}, most}) {
    for (std::size_t src = 0; src < 20; src += 3) {
      for (std::size_t dst_off : {std::size_t{0}, std::size_t{1}, std::size_t{8}, std::size_t{15}, std::size_t{16},
                                  std::size_t{47}}) {
        for (bool overlap : {false, true}) {
          const std::size_t dst = overlap ? src + dst_off : most + 64 + dst_off;
          std::vector<unsigned char> got = init, want = init;
          ddl::host::stream_copy(got.data() + dst, got.data() + src, bytes);
          std::memmove(want.data() + dst, want.data() + src, bytes);
          ++cases;
          if (got != want) {
            ++wrong;
            INFO("bytes " << bytes << ", source " << src << ", destination " << dst);
            CHECK(got == want);
          }
        }
      }
    }
  }
  CHECK(cases == 8 * 7 * 6 * 2);
  CHECK(wrong == 0);
  const ddl::memory_ops host = ddl::host_memory_ops();
  REQUIRE(static_cast<bool>(host.stream_copy));
  std::vector<unsigned char> a(10000, 7), b(10000, 0);
  host.stream_copy(nullptr, reinterpret_cast<std::byte*>(b.data()), reinterpret_cast<const std::byte*>(a.data()), a.size());
  CHECK(a == b);
}

#if DDL_HAVE_X86_DISPATCH && defined(__GNUC__) && !defined(__clang__)
TEST_CASE("x86 features: what CPUID and XGETBV say, as GCC's __builtin_cpu_supports reads them") {
  // The kernels dispatch on ddl's own reading (Clang 14 has no "f16c" for the
  // builtin); GCC's libgcc reads the same bits its own way.
  const auto& f = ddl::host::detail::x86_features::here();
  __builtin_cpu_init();
  CHECK(f.avx == bool(__builtin_cpu_supports("avx")));
  CHECK(f.f16c == (bool(__builtin_cpu_supports("f16c")) && bool(__builtin_cpu_supports("avx"))));
  CHECK(f.avx2 == bool(__builtin_cpu_supports("avx2")));
  CHECK(f.avx512f == bool(__builtin_cpu_supports("avx512f")));
  CHECK(f.avx512dq == bool(__builtin_cpu_supports("avx512dq")));
  CHECK(f.avx512bf16 == (bool(__builtin_cpu_supports("avx512bf16")) && bool(__builtin_cpu_supports("avx512f"))));
  MESSAGE("avx " << f.avx << " f16c " << f.f16c << " avx2 " << f.avx2 << " avx512f " << f.avx512f << " avx512dq "
                 << f.avx512dq << " avx512bf16 " << f.avx512bf16);
}
#endif

TEST_CASE("dtype and op names parse back, unknown names are named in the error") {
  for (ddl::dtype t : ddl::all_dtypes) CHECK(ddl::parse_dtype(ddl::name_of(t)) == t);
  for (ddl::op o : ddl::all_ops) CHECK(ddl::parse_op(ddl::name_of(o)) == o);
  CHECK(ddl::size_of(ddl::dtype::bfloat16) == 2);
  CHECK(ddl::size_of(ddl::dtype::int64) == 8);
  try {
    ddl::parse_dtype("float8");
    FAIL("no exception");
  } catch (const ddl::invalid_argument& e) {
    CHECK(std::string(e.what()).find("'float8'") != std::string::npos);
  }
  CHECK_THROWS_AS(ddl::parse_op("mean"), ddl::invalid_argument);
}

TEST_CASE("block_of partitions every count exactly, blocks differ by at most one") {
  for (int parts = 1; parts <= 33; ++parts)
    for (std::size_t count : {0ul, 1ul, 2ul, 31ul, 32ul, 33ul, 1009ul, 1048579ul}) {
      std::size_t next = 0, mn = count, mx = 0;
      for (int j = 0; j < parts; ++j) {
        const ddl::block b = ddl::block_of(count, parts, j);
        REQUIRE(b.offset == next);
        next += b.size;
        mn = std::min(mn, b.size);
        mx = std::max(mx, b.size);
      }
      CHECK(next == count);
      CHECK(mx - mn <= 1);
    }
  static_assert(ddl::block_of(10, 4, 1).offset == 3 && ddl::block_of(10, 4, 3).size == 2);
}

TEST_CASE_TEMPLATE("host reduce: every op, in place and out of place, against a scalar reference", T, std::int32_t,
                   std::int64_t, float, double, ddl::half, ddl::bfloat16) {
  using namespace ddl_test;
  const ddl::dtype dt = ddl::dtype_of_v<T>;
  for (ddl::op o : ddl::all_ops) {
    CAPTURE(ddl::name_of(o));
    const std::size_t n = 1037;
    std::vector<T> a(n), b(n), d(n), e(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t x = input_value(dt, o, 0, i), y = input_value(dt, o, 4, i);
      a[i] = to_element<T>(x);
      b[i] = to_element<T>(y);
      std::int64_t r = 0;
      switch (o) {
        case ddl::op::sum:
        case ddl::op::avg: r = x + y; break;
        case ddl::op::prod: r = x * y; break;
        case ddl::op::min: r = std::min(x, y); break;
        case ddl::op::max: r = std::max(x, y); break;
      }
      e[i] = to_element<T>(r);
    }
    ddl::host::reduce(d.data(), a.data(), b.data(), n, {dt, o});
    for (std::size_t i = 0; i < n; ++i) REQUIRE(same_bits(d[i], e[i]));
    ddl::host::reduce(a.data(), a.data(), b.data(), n, {dt, o});
    for (std::size_t i = 0; i < n; ++i) REQUIRE(same_bits(a[i], e[i]));
    // avg finalises by dividing once (integers truncate toward zero).
    ddl::host::finalize(d.data(), n, {dt, o}, 3);
    for (std::size_t i = 0; i < n; ++i) {
      using C = ddl::compute_t<T>;
      const T want = o == ddl::op::avg ? T(C(e[i]) / C(3)) : e[i];
      REQUIRE(same_bits(d[i], want));
    }
  }
}

TEST_CASE("host reduce: min and max take the first operand on ties and never touch NaN order") {
  float a[2] = {1.0f, std::numeric_limits<float>::quiet_NaN()}, b[2] = {1.0f, 2.0f}, d[2];
  ddl::host::reduce(d, a, b, 2, {ddl::dtype::float32, ddl::op::max});
  CHECK(d[0] == 1.0f);
  float e[2];
  ddl::host::reduce(e, a, b, 2, {ddl::dtype::float32, ddl::op::max});
  CHECK(std::memcmp(d, e, sizeof d) == 0);  // deterministic, NaN included
}

TEST_CASE("detail::overlaps: byte ranges that share a byte, empty ranges never") {
  std::byte a[16] = {};
  std::byte b[4] = {};
  CHECK(ddl::detail::overlaps(a, 16, a + 15, 1));
  CHECK(ddl::detail::overlaps(a + 4, 4, a, 5));
  CHECK_FALSE(ddl::detail::overlaps(a + 4, 4, a, 4));   // [0, 4) ends where [4, 8) starts
  CHECK_FALSE(ddl::detail::overlaps(a, 16, a + 16, 1));  // one past the end
  CHECK_FALSE(ddl::detail::overlaps(a, 0, a, 16));
  CHECK_FALSE(ddl::detail::overlaps(a, 16, a + 3, 0));
  CHECK_FALSE(ddl::detail::overlaps(a, 16, b, 4));  // different arrays
  CHECK(ddl::detail::overlaps(b, 4, b, 4));
}
