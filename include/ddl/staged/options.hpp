#pragma once
/// \file
/// `ddl::staging_options`: the settings of `staged_transport`
/// (`staged/transport.hpp`), from the environment where set.
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "ddl/core/config.hpp"

namespace ddl {

/// Settings of the staging pipeline.
struct staging_options {
  std::size_t slot_bytes = std::size_t{1} << 20;  ///< largest piece
  int slots = 8;                                  ///< per direction
  /// Calls of at most this many bytes per rank run whole on the host
  /// transport through one copy each way (`staged_transport::bounces`); 0:
  /// every call through the pipeline. Every rank must use the same value.
  /// `DDL_STAGING_BOUNCE` (bytes, "16M" as elsewhere) sets it. Default 64
  /// MiB: bounced calls ran ahead of the pieces at every size measured
  /// (docs/settings.md, "Why the defaults"); the pinned buffer grows to the
  /// largest call up to this size.
  std::size_t bounce_bytes = std::size_t{64} << 20;
  /// Where some ranks are near (their device memory mapped between their
  /// processes, `staged/near.hpp`), calls bounce only up to this many bytes
  /// (and `bounce_bytes`): larger ones go device to device between near
  /// ranks. `DDL_STAGING_NEAR_BOUNCE` sets it.
  std::size_t near_bounce_bytes = std::size_t{64} << 10;
  /// Whether near ranks map each other's device memory (where the device
  /// can, `Device::share`); `DDL_CUDA_IPC=0` turns it off.
  bool near = true;

  /// The defaults, with `DDL_STAGING_BOUNCE`, `DDL_STAGING_NEAR_BOUNCE` and `DDL_CUDA_IPC` read.
  static staging_options from_env() {
    staging_options o;
    if (const char* b = std::getenv("DDL_STAGING_BOUNCE")) o.bounce_bytes = detail::parse_bytes("DDL_STAGING_BOUNCE", b);
    if (const char* b = std::getenv("DDL_STAGING_NEAR_BOUNCE"))
      o.near_bounce_bytes = detail::parse_bytes("DDL_STAGING_NEAR_BOUNCE", b);
    if (const char* i = std::getenv("DDL_CUDA_IPC")) o.near = std::strcmp(i, "0") != 0;
    return o;
  }
};

}  // namespace ddl
