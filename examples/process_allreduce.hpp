// What examples/mpi_allreduce.cpp and examples/ucx_allreduce.cpp do once
// their processes have met: rank 0's weights broadcast, gradients averaged
// in the background while the rank goes on, and every rank's result
// checked. Returns the program's exit code (0: every rank right).
#pragma once
#include <ddl.hpp>

#include <cstdio>
#include <string>
#include <vector>

template <class Transport>
int broadcast_and_average(ddl::communicator<ddl::auto_strategy, Transport>& comm, const char* what) {
  const int n = comm.size(), r = comm.rank();

  std::vector<double> weights(1000, r == 0 ? 0.5 : -1.0);
  comm.broadcast(ddl::host_view(weights), 0);  // everyone starts from rank 0's

  std::vector<float> grads(1 << 20, static_cast<float>(r + 1));
  auto pending = comm.all_reduce_async(ddl::host_view(grads), ddl::op::avg);  // overlaps what follows
  double local = 0;
  for (double w : weights) local += w;
  pending.wait();

  const float expect = static_cast<float>(n + 1) / 2;  // mean of 1..n
  int wrong = weights[999] != 0.5;
  for (float g : grads) wrong += g != expect;
  comm.all_reduce(ddl::host_view(&wrong, 1), ddl::op::sum);
  if (r == 0)
    std::printf("%s all-reduce over %d processes (%s): %d wrong, mean gradient %g, sum of weights %g\n", what, n,
                comm.strategy().topo().str().c_str(), wrong, grads[0], local);
  return wrong ? 1 : 0;
}
