// The interface of libunet_mpi.so, the module that links Open MPI (engine/unet/distributed/mpi/): plain C
// types only, so that the engine needs no MPI headers and runs where MPI is not installed (it loads the
// module only when mpirun started it).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Results of the module's calls.
enum UnetMpiResult : int {
  unet_mpi_ok = 0,
  unet_mpi_aborted = 1,
  unet_mpi_timed_out = 2,
  unet_mpi_failed = 3
};

struct UnetMpiApi {
  std::uint32_t version;  // kUnetMpiApiVersion of the module's build
  // MPI_Init_thread (serialized: one thread at a time calls MPI) and MPI_COMM_WORLD's rank and size.
  int (*init)(int* rank, int* size, char* why, std::size_t why_size);
  // Sends (send != 0) or receives `bytes` to or from `peer` with `tag`, waiting without blocking in MPI so
  // that stop(stop_context) turning non-zero (another thread aborts) or timeout_s ends the wait (the request
  // is cancelled).
  int (*transfer)(int send, int peer, int tag, void* data, std::uint64_t bytes, int (*stop)(void*),
                  void* stop_context, double timeout_s, char* why, std::size_t why_size);
  void (*finalize)();
};

inline constexpr std::uint32_t kUnetMpiApiVersion = 1;

// The module's only export.
const UnetMpiApi* unet_mpi_module_api();
}
