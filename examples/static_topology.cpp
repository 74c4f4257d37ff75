// A topology known at compile time: the planner runs in the compiler, and the
// strategy it picks is a type. Here the paper's cluster shape, scaled down to
// 2 GPUs x 2 nodes x 2 racks so it runs as 8 threads: NVLink-like links
// inside a node, slower ones between nodes and racks.
#include <ddl.hpp>

#include <atomic>
#include <cstdio>
#include <type_traits>
#include <vector>

//                                     extent, bytes/s,        latency ns
using cluster = ddl::static_topology<ddl::level_c<2, 20'000'000'000, 3'000>,   // GPUs in a node
                                     ddl::level_c<2, 10'000'000'000, 5'000>,   // nodes in a rack
                                     ddl::level_c<2, 1'000'000'000, 20'000>>;  // racks
static_assert(cluster::size == 8);

// The planner's choice for 4 KiB and for 64 MiB, as types and as plans.
using small_plan = ddl::plan_t<cluster, 4096>;
using large_plan = ddl::plan_t<cluster, (64u << 20)>;
static_assert(!std::is_same_v<small_plan, large_plan>, "latency- and bandwidth-bound sizes take different strategies");
constexpr ddl::plan large = ddl::plan_v<cluster, (64u << 20)>;

int main() {
  std::printf("4 KiB  -> %s\n64 MiB -> %s, predicted %.3f ms\n\n", small_plan::name, large_plan::name,
              large.seconds * 1e3);
  std::printf("%s\n", ddl::explain(ddl::topology(cluster{}), 64.0 * (1 << 20)).c_str());

  std::atomic<int> wrong{0};  // every rank is a thread: count with an atomic
  ddl::local_fabric::run(cluster::size, [&](ddl::local_transport& t) {
    // The strategy is a type: no planner runs here.
    ddl::communicator<large_plan, ddl::local_transport> comm(t);
    std::vector<float> grads(1 << 20, static_cast<float>(t.rank()));
    comm.all_reduce(ddl::host_view(grads), ddl::op::sum);
    int bad = 0;
    for (float g : grads) bad += g != 28.0f;  // 0 + 1 + ... + 7
    wrong += bad;
  });
  std::printf("static plan all-reduce over %d ranks: %d wrong\n", cluster::size, wrong.load());
  return wrong ? 1 : 0;
}
