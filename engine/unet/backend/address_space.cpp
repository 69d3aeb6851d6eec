#include "unet/backend/address_space.h"

#include <malloc.h>
#include <sys/resource.h>

#include <fstream>

#include "unet/core/memory.h"

namespace unet {

namespace {

std::int64_t soft_limit(int resource) {
  rlimit limit{};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return -1;
  return static_cast<std::int64_t>(limit.rlim_cur);
}

}  // namespace

AddressSpace read_address_space() {
  AddressSpace space;
  space.limit = soft_limit(RLIMIT_AS);
  // glibc sizes a thread's stack by RLIMIT_STACK, or 2 MiB when it is unlimited.
  const std::int64_t stack = soft_limit(RLIMIT_STACK);
  space.thread_stack = stack > 0 ? stack : std::int64_t{2} << 20;
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      std::int64_t kib = 0;
      status >> kib;
      space.mapped = kib * 1024;
      break;
    }
    status.ignore(1 << 20, '\n');
  }
  return space;
}

std::int64_t address_space_allowance(const AddressSpace& space, int threads) {
  return kGeneratedCodeAllowance + static_cast<std::int64_t>(threads) * space.thread_stack;
}

std::string describe(const AddressSpace& space) {
  return "the address-space limit (ulimit -v) of " + format_bytes(space.limit) +
         ", of which the process maps " + format_bytes(space.mapped);
}

void fit_malloc_to_address_space_limit() {
  if (read_address_space().limited()) ::mallopt(M_ARENA_MAX, 1);
}

}  // namespace unet
