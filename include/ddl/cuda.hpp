#pragma once
/// \file
/// ddl with the CUDA back-end: device buffer views and reductions, the
/// peer-copy transport for GPUs of one process, and staging for device
/// buffers over host transports. Compile with nvcc; link `ddl::cuda`.
/// (`<ddl/mpi_cuda.hpp>` adds device buffers over MPI.)
#include "ddl.hpp"
#include "ddl/cuda/runtime.hpp"
#include "ddl/cuda/staging.hpp"
#include "ddl/cuda/peer_transport.hpp"
#include "ddl/staged/transport.hpp"
