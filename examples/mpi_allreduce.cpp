// An MPI program: ranks are processes (mpiexec -n 4 ./ddl_example_mpi_allreduce).
// ddl never initialises MPI behind your back; mpi_session does it here, asking
// for MPI_THREAD_SERIALIZED so asynchronous collectives can progress on a
// background thread. mpi_cluster finds the nodes, renumbers ranks node by
// node and builds the topology (DDL_TOPOLOGY, or measured with DDL_PROBE=1).
#include <ddl/mpi.hpp>

#include "process_allreduce.hpp"

int main(int argc, char** argv) {
  ddl::mpi_session mpi(argc, argv);
  ddl::mpi_cluster cluster(MPI_COMM_WORLD);
  ddl::communicator<ddl::auto_strategy, ddl::mpi_transport> comm(cluster.transport(),
                                                                  ddl::auto_strategy(cluster.topo()));
  return broadcast_and_average(comm, "mpi");
}
