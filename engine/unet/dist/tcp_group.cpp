// The process group over TCP (srun, torchrun-style variables): a rendezvous at rank 0's MASTER_PORT, where
// each rank says who it is and where it listens, then a ring of connections, rank r to rank r + 1.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "unet/core/error.h"
#include "unet/core/number_text.h"
#include "unet/dist/process_group.h"
#include "unet/io/unique_fd.h"

namespace unet {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kProtocol = 1;

std::string errno_text(int error) {
  return std::strerror(error);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// Waits until fd is ready for `events`; false when the deadline passed first.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const double left = seconds_left(deadline);
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::min(left * 1000.0 + 1.0, 60000.0));
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) throw Error(ErrorKind::io, "poll failed: " + errno_text(errno));
  }
}

void set_option(int fd, int level, int name, int value) {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0)
    throw Error(ErrorKind::io, "setsockopt failed: " + errno_text(errno));
}

// A ring link: no Nagle delay for the small host messages, and keep-alive probes so that a peer whose machine
// vanished is noticed in about a minute and a half, not after the message timeout.
void tune_link(int fd) {
  set_option(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  set_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
  set_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, 30);
  set_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, 10);
  set_option(fd, IPPROTO_TCP, TCP_KEEPCNT, 6);
}

UniqueFd listen_on(int port, const std::string& what) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw Error(ErrorKind::io, "cannot create a socket: " + errno_text(errno));
  set_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    throw Error(ErrorKind::io,
                what + ": cannot listen on port " + std::to_string(port) + ": " + errno_text(errno), {},
                port ? "another run (or program) holds the port: choose another MASTER_PORT" : "");
  if (::listen(fd.get(), 128) != 0)
    throw Error(ErrorKind::io, what + ": listen failed: " + errno_text(errno));
  return fd;
}

int port_of(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error(ErrorKind::io, "getsockname failed: " + errno_text(errno));
  return ntohs(addr.sin_port);
}

UniqueFd accept_one(int listener, Clock::time_point deadline, const std::string& waiting_for) {
  if (!wait_ready(listener, POLLIN, deadline))
    throw Error(ErrorKind::cancelled, "timed out waiting for " + waiting_for);
  UniqueFd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) throw Error(ErrorKind::io, "accept failed: " + errno_text(errno));
  return fd;
}

// Connects to host:port, retrying until the deadline: the peer may not be listening yet.
UniqueFd connect_to(const std::string& host, int port, Clock::time_point deadline, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_problem;
  for (;;) {
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc == 0) {
      for (addrinfo* a = found; a; a = a->ai_next) {
        UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        if (fd && ::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          return fd;
        }
        last_problem = errno_text(errno);
      }
      ::freeaddrinfo(found);
    } else {
      last_problem = ::gai_strerror(rc);
    }
    if (seconds_left(deadline) <= 0)
      throw Error(ErrorKind::io,
                  "cannot reach " + what + " at " + host + ":" + std::to_string(port) + ": " + last_problem,
                  {}, "is rank 0 running, and are MASTER_ADDR and MASTER_PORT the same for every rank?");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Whole-buffer transfers with a deadline. They return false when the peer closed the connection.
bool write_all(int fd, const void* data, std::size_t size, Clock::time_point deadline) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    if (!wait_ready(fd, POLLOUT, deadline)) throw Error(ErrorKind::cancelled, "timed out sending");
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) return false;
      throw Error(ErrorKind::io, "send failed: " + errno_text(errno));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t size, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    if (!wait_ready(fd, POLLIN, deadline)) throw Error(ErrorKind::cancelled, "timed out receiving");
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET || errno == ENOTCONN) return false;
      throw Error(ErrorKind::io, "recv failed: " + errno_text(errno));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// The rendezvous messages, as a string of fields; a host name holds no '\n'.
struct Hello {
  std::uint32_t magic = kMessageMagic, protocol = kProtocol;
  std::int32_t rank = 0, size = 0, ring_port = 0;
  char host[128] = {};
};

struct PeerAddress {
  char ip[64] = {};
  std::int32_t ring_port = 0;
  char host[128] = {};
};

