#include <ddl/strategy/planner.hpp>
#include <ddl/topology/topology.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
const char* const algos[] = {"ring", "recursive_doubling", "halving_doubling", "one_shot", "two_shot"};
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
int main(int, char** argv) {
  std::map<std::pair<int, long>, std::vector<double>> us;
  for (int a = 0; a < 5; ++a) {
    std::ifstream f(std::string(argv[1]) + "/allreduce-" + algos[a] + ".txt");
    for (std::string line; std::getline(f, line);) {
      std::istringstream in(line); int n = 0; long bytes = 0; double t = 0;
      if (line.empty() || line[0] == '#' || !(in >> n >> bytes >> t)) continue;
      auto& v = us[{n, bytes}]; v.resize(5, NAN); v[a] = t;
    }
  }
  for (double wl : {0.75, 1.0, 1.25, 1.5, 2.0})
    for (double wr : {2.0, 3.0, 4.0, 6.0, 8.0})
      for (double ol : {0.5, 0.75, 1.0}) {
        ddl::cost::whole_two_shot_latency = wl; ddl::cost::whole_read_factor = wr; ddl::cost::one_round_latency = ol;
        double worst = 0, worst_big = 0, logs = 0; int pts = 0; std::string bad;
        for (const auto& [key, v] : us) {
          const int n = key.first;
          const auto topo = ddl::topology::uniform(n, 200e9, 10e-6 * n);
          ddl::plan_for q(ddl::candidates::all, true, true, false);
          q.direct_read = 2; q.one_round_bytes = 65536; q.shared_levels = 1; q.two_shot_one_round = true;
          const double got = v[row_of(ddl::best_plan(topo, double(key.second), q))];
          const double best = *std::min_element(v.begin(), v.end());
          if (std::isnan(got) || std::isnan(best)) continue;
          worst = std::max(worst, got / best); if (key.second >= (1L << 20)) worst_big = std::max(worst_big, got / best);
          if (got / best > 1.1) bad += std::to_string(n) + "/" + std::to_string(key.second) + " ";
          logs += std::log(got / best); ++pts;
        }
        std::printf("%.3f %.3f %.4f whole_lat %g whole_read %g one_round_lat %g  %s\n", worst, worst_big, std::exp(logs / pts), wl, wr, ol, bad.c_str());
      }
}
