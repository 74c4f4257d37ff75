// host::reduce (float sum) with the destination (mode 0), an in-place source (mode 1) or the second
// source (mode 2) 0-2048 bytes off the other operands page offset: GB/s = bytes / best of 30.
//   g++ -std=c++17 -O3 -I include reduce_offsets.cpp -o /tmp/ro -pthread && /tmp/ro > reduce_offsets.txt
#include <ddl.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
int main() {
  const std::size_t maxb = 4 << 20;
  auto* A = static_cast<std::byte*>(std::aligned_alloc(4096, maxb + 8192));
  auto* B = static_cast<std::byte*>(std::aligned_alloc(4096, maxb + 8192));
  auto* D = static_cast<std::byte*>(std::aligned_alloc(4096, maxb + 8192));
  std::memset(A, 0, maxb + 8192); std::memset(B, 0, maxb + 8192); std::memset(D, 0, maxb + 8192);
  ddl::reduction r{ddl::dtype::float32, ddl::op::sum};
  for (std::size_t bytes : {std::size_t(16384), std::size_t(65536), std::size_t(1) << 20}) {
    for (int off : {0, 16, 32, 48, 64, 128, 512, 2048}) {
      for (int mode = 0; mode < 3; ++mode) {
        // mode 0: d = a + b (d offset); mode 1: in place d = d + a (a offset); mode 2: b offset only
        std::byte* d = D + (mode == 0 ? off : 0);
        const std::byte* a = (mode == 1) ? A + off : A;
        const std::byte* b = (mode == 2) ? B + off : B;
        if (mode == 1) { d = D; b = D; }
        const std::size_t count = bytes / 4;
        double best = 1e9;
        for (int rep = 0; rep < 30; ++rep) {
          auto t0 = std::chrono::steady_clock::now();
          for (int k = 0; k < 10; ++k) ddl::host::reduce(d, a, b, count, r);
          double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 10;
          if (t < best) best = t;
        }
        std::printf("%8zu off %4d mode %d: %7.2f GB/s (bytes/time)\n", bytes, off, mode, bytes / best / 1e9);
      }
    }
  }
}
