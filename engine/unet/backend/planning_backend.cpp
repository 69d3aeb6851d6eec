#include "unet/backend/planning_backend.h"

#include <cstring>

namespace unet {
namespace {

class PlanningStream final : public Stream {
 public:
  void synchronize() override {}
};

}  // namespace

PlanningBackend::PlanningBackend(std::unique_ptr<Backend> oracle, DeviceInfo info, std::int64_t cap_bytes)
    : oracle_(std::move(oracle)), info_(std::move(info)), allocator_(info_.id, info_.total_bytes) {
  allocator_.set_cap(cap_bytes);
}

std::unique_ptr<Stream> PlanningBackend::create_stream() {
  return std::make_unique<PlanningStream>();
}

void PlanningBackend::copy_to_host(Stream&, const Tensor& src, void* host) {
  if (src.bytes()) std::memset(host, 0, src.bytes());
}

}  // namespace unet
