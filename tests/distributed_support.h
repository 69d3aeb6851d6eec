// What the suites of runs over several processes share (test_distributed, test_reliability_rendezvous): a
// free port, an environment for detect_launch, and the arguments of a small run on two CPU replicas.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <QStringList>
#include <map>
#include <optional>
#include <string>

#include "unet/core/unique_fd.h"
#include "unet/distributed/process_group.h"

namespace unet::test {

// A TCP port nobody listens on now.
inline int free_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

// An environment of these variables alone, as detect_launch reads one.
inline EnvironmentReader environment(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The arguments of a small, quick run on two CPU replicas (one process, or shared by two).
inline QStringList run_args(const QString& dir, int epochs) {
  return {"train",
          "--set",
          "data.image_size=[32,32]",
          "--set",
          "data.synthetic_samples=24",
          "--set",
          "model.width=4",
          "--set",
          "model.depth=2",
          "--set",
          "train.batch_size=6",
          "--set",
          "train.epochs=" + QString::number(epochs),
          "--set",
          "devices=[\"cpu:0\",\"cpu:1\"]",
          "--set",
          "checkpoint.dir=" + dir};
}

}  // namespace unet::test
