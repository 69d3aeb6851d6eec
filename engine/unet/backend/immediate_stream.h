// Streams and events for backends that run each operation at once on the calling thread (the CPU, planning):
// work recorded on such a stream is finished when record() is called, and waiting for another backend's
// event means the host waiting for it.
#pragma once

#include "unet/backend/backend.h"
#include "unet/core/error.h"

namespace unet {

class CompletedEvent final : public Event {
 public:
  bool ready() override { return true; }
  void synchronize() override {}
};

// Base for a stream whose operations have finished when they return.
class ImmediateStream : public Stream {
 public:
  void record(Event& event) override {
    // Only this kind of stream may record a CompletedEvent; a GPU event cannot mark host work.
    UNET_CHECK(dynamic_cast<CompletedEvent*>(&event) != nullptr, usage,
               "an event is recorded on a stream of another kind of backend");
  }
  void wait(Event& event) override { event.synchronize(); }
};

}  // namespace unet
