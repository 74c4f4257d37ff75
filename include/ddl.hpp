#pragma once
/// \file
/// ddl: topology-aware ring and multi-dimensional ring collectives for
/// data-parallel deep learning. This is the one header a user includes.
#include "ddl/version.hpp"
#include "ddl/core/error.hpp"
#include "ddl/core/float16.hpp"
#include "ddl/core/dtype.hpp"
#include "ddl/core/op.hpp"
#include "ddl/core/buffer.hpp"
#include "ddl/core/config.hpp"
#include "ddl/reduce/host.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/local.hpp"
#include "ddl/transport/group.hpp"
#include "ddl/topology/extents.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/strategy/multi_ring.hpp"
#include "ddl/strategy/ring.hpp"
#include "ddl/strategy/doubling.hpp"
#include "ddl/comm/communicator.hpp"
