// An MPI program: ranks are processes (mpiexec -n 4 ./ddl_example_mpi_allreduce).
// ddl never initialises MPI behind your back; mpi_session does it here, asking
// for MPI_THREAD_SERIALIZED so asynchronous collectives can progress on a
// background thread. mpi_cluster finds the nodes, renumbers ranks node by
// node and builds the topology (DDL_TOPOLOGY, or measured with DDL_PROBE=1).
#include <ddl/mpi.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  ddl::mpi_session mpi(argc, argv);
  ddl::mpi_cluster cluster(MPI_COMM_WORLD);
  ddl::communicator<ddl::auto_strategy, ddl::mpi_transport> comm(cluster.transport(),
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
    std::printf("mpi all-reduce over %d processes (%s): %d wrong, mean gradient %g, sum of weights %g\n", n,
                cluster.topo().str().c_str(), wrong, grads[0], local);
  return wrong ? 1 : 0;
}
