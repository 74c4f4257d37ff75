#include <ddl.hpp>
#include <chrono>
#include <cstdio>
#include <vector>
using namespace ddl;
template <class T> void run(dtype dt, const char* name, size_t n) {
  std::vector<std::vector<T>> s(4, std::vector<T>(n)); std::vector<T> d(n);
  for (auto& v : s) for (size_t i = 0; i < n; ++i) v[i] = T(float(i % 100));
  const void* src[4] = {s[0].data(), s[1].data(), s[2].data(), s[3].data()};
  reduction r{dt, op::sum};
  double best = 1e9, best2 = 1e9;
  for (int it = 0; it < 50; ++it) {
    auto t0 = std::chrono::steady_clock::now();
    host::reduce_many(d.data(), src, 4, n, r);
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    t0 = std::chrono::steady_clock::now();
    host::reduce(d.data(), s[0].data(), s[1].data(), n, r);
    best2 = std::min(best2, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  printf("%s n=%zu reduce_many(4) %.1f us (%.2f ns/elem) reduce %.1f us\n", name, n, best, best * 1e3 / n, best2);
}
int main() { for (size_t n : {32768ul, 1ul << 20}) { run<float>(dtype::float32, "float", n); run<half>(dtype::float16, "half", n); run<bfloat16>(dtype::bfloat16, "bf16", n); } }
