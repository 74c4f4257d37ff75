#pragma once
/// \file
/// ddl: topology-aware ring and multi-dimensional ring collectives for
/// data-parallel deep learning. This is the one header a user includes: the
/// generic library (core, reductions, topologies, the transport concept,
/// strategies, communicator) and the in-process back-end (threads).
/// Other back-ends opt in: `<ddl/mpi.hpp>`, `<ddl/cuda.hpp>`, `<ddl/sim.hpp>`; so does
/// `<ddl/testing.hpp>`, the verifiable inputs for checking a collective.
#include "ddl/version.hpp"
#include "ddl/core/error.hpp"
#include "ddl/core/float16.hpp"
#include "ddl/core/dtype.hpp"
#include "ddl/core/op.hpp"
#include "ddl/core/buffer.hpp"
#include "ddl/core/config.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/reduce/host.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/shm/shared_buffer.hpp"
#include "ddl/transport/group.hpp"
#include "ddl/topology/extents.hpp"
#include "ddl/topology/topology.hpp"
#include "ddl/topology/cluster.hpp"
#include "ddl/topology/detect.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/strategy/concept.hpp"
#include "ddl/strategy/multi_ring.hpp"
#include "ddl/strategy/ring.hpp"
#include "ddl/strategy/doubling.hpp"
#include "ddl/strategy/direct.hpp"
#include "ddl/strategy/cost_model.hpp"
#include "ddl/strategy/planner.hpp"
#include "ddl/strategy/auto.hpp"
#include "ddl/strategy/broadcast.hpp"
#include "ddl/comm/progress.hpp"
#include "ddl/comm/communicator.hpp"
#include "ddl/comm/bucketer.hpp"
#include "ddl/local/transport.hpp"
