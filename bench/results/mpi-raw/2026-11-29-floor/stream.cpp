// Memory streaming rates of this machine, 1 or 2 threads at once (each its
// own buffers): memcpy (read S + write S) and c = a + b over floats (read 2S
// + write S), best of 8, bytes of traffic per second.
//   g++ -O3 -march=native -pthread stream.cpp -o stream && ./stream MiB THREADS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
int main(int argc, char** argv) {
  const size_t n = (argc > 1 ? atol(argv[1]) : 128) << 20;
  const int th = argc > 2 ? atoi(argv[2]) : 1;
  auto run = [&](double* out) {
    std::vector<float> a(n / 4, 1.f), b(n / 4, 2.f), c(n / 4, 0.f);
    auto best = [](auto f) {
      double b = 1e9;
      for (int r = 0; r < 8; r++) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return b;
    };
    out[0] = 2.0 * n / best([&] { std::memcpy(c.data(), a.data(), n); }) / 1e9;
    out[1] = 3.0 * n / best([&] {
      const float *A = a.data(), *B = b.data();
      float* C = c.data();
      for (size_t i = 0; i < n / 4; i++) C[i] = A[i] + B[i];
    }) / 1e9;
  };
  std::vector<std::thread> ts;
  std::vector<double> o(2 * th);
  for (int i = 0; i < th; i++) ts.emplace_back(run, &o[2 * i]);
  for (auto& t : ts) t.join();
  for (int i = 0; i < th; i++)
    std::printf("%zu MiB, thread %d of %d: memcpy %.1f GB/s (read + write), add %.1f GB/s (2 reads + write)\n", n >> 20, i,
                th, o[2 * i], o[2 * i + 1]);
}
