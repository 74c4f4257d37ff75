#pragma once
/// \file
/// The simulator back-end: everything in `ddl.hpp` plus `ddl::sim_transport`
/// (virtual time over a modelled network, phantom buffers), so a strategy can
/// be run at 4096 ranks on one machine. It is its own include because it
/// brings fibers (`<ucontext.h>`) and `mmap`.
#include "ddl.hpp"
#include "ddl/sim/transport.hpp"
