#pragma once
/// \file
/// Device buffers over MPI. `ddl::mpi_cuda_aware()` asks the MPI library
/// (`MPIX_Query_cuda_support`, where it offers it); with a CUDA-aware MPI use
/// `mpi_direct_transport`, otherwise `mpi_staged_transport`, which stages
/// pieces through pinned host memory with the copies overlapping the network,
/// and runs calls up to `staging_options::bounce_bytes` (64 MiB,
/// `DDL_STAGING_BOUNCE`) whole on MPI from one copy in pinned shared host
/// memory (see `staged/transport.hpp`). Compile with nvcc; link `ddl::mpi`
/// and `ddl::cuda`.
/// Example:
/// \code
///   ddl::mpi_cluster cluster(MPI_COMM_WORLD);
///   ddl::cuda::staging_device dev(local_gpu, stream);
///   ddl::mpi_staged_transport t(cluster.transport(), dev);
///   ddl::communicator<ddl::auto_strategy, ddl::mpi_staged_transport> comm(t, ddl::auto_strategy(cluster.topo()));
///   comm.all_reduce(ddl::device_view(d_grads, n, local_gpu, stream), ddl::op::sum);
/// \endcode
#include "ddl/mpi.hpp"
#include "ddl/cuda/staging.hpp"
#include "ddl/staged/transport.hpp"

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

namespace ddl {

/// True when the MPI library says it can take device pointers.
inline bool mpi_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

/// Device buffers staged through pinned host memory, over MPI.
using mpi_staged_transport = staged_transport<mpi_transport, cuda::staging_device>;
/// Device pointers straight to a CUDA-aware MPI.
using mpi_direct_transport = staged_transport<mpi_transport, cuda::direct_device>;

}  // namespace ddl
