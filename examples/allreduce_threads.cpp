// Data-parallel gradient averaging on one machine: 6 ranks (threads) each
// compute gradients of a least-squares model on their own shard, average
// them with one all-reduce per step, and end with identical weights.
#include <ddl.hpp>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <vector>

int main() {
  constexpr int ranks = 6, features = 257, samples_per_rank = 64, steps = 50;
  std::vector<std::vector<float>> final_weights(ranks);

  ddl::local_fabric::run(ranks, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
    std::vector<float> w(features, 0.0f), grad(features);
    for (int step = 0; step < steps; ++step) {
      std::fill(grad.begin(), grad.end(), 0.0f);
      for (int s = 0; s < samples_per_rank; ++s) {  // this rank's shard: y = sum_j x_j * (j % 5)
        const int id = t.rank() * samples_per_rank + s;
        float pred = 0, y = 0;
        std::vector<float> x(features);
        for (int j = 0; j < features; ++j) {
          x[j] = std::sin(0.37f * float(id * features + j));
          pred += w[j] * x[j];
          y += x[j] * float(j % 5);
        }
        for (int j = 0; j < features; ++j) grad[j] += (pred - y) * x[j] / samples_per_rank;
      }
      comm.all_reduce(ddl::host_view(grad), ddl::op::avg);  // the data-parallel step
      for (int j = 0; j < features; ++j) w[j] -= 0.05f * grad[j];
    }
    final_weights[t.rank()] = w;
  });

  for (int r = 1; r < ranks; ++r)
    if (final_weights[r] != final_weights[0]) {
      std::printf("rank %d diverged\n", r);
      return 1;
    }
  std::printf("averaged gradients agree: %d ranks hold identical weights, w[3] = %.3f\n", ranks, final_weights[0][3]);
  return 0;
}
