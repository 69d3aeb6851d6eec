// The process's address-space limit (RLIMIT_AS, `ulimit -v`), which a CPU run meets before the host's memory:
// every mapping counts against it (libraries, thread stacks, oneDNN's generated code, malloc's per-thread
// arenas), not only what is touched. Past it, some libraries fail without saying so (oneDNN's code generator
// segfaults when its mapping fails), so the trainer checks the plan against what the limit leaves before
// anything runs (plan/memory_planner.h, fit_address_space_limit).
#pragma once

#include <cstdint>
#include <string>

namespace unet {

struct AddressSpace {
  std::int64_t limit = -1;        // the soft RLIMIT_AS in bytes; -1: none
  std::int64_t mapped = 0;        // what the process maps now (VmSize)
  std::int64_t thread_stack = 0;  // a new thread's stack: the soft RLIMIT_STACK, glibc's default
  bool limited() const noexcept { return limit >= 0; }
};

AddressSpace read_address_space();

// Room for what a run maps beyond its allocations once it starts: `threads` more threads' stacks and oneDNN's
// generated code (about 58 MiB for the demo's U-Net, measured; 64 MiB allowed).
inline constexpr std::int64_t kGeneratedCodeAllowance = std::int64_t{64} << 20;
std::int64_t address_space_allowance(const AddressSpace& space, int threads);

// "the address-space limit (ulimit -v) of 293.0 MiB, of which the process maps 130.0 MiB"
std::string describe(const AddressSpace& space);

// Under an address-space limit, glibc gives each thread that allocates an arena of its own and reserves 64
// MiB of address space for each: with a few threads, half a modest limit goes to reservations the run never
// uses. When the process has a limit, this keeps malloc to one arena (M_ARENA_MAX; the engine's hot paths
// allocate through its own caching allocators, so contention does not matter). The front ends call it first
// thing; it does nothing without a limit.
void fit_malloc_to_address_space_limit();

}  // namespace unet
