// The process group under Open MPI's mpirun: MPI point-to-point messages along the ring, through
// libunet_mpi.so (engine/unet/distributed/mpi/), which the engine loads at run time so that it runs where MPI
// is not installed.
#pragma once

#include <memory>

#include "unet/distributed/mpi/mpi_module_api.h"
#include "unet/distributed/process_group.h"

namespace unet {

struct MpiModuleLoad {
  const UnetMpiApi* api = nullptr;  // the module's table; lives as long as the process
  std::string problem;              // why there is none; empty when there is
};

// One attempt to load libunet_mpi.so (module_loader.h: $UNET_MPI_MODULE, then the module paths), reading
// the environment now and remembering nothing. join_mpi_group and mpi_problem load it once per process;
// tests call this to try one module after another.
MpiModuleLoad load_mpi_module();

// Initialises MPI and joins MPI_COMM_WORLD; throws Error(unsupported) saying what to install when this build
// or this machine has no MPI module, and Error naming the launcher's variables when the sizes disagree.
std::unique_ptr<ProcessGroup> join_mpi_group(const LaunchInfo& launch, const JoinOptions& options);

// Why runs cannot be launched with mpirun here (no MPI module in this build, or Open MPI's library missing);
// empty when they can. Loads the module (and Open MPI's library) but does not start MPI.
std::string mpi_problem();

}  // namespace unet
