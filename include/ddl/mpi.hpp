#pragma once
/// \file
/// The MPI back-end: everything in `ddl.hpp` plus `ddl::mpi_transport`,
/// `ddl::mpi_session` and topology detection. Link the `ddl::mpi` target.
#include "ddl.hpp"
#include "ddl/mpi/transport.hpp"
#include "ddl/mpi/detect.hpp"
#include "ddl/mpi/store.hpp"
