#pragma once
/// \file
/// The UCX back-end: `ddl::ucx_transport` (processes started without an MPI
/// launcher, meeting through a rendezvous store) and the stores. Link
/// `ddl::ucx` (CMake: `find_package(ddl COMPONENTS ucx)`). `ddl::ucx_cluster`
/// numbers the ranks host by host and builds their topology.
#include "ddl.hpp"
#include "ddl/rendezvous/bootstrap.hpp"
#include "ddl/rendezvous/spawn.hpp"
#include "ddl/rendezvous/store.hpp"
#include "ddl/ucx/cluster.hpp"
#include "ddl/ucx/transport.hpp"