class TcpProcessGroup final : public ProcessGroup {
 public:
  TcpProcessGroup(int rank, int size, const std::string& master_addr, int master_port, const JoinOptions& o)
      : ProcessGroup(rank, size, {}), message_timeout_s_(o.message_timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o.rendezvous_timeout_s));
    UniqueFd ring_listener = listen_on(0, "the ring");
    std::vector<PeerAddress> peers(static_cast<std::size_t>(size));
    Hello mine;
    mine.rank = rank;
    mine.size = size;
    mine.ring_port = port_of(ring_listener.get());
    std::strncpy(mine.host, host_name().c_str(), sizeof mine.host - 1);
    const std::string master =
        "rank 0 (MASTER_ADDR " + master_addr + ", MASTER_PORT " + std::to_string(master_port) + ")";
    if (rank == 0) {
      UniqueFd rendezvous = listen_on(master_port, "rank 0's rendezvous");
      std::vector<UniqueFd> joined(static_cast<std::size_t>(size));
      std::memcpy(peers[0].host, mine.host, sizeof mine.host);
      peers[0].ring_port = mine.ring_port;
      for (int n = 1; n < size; ++n) {
        std::string missing;
        for (int r = 1; r < size; ++r)
          if (!joined[static_cast<std::size_t>(r)])
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        UniqueFd fd =
            accept_one(rendezvous.get(), deadline,
                       "ranks " + missing + " to join rank 0 at port " + std::to_string(master_port));
        Hello h;
        if (!read_all(fd.get(), &h, sizeof h, deadline) || h.magic != kMessageMagic)
          throw Error(ErrorKind::io, "a connection to port " + std::to_string(master_port) +
                                         " is not from a unet-train rank: is MASTER_PORT shared with another "
                                         "program?");
        h.host[sizeof h.host - 1] = '\0';
        if (h.protocol != kProtocol)
          throw Error(ErrorKind::usage, "rank " + std::to_string(h.rank) + " (" + h.host +
                                            ") runs another unet-train version: use one build on every node");
        if (h.size != size)
          throw Error(ErrorKind::config, "rank " + std::to_string(h.rank) + " (" + h.host + ") was told " +
                                             std::to_string(h.size) + " processes (WORLD_SIZE), rank 0 " +
                                             std::to_string(size));
        if (h.rank < 1 || h.rank >= size || joined[static_cast<std::size_t>(h.rank)])
          throw Error(ErrorKind::config, "two processes say they are rank " + std::to_string(h.rank) +
                                             " (one on " + h.host + "): each needs its own RANK");
        sockaddr_in addr{};
        socklen_t len = sizeof addr;
        ::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
        PeerAddress& p = peers[static_cast<std::size_t>(h.rank)];
        ::inet_ntop(AF_INET, &addr.sin_addr, p.ip, sizeof p.ip);
        p.ring_port = h.ring_port;
        std::memcpy(p.host, h.host, sizeof h.host);
        joined[static_cast<std::size_t>(h.rank)] = std::move(fd);
      }
      // Rank 0 is reached at the address the others used for the rendezvous.
      std::strncpy(peers[0].ip, master_addr.c_str(), sizeof peers[0].ip - 1);
      for (int r = 1; r < size; ++r)
        if (!write_all(joined[static_cast<std::size_t>(r)].get(), peers.data(),
                       peers.size() * sizeof(PeerAddress), deadline))
          throw Error(ErrorKind::cancelled, "rank " + std::to_string(r) + " left during the rendezvous");
    } else {
      UniqueFd fd = connect_to(master_addr, master_port, deadline, master);
      if (!write_all(fd.get(), &mine, sizeof mine, deadline) ||
          !read_all(fd.get(), peers.data(), peers.size() * sizeof(PeerAddress), deadline))
        throw Error(ErrorKind::cancelled, master + " closed the rendezvous: see its output for why");
    }
    std::vector<std::string> hosts;
    for (PeerAddress& p : peers) {
      p.host[sizeof p.host - 1] = '\0';
      p.ip[sizeof p.ip - 1] = '\0';
      hosts.emplace_back(p.host);
    }
    set_hosts(std::move(hosts));

    // The ring: every rank connects to the next (its listener queues the connection), then accepts the
    // previous one's.
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    const PeerAddress& to = peers[static_cast<std::size_t>(next)];
    next_ = connect_to(to.ip, to.ring_port, deadline, describe(next));
    const std::int32_t me = rank;
    if (!write_all(next_.get(), &me, sizeof me, deadline))
      throw Error(ErrorKind::cancelled, describe(next) + " left while the ring formed");
    prev_ = accept_one(ring_listener.get(), deadline, describe(prev) + " to connect");
    std::int32_t who = -1;
    if (!read_all(prev_.get(), &who, sizeof who, deadline) || who != prev)
      throw Error(ErrorKind::io,
                  "the ring's link from " + describe(prev) + " came from rank " + std::to_string(who));
    tune_link(next_.get());
    tune_link(prev_.get());
  }

  ~TcpProcessGroup() override = default;

  void send_next(MessageTag tag, std::span<const std::byte> bytes) override {
    throw_if_aborted();
    const int next = (rank() + 1) % size();
    const MessageHeader header{kMessageMagic, static_cast<std::uint32_t>(tag), bytes.size()};
    const auto deadline = message_deadline();
    try {
      if (write_all(next_.get(), &header, sizeof header, deadline) &&
          write_all(next_.get(), bytes.data(), bytes.size(), deadline))
        return;
    } catch (const Error& e) {
      throw_if_aborted();
      throw Error(ErrorKind::cancelled,
                  describe(next) + " took no message for " + seconds_text() + ": " + e.what());
    }
    throw_if_aborted();
    throw Error(ErrorKind::cancelled, describe(next) + " closed its connection: it failed or was killed");
  }

  void recv_prev(MessageTag tag, std::vector<std::byte>& bytes) override {
    throw_if_aborted();
    const int prev = (rank() + size() - 1) % size();
    const auto closed = [&] {
      throw_if_aborted();
      return Error(ErrorKind::cancelled, describe(prev) + " closed its connection: it failed or was killed");
    };
    MessageHeader header;
    const auto deadline = message_deadline();
    try {
      if (!read_all(prev_.get(), &header, sizeof header, deadline)) throw closed();
      check_header(prev, header, tag);
      bytes.resize(header.size);
      if (!read_all(prev_.get(), bytes.data(), bytes.size(), deadline)) throw closed();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::cancelled || aborted_) throw;
      if (std::string(e.what()).find("timed out") == std::string::npos) throw;
      throw Error(ErrorKind::cancelled, describe(prev) + " sent nothing for " + seconds_text() +
                                            ": it is stuck or its machine is gone");
    }
  }

  void abort(const std::string& why) noexcept override {
    {
      std::lock_guard lock(mutex_);
      if (aborted_) return;
      why_ = why;
      aborted_ = true;
    }
    // Wakes this rank's own threads blocked on the links, and tells the neighbours.
    ::shutdown(next_.get(), SHUT_RDWR);
    ::shutdown(prev_.get(), SHUT_RDWR);
  }

 private:
  Clock::time_point message_deadline() const {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(message_timeout_s_));
  }
  std::string seconds_text() const { return number_text(message_timeout_s_) + " s"; }
  void throw_if_aborted() {
    if (!aborted_) return;
    std::lock_guard lock(mutex_);
    throw Error(ErrorKind::cancelled, why_);
  }

  double message_timeout_s_;
  UniqueFd next_, prev_;
  std::mutex mutex_;
  std::atomic<bool> aborted_{false};
  std::string why_;
};

}  // namespace

std::unique_ptr<ProcessGroup> join_tcp_group(int rank, int size, const std::string& master_addr,
                                             int master_port, const JoinOptions& options) {
  UNET_CHECK(size >= 1 && rank >= 0 && rank < size, usage, "join_tcp_group: rank out of range");
  return std::make_unique<TcpProcessGroup>(rank, size, master_addr, master_port, options);
}

}  // namespace unet
