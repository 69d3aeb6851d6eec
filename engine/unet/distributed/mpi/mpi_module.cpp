// libunet_mpi.so: the few MPI calls the engine's MPI process group makes (mpi_group.cpp), behind a C
// interface (mpi_module_api.h).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <string>
#include <thread>

#include "unet/distributed/mpi/mpi_module_api.h"

namespace {

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(std::max(length, 0)));
}

int init(int* rank, int* size, char* why, std::size_t why_size) {
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) {
    unet::write_reason("MPI_Init_thread failed: " + error_text(rc), why, why_size);
    return unet_mpi_failed;
  }
  // Failures come back as codes, not as the default handler's job abort, so that the engine can say what
  // failed.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < MPI_THREAD_SERIALIZED) {
    unet::write_reason("this MPI gives threads level " + std::to_string(provided) +
                           "; the engine calls MPI from its replica threads and needs MPI_THREAD_SERIALIZED",
                       why, why_size);
    return unet_mpi_failed;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return unet_mpi_ok;
}

int transfer(int send, int peer, int tag, void* data, std::uint64_t bytes, int (*stop)(void*),
             void* stop_context, double timeout_s, char* why, std::size_t why_size) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
  auto* p = static_cast<char*>(data);
  // MPI counts are ints: pieces of at most 1 GiB.
  constexpr std::uint64_t kPiece = std::uint64_t{1} << 30;
  do {
    const int count = static_cast<int>(std::min(bytes, kPiece));
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = send ? MPI_Isend(p, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &request)
                  : MPI_Irecv(p, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &request);
    if (rc != MPI_SUCCESS) {
      unet::write_reason(std::string(send ? "MPI_Isend" : "MPI_Irecv") + " failed: " + error_text(rc), why,
                         why_size);
      return unet_mpi_failed;
    }
    // Polls, backing off to a millisecond: a blocking call could not be left when the run stops.
    auto pause = std::chrono::microseconds(5);
    for (int done = 0;;) {
      MPI_Status status;
      rc = MPI_Test(&request, &done, &status);
      if (rc != MPI_SUCCESS) {
        unet::write_reason("MPI_Test failed: " + error_text(rc), why, why_size);
        return unet_mpi_failed;
      }
      if (done) break;
      const bool aborted = stop && stop(stop_context) != 0;
      if (aborted || std::chrono::steady_clock::now() > deadline) {
        MPI_Cancel(&request);
        MPI_Request_free(&request);
        return aborted ? unet_mpi_aborted : unet_mpi_timed_out;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    p += count;
    bytes -= static_cast<std::uint64_t>(count);
  } while (bytes > 0);
  return unet_mpi_ok;
}

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

constexpr UnetMpiApi kApi{init, transfer, finalize};

// The module's start (module_abi.h): nothing to start before mpirun's process calls init.
void* start_mpi_module(char*, std::size_t) {
  return const_cast<UnetMpiApi*>(&kApi);
}

constexpr UnetModuleEntry kEntry{kUnetMpiApiVersion, "mpi", start_mpi_module};

}  // namespace

UNET_MODULE_EXPORT const UnetModuleEntry* unet_module_entry() {
  return &kEntry;
}
