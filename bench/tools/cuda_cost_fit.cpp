// Which link costs make `auto` follow the measured best strategy on a GPU:
// reads gpu_checks.sh's per-strategy sweeps (allreduce-{ring,recursive_doubling,
// halving_doubling,one_shot,two_shot}.txt), asks the real planner for its
// in-place plan at every (ranks, size) under each candidate cost set, and
// scores the measured time of that plan against the best measured there.
// One line per cost set, best first: the worst ratio and the geometric mean.
//
//   build/dev/bench/ddl-cuda-cost-fit bench/results/gpu-raw/h100-2026-11-27/run2/medians | head
//   build/dev/bench/ddl-cuda-cost-fit --messages bench/results/gpu-raw/h100-2026-11-26/run1 | head
//
// A point where not every strategy was measured scores against the best of
// those that were; a plan for one that was not is counted, not scored.
//
// Cost sets: a step latency flat or per rank (5-25 us), a bandwidth flat or
// shared by the ranks (0.2-3 TB/s), the direct strategies' read factor 1-6,
// a flagged call's meeting in step latencies (`flagged_latency`, 0.4-1);
// priced as `cuda_peer_transport` is (peer memory, one_shot's flagged calls
// up to 64 KiB as one round, two_shot run whole: `flagged_two_shot`, so its
// file holds that call's times; `--messages`: runs before it, or with
// DDL_CUDA_FLAGGED=0, where two_shot went by messages). bench/results/
// gpu-h100.md has the outcome.
#include <ddl/strategy/planner.hpp>
#include <ddl/topology/topology.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

const char* const algos[] = {"ring", "recursive_doubling", "halving_doubling", "one_shot", "two_shot"};

// The measured row a plan runs as on one level.
int row_of(const ddl::plan& p) {
  switch (p.algo) {
    case ddl::algorithm::multi_ring: return p.direct_first ? 4 : 0;
    case ddl::algorithm::recursive_doubling: return 1;
    case ddl::algorithm::halving_doubling: return 2;
    case ddl::algorithm::one_shot: return 3;
    case ddl::algorithm::two_shot: return 4;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool messages = argc == 3 && std::string(argv[1]) == "--messages";
  if (argc != 2 && !messages) {
    std::fprintf(stderr, "usage: %s [--messages] DIR (with gpu_checks.sh's allreduce-<strategy>.txt)\n", argv[0]);
    return 2;
  }
  const char* dir = argv[argc - 1];
  // us[(ranks, bytes)][row]
  std::map<std::pair<int, long>, std::vector<double>> us;
  for (int a = 0; a < 5; ++a) {
    std::ifstream f(std::string(dir) + "/allreduce-" + algos[a] + ".txt");
    if (!f) {
      std::fprintf(stderr, "cuda_cost_fit: no allreduce-%s.txt in %s\n", algos[a], dir);
      return 2;
    }
    for (std::string line; std::getline(f, line);) {
      std::istringstream in(line);
      int n = 0;
      long bytes = 0;
      double t = 0;
      if (line.empty() || line[0] == '#' || line[0] == '=' || !(in >> n >> bytes >> t)) continue;
      auto& v = us[{n, bytes}];
      v.resize(5, NAN);
      v[static_cast<std::size_t>(a)] = t;
    }
  }
  std::vector<std::tuple<double, double, std::string>> scores;  // worst, geometric mean, cost set
  for (double lat : {5e-6, 7.5e-6, 10e-6, 12.5e-6, 15e-6, 20e-6, 25e-6})
    for (double bw : {0.2e12, 0.4e12, 0.6e12, 0.8e12, 1e12, 1.5e12, 2e12, 3e12})
      for (double read : {1.0, 1.5, 2.0, 3.0, 4.0, 6.0})
        for (double flagged : {1.0, 0.75, 0.5, 0.4})
        for (bool lat_per_rank : {false, true})
          for (bool bw_shared : {false, true}) {
            if (messages && flagged != 1.0) continue;  // no flagged call measured beyond 64 KiB
            double worst = 0, logs = 0;
            int points = 0, unmeasured = 0;
            for (const auto& [key, v] : us) {
              const int n = key.first;
              const auto topo = ddl::topology::uniform(n, bw_shared ? bw / n : bw, lat_per_rank ? lat * n : lat);
              ddl::plan_for q(ddl::candidates::all, true, true, false);
              q.direct_read = read;
              q.one_round_bytes = std::size_t{64} << 10;
              q.two_shot_one_round = !messages;
              q.flagged_latency = flagged;
              q.shared_levels = 1;
              const double got = v[static_cast<std::size_t>(row_of(ddl::best_plan(topo, double(key.second), q)))];
              double best = INFINITY;  // of the strategies measured there
              for (double x : v)
                if (!std::isnan(x)) best = std::min(best, x);
              if (std::isnan(got)) {  // the plan's strategy was not measured there
                ++unmeasured;
                continue;
              }
              worst = std::max(worst, got / best);
              logs += std::log(got / best);
              ++points;
            }
            char set[200];
            std::snprintf(set, sizeof set,
                          "latency %g us%s, bandwidth %g GB/s%s, read factor %g, flagged latency %g%s", lat * 1e6,
                          lat_per_rank ? " per rank" : "", bw / 1e9, bw_shared ? " shared by the ranks" : "", read,
                          flagged, unmeasured ? (" (" + std::to_string(unmeasured) + " plans unmeasured)").c_str() : "");
            scores.emplace_back(worst, std::exp(logs / std::max(points, 1)), set);
          }
  std::sort(scores.begin(), scores.end());
  std::printf("# worst  geomean  cost set (%zu points)\n", us.size());
  for (const auto& [worst, mean, set] : scores) std::printf("%7.3f %8.4f  %s\n", worst, mean, set.c_str());
  return 0;
}
