// The process group under Open MPI's mpirun: MPI point-to-point messages along the ring, through
// libunet_mpi.so (engine/unet/distributed/mpi/), which the engine loads at run time so that it runs where MPI
// is not installed.
#pragma once

#include <memory>

#include "unet/distributed/process_group.h"

namespace unet {

// Initialises MPI and joins MPI_COMM_WORLD; throws Error(unsupported) saying what to install when this build
// or this machine has no MPI module, and Error naming the launcher's variables when the sizes disagree.
std::unique_ptr<ProcessGroup> join_mpi_group(const LaunchInfo& launch, const JoinOptions& options);

// Why runs cannot be launched with mpirun here (no MPI module in this build, or Open MPI's library missing);
// empty when they can. Loads the module (and Open MPI's library) but does not start MPI.
std::string mpi_problem();

}  // namespace unet
