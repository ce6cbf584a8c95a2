// Compute streams of a chunked forward (see compute_streams.hpp).
#include "tp/compute_streams.hpp"

#include <fmt/core.h>

namespace parallax::tp::detail {

void ComputeStreams::fork(cudaStream_t stream, int count) {
  PX_REQUIRE(count >= 1, "compute_streams", fmt::format("must be >= 1 (got {})", count));
  caller_ = stream;
  count_ = count;
  if (count == 1) return;
  // Streams and events belong to the device current at creation; the layers set their rank's device
  // before calling fork(), and a layer lives on one device.
  while (static_cast<int>(extra_.size()) < count - 1) {
    extra_.push_back(std::make_unique<Stream>());
    done_.push_back(std::make_unique<Event>(false));
  }
  if (!forked_) forked_ = std::make_unique<Event>(false);
  forked_->record(stream);
  for (int s = 0; s + 1 < count; ++s) PX_CUDA_CHECK(cudaStreamWaitEvent(*extra_[s], *forked_, 0));
}

cudaStream_t ComputeStreams::at(std::size_t chunk) const noexcept {
  const std::size_t s = chunk % static_cast<std::size_t>(count_);
  return s == 0 ? caller_ : extra_[s - 1]->get();
}

void ComputeStreams::join() {
  for (int s = 0; s + 1 < count_; ++s) {
    done_[s]->record(*extra_[s]);
    PX_CUDA_CHECK(cudaStreamWaitEvent(caller_, *done_[s], 0));
  }
}

}  // namespace parallax::tp::detail
