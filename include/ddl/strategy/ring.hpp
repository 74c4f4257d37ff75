#pragma once
/// \file
/// `ddl::ring`: the one-dimensional multi-ring (see multi_ring.hpp, where
/// both live so that they share one code path).
#include "ddl/strategy/multi_ring.hpp"
