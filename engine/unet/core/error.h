// Typed engine errors. The engine never calls exit() or abort(): every failure is an exception that says what
// failed, where (file:line), on which device, and what to try. Destructors must not throw; they use
// log_noexcept() instead.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace unet {

enum class ErrorKind {
  config,         // a bad config key or value
  usage,          // a call that breaks an API precondition (shapes, dtypes)
  data,           // a bad dataset or input file
  io,             // reading or writing a file
  backend,        // a failed backend call (oneDNN, CUDA, cuDNN, NCCL)
  out_of_memory,  // an allocation that did not fit the device or its cap
  unsupported,    // a valid request this build or device cannot do
  cancelled,      // work stopped on request or because another replica failed
  diverged,       // training produced inf/NaN gradients that loss scaling cannot absorb
};

const char* to_string(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, std::string device = {}, std::string hint = {},
        std::source_location where = std::source_location::current());

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }
  const std::string& device() const noexcept { return device_; }
  const std::string& hint() const noexcept { return hint_; }
  // "file.cpp:123"
  const std::string& location() const noexcept { return location_; }

 private:
  static std::string compose(const std::string& message, const std::string& device, const std::string& hint);

  ErrorKind kind_;
  std::string message_;
  std::string device_;
  std::string hint_;
  std::string location_;
};

// A config key or value the user must fix; what() reads "train.batch_size: must be >= 1, got 0".
class ConfigError : public Error {
 public:
  ConfigError(std::string key, const std::string& problem,
              std::source_location where = std::source_location::current());
  const std::string& key() const noexcept { return key_; }

 private:
  std::string key_;
};

// Writes a line to stderr; for destructors and other places that must not throw.
void log_noexcept(const char* what, const std::string& detail) noexcept;

}  // namespace unet

// Throws unet::Error of the given kind when the condition is false.
#define UNET_CHECK(cond, kind, message)                                   \
  do {                                                                    \
    if (!(cond)) throw ::unet::Error(::unet::ErrorKind::kind, (message)); \
  } while (false)
