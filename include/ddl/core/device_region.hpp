#pragma once
/// \file
/// `ddl::device_region`: a device allocation as its owner describes it to
/// the processes of its host that map it (CUDA IPC: `staged/near.hpp`,
/// `cuda/ipc.hpp`), and the transports that offer such mapping
/// (`transport/peer_access.hpp`, `device_peers`).
#include <cstdint>

namespace ddl {

/// A device allocation as its owner shares it with the processes of its
/// host (`Device::share`): what a peer needs to open it.
struct device_region {
  std::uint64_t id = 0;      ///< the allocation's id in its process, never reused; 0: none
  std::uint64_t offset = 0;  ///< where the bytes begin in the allocation
  std::uint64_t size = 0;    ///< the allocation's bytes
  unsigned char handle[64] = {};  ///< how a peer opens it (CUDA: `cudaIpcMemHandle_t`)
};

}  // namespace ddl
