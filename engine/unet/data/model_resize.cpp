// resized() of model_input.h, on OpenCV's resize; apart from model_input.cpp so that OpenCV's headers (which
// declare a cv::cuda::Event and Stream) meet no unet::Event or Stream of the config's includes.
#include <opencv2/imgproc.hpp>

#include "unet/core/error.h"
#include "unet/data/model_input.h"

namespace unet {

ModelImage resized(const ModelImage& image, std::int64_t height, std::int64_t width) {
  UNET_CHECK(height >= 1 && width >= 1 && image.channels >= 1 &&
                 image.values.size() == static_cast<std::size_t>(image.height * image.width * image.channels),
             usage,
             "resized: a " + std::to_string(height) + "x" + std::to_string(width) + " target of a " +
                 std::to_string(image.height) + "x" + std::to_string(image.width) + "x" +
                 std::to_string(image.channels) + " image of " + std::to_string(image.values.size()) +
                 " values");
  if (height == image.height && width == image.width) return image;
  ModelImage out{height, width, image.channels,
                 std::vector<float>(static_cast<std::size_t>(height * width * image.channels))};
  // One channel plane at a time: OpenCV's resize takes at most 4 (CV_CN_MAX is 512, but INTER_AREA's fast
  // paths are per channel count), and a plane keeps any count of channels alike.
  const int rows = static_cast<int>(image.height), cols = static_cast<int>(image.width);
  cv::Mat plane(rows, cols, CV_32FC1), scaled;
  for (std::int64_t c = 0; c < image.channels; ++c) {
    for (std::int64_t p = 0; p < image.height * image.width; ++p)
      plane.at<float>(static_cast<int>(p)) = image.values[static_cast<std::size_t>(p * image.channels + c)];
    // Shrinking on both axes averages areas; otherwise bilinear.
    const int interpolation =
        height <= image.height && width <= image.width ? cv::INTER_AREA : cv::INTER_LINEAR;
    cv::resize(plane, scaled, cv::Size(static_cast<int>(width), static_cast<int>(height)), 0, 0,
               interpolation);
    for (std::int64_t p = 0; p < height * width; ++p)
      out.values[static_cast<std::size_t>(p * image.channels + c)] = scaled.at<float>(static_cast<int>(p));
  }
  return out;
}

}  // namespace unet
