// A program whose processes no MPI launcher started: `ddl-run -n 4
// ./ddl_example_ucx_allreduce` (or torchrun, srun: RANK/WORLD_SIZE or
// SLURM_*, and DDL_RENDEZVOUS=file:///a/shared/dir). ucx_cluster meets the
// others through the rendezvous, takes the ranks of one host as one node and
// builds the topology (DDL_TOPOLOGY, or measured with DDL_TOPOLOGY=auto).
#include <ddl/ucx.hpp>

#include <cstdio>
#include <vector>

int main() {
  ddl::ucx_cluster cluster;
  ddl::communicator<ddl::auto_strategy, ddl::ucx_transport> comm(cluster.transport(),
                                                                  ddl::auto_strategy(cluster.topo()));
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
    std::printf("ucx all-reduce over %d processes (%s): %d wrong, mean gradient %g, sum of weights %g\n", n,
                cluster.topo().str().c_str(), wrong, grads[0], local);
  return wrong ? 1 : 0;
}
