#include "unet/backend/planning_backend.h"

#include <cstring>

#include "unet/backend/immediate_stream.h"

namespace unet {
namespace {

class PlanningStream final : public ImmediateStream {
 public:
  void synchronize() override {}
};

}  // namespace

PlanningBackend::PlanningBackend(std::unique_ptr<Backend> oracle, DeviceInfo info, std::int64_t cap_bytes)
    : oracle_(std::move(oracle)), info_(std::move(info)), allocator_(info_.id, info_.total_bytes) {
  allocator_.set_cap(cap_bytes);
  // Cache misses come from where the real backend's come from (a GPU's expandable arena): same pages.
  if (const AllocatorLayout layout = oracle_->allocator().layout(); layout.expandable)
    allocator_.use_expandable_arena(layout.address_space, layout.page);
  // The real backend allocates its resident memory at construction, first: so does its plan.
  resident_ = allocator_.allocate(oracle_->resident_bytes(), MemoryCategory::other);
}

std::unique_ptr<Stream> PlanningBackend::create_stream() {
  return std::make_unique<PlanningStream>();
}

std::unique_ptr<Event> PlanningBackend::create_event() {
  return std::make_unique<CompletedEvent>();
}

void PlanningBackend::copy_to_host(Stream&, const Tensor& src, void* host) {
  if (src.bytes()) std::memset(host, 0, src.bytes());
}

}  // namespace unet
