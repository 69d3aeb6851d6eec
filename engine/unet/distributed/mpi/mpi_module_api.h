// The interface of libunet_mpi.so, the module that links Open MPI (engine/unet/distributed/mpi/): plain C
// types only, so that the engine needs no MPI headers and runs where MPI is not installed (it loads the
// module only when mpirun started it). The module follows every module's convention (module_abi.h): its
// entry is named "mpi", carries kUnetMpiApiVersion and starts by returning its UnetMpiApi.
#pragma once

#include <cstddef>
#include <cstdint>

#include "unet/backend/module_abi.h"

extern "C" {

// Results of the module's calls.
enum UnetMpiResult : int {
  unet_mpi_ok = 0,
  unet_mpi_aborted = 1,
  unet_mpi_timed_out = 2,
  unet_mpi_failed = 3
};

struct UnetMpiApi {
  // MPI_Init_thread (serialized: one thread at a time calls MPI) and MPI_COMM_WORLD's rank and size.
  int (*init)(int* rank, int* size, char* why, std::size_t why_size);
  // Sends (send != 0) or receives `bytes` to or from `peer` with `tag`, waiting without blocking in MPI so
  // that stop(stop_context) turning non-zero (another thread aborts) or timeout_s ends the wait (the request
  // is cancelled).
  int (*transfer)(int send, int peer, int tag, void* data, std::uint64_t bytes, int (*stop)(void*),
                  void* stop_context, double timeout_s, char* why, std::size_t why_size);
  void (*finalize)();
};

}  // extern "C"

// The MPI module's ABI number (the entry's `abi`): what crosses is this plain C table, so a counter raised
// whenever UnetMpiApi changes suffices (2: the table moved behind unet_module_entry).
inline constexpr std::uint32_t kUnetMpiApiVersion = 2;
