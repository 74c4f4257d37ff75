// What a write to lines another core has just read costs: two threads; A copies BYTES of its own
// (just written) data into X after B has read X (every line of it: X's lines then sit in B's cache)
// or after B read another buffer Y; with cached stores (memcpy) and with streaming stores (NT=1).
//   g++ -std=c++17 -O2 -mavx2 coherence.cpp -o coherence -pthread && ./coherence 262144
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

static void stream_copy(char* d, const char* s, std::size_t n) {  // d 32-byte aligned, n a multiple of 32
  for (std::size_t i = 0; i < n; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
  _mm_sfence();
}

int main(int argc, char** argv) {
  const std::size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (256u << 10);
  const bool nt = std::getenv("NT") != nullptr;
  const int rounds = 2000;
  auto alloc = [&](int v) {
    auto* p = static_cast<char*>(std::aligned_alloc(4096, bytes));
    std::memset(p, v, bytes);
    return p;
  };
  char *src = alloc(1), *x = alloc(2), *y = alloc(3);
  std::atomic<int> turn{0};
  auto wait_for = [&](int v) { while (turn.load(std::memory_order_acquire) != v) {} };
  volatile long sink = 0;
  for (int peer_reads_x : {1, 0, 1, 0}) {
    std::vector<double> ts;
    turn = 0;
    std::thread b([&] {
      for (int k = 0; k < rounds; ++k) {
        wait_for(4 * k + 1);
        const long* p = reinterpret_cast<const long*>(peer_reads_x ? x : y);
        long s = 0;
        for (std::size_t i = 0; i < bytes / 8; i += 8) s += p[i];  // one load a cache line
        sink = sink + s;
        turn.store(4 * k + 2, std::memory_order_release);
      }
    });
    for (int k = 0; k < rounds; ++k) {
      std::memset(src, k, bytes);  // the source in A's cache, as a just-written input
      turn.store(4 * k + 1, std::memory_order_release);
      wait_for(4 * k + 2);
      const auto t0 = std::chrono::steady_clock::now();
      if (nt) stream_copy(x, src, bytes);
      else std::memcpy(x, src, bytes);
      ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      turn.store(4 * k + 4, std::memory_order_release);
    }
    b.join();
    std::sort(ts.begin(), ts.end());
    std::printf("%zu B, %s stores, the peer read %s before: copy median %.1f us (p10 %.1f, p90 %.1f)\n", bytes,
                nt ? "streaming" : "cached", peer_reads_x ? "the destination" : "another buffer",
                ts[ts.size() / 2] * 1e6, ts[ts.size() / 10] * 1e6, ts[ts.size() * 9 / 10] * 1e6);
  }
}
