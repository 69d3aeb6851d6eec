// What only a GPU backend reads: the config's cuda.* keys (docs/CONFIG.md), handed to the backend as they
// are.
#pragma once

#include <cstdint>

namespace unet {

// cuda.communicator: how several GPU replicas sum their gradients (communicator_choice.h decides).
enum class CommunicatorChoice : std::uint8_t {
  automatic,  // "auto": NCCL between distinct GPUs when it loads, else the device communicator
  nccl,       // "nccl": NCCL or an error saying why not
  device,     // "device": the device communicator (rank-order sum through peer pointers or the host)
};

struct CudaOptions {
  bool tf32 = true;              // f32 convolutions may use TF32 tensor cores (Ampere and newer)
  bool deterministic = true;     // only convolution algorithms cuDNN reports as deterministic
  bool expandable_arena = true;  // device memory from one address range mapped page by page (else cudaMalloc)
  CommunicatorChoice communicator = CommunicatorChoice::automatic;
  // cuda.comm_dtype "bf16": NCCL sums the gradients as bf16 (half the traffic, 8 significant bits); false:
  // f32.
  bool bf16_sums = false;
  bool operator==(const CudaOptions&) const = default;
};

}  // namespace unet
