// Sums 3 ranks' gradients and checks the result: exits non-zero if wrong.
#include <ddl.hpp>

#include <atomic>
#include <cstdio>
#include <vector>

int main() {
  std::atomic<int> wrong{0};
  ddl::local_fabric::run(3, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
    std::vector<double> g(101, t.rank() + 1.0);
    comm.all_reduce(ddl::host_view(g), ddl::op::sum);
    for (double v : g) wrong += v != 6.0;
  });
  std::printf("consumer: %d wrong\n", wrong.load());
  return wrong.load() == 0 ? 0 : 1;
}
