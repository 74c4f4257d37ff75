// memcpy of n bytes from a page-aligned source to a destination `off` bytes into a page, whole or in
// pieces of `chunk` bytes (0: one call); best of 100. Build: g++ -O2 memcpy_distance.cpp; run: ./a.out
#include <initializer_list>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
static void chunked(char* d, const char* s, size_t n, size_t c) { for (size_t o = 0; o < n; o += c) memcpy(d + o, s + o, n - o < c ? n - o : c); }
int main() {
  char* a = (char*)aligned_alloc(4096, 8 << 20); char* b = (char*)aligned_alloc(4096, 8 << 20);
  memset(a, 1, 8 << 20); memset(b, 2, 8 << 20);
  for (size_t n : {size_t(4096), size_t(16384), size_t(64 << 10), size_t(2 << 20)})
  for (int off : {1, 8, 16, 48, 63, 64, 100}) {
    for (size_t c : {size_t(0), size_t(1024), size_t(2048), size_t(4096)}) {
      char* src = a; char* dst = b + off;
      double best = 1e9;
      for (int rep = 0; rep < 100; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        if (c) chunked(dst, src, n, c); else memcpy(dst, src, n);
        auto t1 = std::chrono::steady_clock::now();
        double us = std::chrono::duration<double, std::micro>(t1 - t0).count(); if (us < best) best = us;
      }
      std::printf("n %7zu off %3d chunk %4zu: %.1f GB/s\n", n, off, c, n / best / 1e3);
    }
  }
}
