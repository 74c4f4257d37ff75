// A program whose processes no MPI launcher started: `ddl-run -n 4
// ./ddl_example_ucx_allreduce` (or torchrun, srun: RANK/WORLD_SIZE or
// SLURM_*, and DDL_RENDEZVOUS=file:///a/shared/dir). ucx_cluster meets the
// others through the rendezvous, takes the ranks of one host as one node and
// builds the topology (DDL_TOPOLOGY, or measured with DDL_TOPOLOGY=auto).
#include <ddl/ucx.hpp>

#include "process_allreduce.hpp"

int main() {
  ddl::ucx_cluster cluster;
  ddl::communicator<ddl::auto_strategy, ddl::ucx_transport> comm(cluster.transport(),
                                                                  ddl::auto_strategy(cluster.topo()));
  return broadcast_and_average(comm, "ucx");
}
