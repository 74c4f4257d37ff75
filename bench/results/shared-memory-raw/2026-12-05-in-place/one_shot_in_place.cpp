// one_shot over 2 threads, in place against out of place: 2000 calls of BYTES, each after the rank
// wrote its buffer afresh (as ddl-bench does); the median call time per rank, and rank 0's median
// time to write its buffer before the call (untimed in ddl-bench: out of place the input the peer
// read in the last call, in place the buffer the call itself last wrote).
//   g++ -std=c++17 -O3 -DNDEBUG -I include one_shot_in_place.cpp -o one_shot_in_place -pthread
//   ./one_shot_in_place BYTES 0|1 [one_shot|recursive_doubling]
#include <ddl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const std::size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (256u << 10);
  const bool in_place = argc > 2 && argv[2][0] == '1';
  const bool doubling = argc > 3 && std::strcmp(argv[3], "recursive_doubling") == 0;
  const int calls = 2000;
  const std::size_t count = bytes / 4;
  std::vector<double> times[2], fills[2];
  ddl::local_fabric::run(2, [&](ddl::local_transport& t) {
    auto body = [&](auto& comm) {
      std::vector<float> in(count), out(count);
      std::vector<double> ts, fs;
      for (int k = 0; k < calls; ++k) {
        float* buf = in_place ? out.data() : in.data();
        const auto f0 = std::chrono::steady_clock::now();
        std::fill(buf, buf + count, static_cast<float>(k % 7 + t.rank()));
        const auto t0 = std::chrono::steady_clock::now();
        fs.push_back(std::chrono::duration<double>(t0 - f0).count());
        if (in_place) comm.all_reduce(ddl::host_view(out), ddl::op::sum);
        else comm.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), ddl::op::sum);
        ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      times[t.rank()] = ts;
      fills[t.rank()] = fs;
    };
    if (doubling) {
      ddl::communicator<ddl::recursive_doubling, ddl::local_transport> comm(t);
      body(comm);
    } else {
      ddl::communicator<ddl::one_shot, ddl::local_transport> comm(t);
      body(comm);
    }
  });
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2] * 1e6;
  };
  for (int r = 0; r < 2; ++r)
    std::printf("%zu B %s %s, rank %d: median %.1f us, writing the buffer before it %.1f us\n", bytes,
                doubling ? "recursive_doubling" : "one_shot", in_place ? "in place" : "out of place", r,
                median(times[r]), median(fills[r]));
}
