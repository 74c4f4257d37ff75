#pragma once
// Timing one collective call across MPI processes, as ddl-staged-bench and
// ddl-gpu-mpi-bench do: the slowest rank's seconds, median of `iters` calls
// after 2 warm-ups, each from a barrier; `refill` runs before each, outside
// the timing.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace ddl_bench {

template <class Refill, class Call>
double slowest_median(int iters, Refill&& refill, Call&& call) {
  std::vector<double> t;
  for (int i = 0; i < iters + 2; ++i) {
    refill();
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    call();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (i >= 2) t.push_back(dt);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace ddl_bench
