// What only a GPU backend reads: the config's cuda.* keys (docs/CONFIG.md), handed to the backend as they
// are.
#pragma once

namespace unet {

struct CudaOptions {
  bool tf32 = true;              // f32 convolutions may use TF32 tensor cores (Ampere and newer)
  bool deterministic = true;     // only convolution algorithms cuDNN reports as deterministic
  bool expandable_arena = true;  // device memory from one address range mapped page by page (else cudaMalloc)
  bool operator==(const CudaOptions&) const = default;
};

}  // namespace unet
