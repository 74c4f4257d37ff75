// Sums 3 ranks' gradients and checks the result: exits non-zero if wrong.
// Then the same in the simulator, and 16-bit gradients (the x86 kernels'
// dispatch), so every compiler the suite builds this with compiles those too.
#include <ddl.hpp>
#include <ddl/sim.hpp>
#ifdef DDL_CONSUMER_UCX
#include <ddl/ucx.hpp>

#include <stdlib.h>
#include <thread>
#endif

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
    std::vector<ddl::half> h(37, ddl::half(t.rank() + 0.5f));
    comm.all_reduce(ddl::host_view(h), ddl::op::sum);
    for (ddl::half v : h) wrong += static_cast<float>(v) != 4.5f;
  });
  ddl::sim_fabric sim(ddl::topology::parse("2:20GB/s:3us,3:10GB/s:5us"), {false});
  sim.run([&](ddl::sim_transport& t) {
    ddl::communicator<ddl::auto_strategy, ddl::sim_transport> comm(t);
    std::vector<float> g(1001, static_cast<float>(t.rank()));
    comm.all_reduce(ddl::host_view(g), ddl::op::sum);
    for (float v : g) wrong += v != 15.0f;
  });
#ifdef DDL_CONSUMER_UCX
  // COMPONENTS ucx: two ranks over UCX, threads of this process meeting in a fresh directory.
  char dir[] = "/tmp/ddl-consumer-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      ddl::ucx_transport t(ddl::file_store(dir), r, 2, std::chrono::seconds(60), "consumer");
      ddl::communicator<ddl::ring, ddl::ucx_transport> comm(t);
      std::vector<double> g(4099, r + 1.0);
      comm.all_reduce(ddl::host_view(g), ddl::op::sum);
      for (double v : g) wrong += v != 3.0;
    });
  for (auto& th : ranks) th.join();
#endif
  std::printf("consumer: %d wrong\n", wrong.load());
  return wrong.load() == 0 ? 0 : 1;
}
