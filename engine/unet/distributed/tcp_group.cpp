// The process group over TCP (srun, torchrun-style variables): a rendezvous at rank 0's MASTER_PORT, where
// each rank proves it belongs to the job, says who it is and where it listens, then a ring of connections,
// rank r to rank r + 1, each proven the same way. The messages and the trust rule are
// rendezvous_protocol.h's; this file only moves their bytes, and never waits on one peer while others are
// waiting to be heard.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "unet/core/error.h"
#include "unet/core/number_text.h"
#include "unet/core/unique_fd.h"
#include "unet/distributed/process_group.h"
#include "unet/distributed/rendezvous_protocol.h"

namespace unet {
namespace {

using Clock = std::chrono::steady_clock;

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

// The IPv4 addresses `host` resolves to, in the resolver's order; empty when it resolves to none.
std::vector<in_addr> resolve_ipv4(const std::string& host, std::string& problem) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  std::vector<in_addr> addresses;
  if (rc != 0) {
    problem = ::gai_strerror(rc);
    return addresses;
  }
  for (addrinfo* a = found; a; a = a->ai_next)
    addresses.push_back(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr);
  ::freeaddrinfo(found);
  return addresses;
}

std::string ip_text(const in_addr& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address, text, sizeof text);
  return text;
}

std::string endpoint_text(const sockaddr_in& address) {
  return ip_text(address.sin_addr) + ":" + std::to_string(ntohs(address.sin_port));
}

// Listens on address:port (port 0: any free one). Binding to the address a rank is reached at, not to every
// interface, keeps the listener off networks the run does not use. errno is left set when bind fails.
UniqueFd try_listen(const in_addr& address, int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw Error(ErrorKind::io, "cannot create a socket: " + errno_text(errno));
  set_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr = address;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return UniqueFd();
  if (::listen(fd.get(), 128) != 0) throw Error(ErrorKind::io, "listen failed: " + errno_text(errno));
  return fd;
}

// Rank 0's rendezvous listener, on the address MASTER_ADDR names; the address it bound is returned too.
UniqueFd listen_at_master(const std::string& master_addr, int port, in_addr& bound) {
  std::string problem;
  const std::vector<in_addr> addresses = resolve_ipv4(master_addr, problem);
  if (addresses.empty())
    throw ConfigError("MASTER_ADDR", "is \"" + master_addr +
                                         "\", which rank 0 cannot resolve to an IPv4 address: " + problem);
  std::string tried;
  for (const in_addr& a : addresses) {
    UniqueFd fd = try_listen(a, port);
    if (fd) {
      bound = a;
      return fd;
    }
    const int error = errno;
    if (error == EADDRINUSE)
      throw Error(ErrorKind::io,
                  "rank 0's rendezvous: cannot listen on " + ip_text(a) + ":" + std::to_string(port) + ": " +
                      errno_text(error),
                  {}, "another run (or program) holds the port: choose another MASTER_PORT");
    tried += (tried.empty() ? "" : ", ") + ip_text(a) + " (" + errno_text(error) + ")";
  }
  throw ConfigError("MASTER_ADDR",
                    "is \"" + master_addr + "\" (" + tried +
                        "), not an address of rank 0's host: set MASTER_ADDR to the address of "
                        "the host that runs rank 0, as the other ranks reach it");
}

int port_of(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error(ErrorKind::io, "getsockname failed: " + errno_text(errno));
  return ntohs(addr.sin_port);
}

in_addr local_address_of(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error(ErrorKind::io, "getsockname failed: " + errno_text(errno));
  return addr.sin_addr;
}

void set_blocking(int fd, bool blocking) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK) != 0)
    throw Error(ErrorKind::io, "fcntl failed: " + errno_text(errno));
}

// A connection whose first message is still coming: its bytes so far (at most a frame and the largest body
// the doorkeeper expects), and when it must have sent them.
struct Pending {
  UniqueFd fd;
  std::string peer;  // "10.0.0.7:41234"
  std::vector<std::byte> got;
  std::optional<rendezvous::Frame> frame;
  Clock::time_point deadline;
};

// Accepts connections on `listener` and reads each one's first message without waiting on any one of them:
// the listener and every pending connection are polled together, each connection with its own hello
// deadline. A connection that sends a malformed or oversized frame, closes, or sends nothing in time is
// closed and reported through `refused`; a complete message goes to `judge(connection, frame, body)`, which
// admits it (it takes the descriptor; returns nullopt), refuses it (returns why: reported, closed), or throws
// to end the rendezvous. Ends when `done()`; throws Error(cancelled) with `waiting_for()` when the deadline
// passes first.
class Doorkeeper {
 public:
  using Judge = std::function<std::optional<std::string>(Pending&, const rendezvous::Frame&,
                                                         std::span<const std::byte>)>;
  Doorkeeper(int listener, std::vector<rendezvous::Expected> expected, double hello_timeout_s,
             std::function<void(const std::string&)> refused)
      : listener_(listener),
        expected_(std::move(expected)),
        hello_timeout_s_(hello_timeout_s),
        refused_(std::move(refused)) {}

  void run(Clock::time_point deadline, const std::function<bool()>& done, const Judge& judge,
           const std::function<std::string()>& waiting_for) {
    while (!done()) {
      const auto now = Clock::now();
      if (now >= deadline)
        throw Error(ErrorKind::cancelled,
                    "timed out waiting for " + waiting_for() +
                        (refusals_ ? "; " + std::to_string(refusals_) +
                                         (refusals_ == 1 ? " connection was" : " connections were") +
                                         " refused on the way (see the lines above)"
                                   : ""));
      // Closes those whose hello deadline passed.
      std::erase_if(pending_, [&](Pending& p) {
        if (now < p.deadline) return false;
        refuse(p, "sent " + std::to_string(p.got.size()) + " bytes of its hello within the hello deadline");
        return true;
      });
      // A bounded number of connections is read at once; past it, new ones wait in the listener's queue.
      const bool accepting = pending_.size() < kMaxPending;
      std::vector<pollfd> fds;
      fds.push_back({listener_, static_cast<short>(accepting ? POLLIN : 0), 0});
      auto wake = deadline;
      for (const Pending& p : pending_) {
        fds.push_back({p.fd.get(), POLLIN, 0});
        wake = std::min(wake, p.deadline);
      }
      const double left = std::max(0.0, seconds_left(wake));
      const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::min(left * 1000.0 + 1.0, 60000.0)));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error(ErrorKind::io, "poll failed: " + errno_text(errno));
      }
      // Reads what arrived; a connection whose message is complete is judged.
      std::vector<std::size_t> finished;
      for (std::size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents) finished.push_back(i - 1);
      for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
        const auto at = static_cast<std::ptrdiff_t>(*it);
        if (!read_some(pending_[*it], judge)) pending_.erase(pending_.begin() + at);
      }
      if (accepting && (fds[0].revents & POLLIN)) accept_new();
    }
  }

 private:
  static constexpr std::size_t kMaxPending = 256;

  void refuse(Pending& p, const std::string& why) {
    ++refusals_;
    const std::string line = "rendezvous: closed the connection from " + p.peer + ": it " + why;
    if (refused_)
      refused_(line);
    else
      std::fprintf(stderr, "unet-train: %s\n", line.c_str());
    p.fd.reset();
  }

  void accept_new() {
    sockaddr_in from{};
    socklen_t len = sizeof from;
    UniqueFd fd(::accept4(listener_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) return;
      // Out of descriptors (EMFILE) and the like: the pending ones go on; a later round tries again.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) return;
      throw Error(ErrorKind::io, "accept failed: " + errno_text(errno));
    }
    Pending p;
    p.fd = std::move(fd);
    p.peer = endpoint_text(from);
    p.got.reserve(rendezvous::kFrameSize);
    p.deadline = Clock::now() +
                 std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(hello_timeout_s_));
    pending_.push_back(std::move(p));
  }

  // Reads what is there without blocking; false when the connection is done with (judged or refused).
  bool read_some(Pending& p, const Judge& judge) {
    const std::size_t want = rendezvous::kFrameSize + (p.frame ? p.frame->body_size : 0);
    const std::size_t at = p.got.size();
    p.got.resize(want);  // at most a frame, then at most the body the frame's kind allows
    const ssize_t n = ::recv(p.fd.get(), p.got.data() + at, want - at, 0);
    if (n <= 0) {
      p.got.resize(at);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
      refuse(p, n == 0 ? "closed after " + std::to_string(at) + " bytes, before its hello was complete"
                       : "failed: " + errno_text(errno));
      return false;
    }
    p.got.resize(at + static_cast<std::size_t>(n));
    if (p.got.size() < want) return true;
    try {
      if (!p.frame) {
        p.frame = rendezvous::decode_frame(p.got, expected_);
        if (p.frame->body_size > 0) return true;  // its body comes next
      }
      const std::span<const std::byte> body =
          std::span<const std::byte>(p.got).subspan(rendezvous::kFrameSize);
      if (const std::optional<std::string> why = judge(p, *p.frame, body)) refuse(p, *why);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::usage) throw;
      refuse(p, "sent a malformed message: " + e.message());
    }
    return false;
  }

  int listener_;
  std::vector<rendezvous::Expected> expected_;
  double hello_timeout_s_;
  std::function<void(const std::string&)> refused_;
  std::vector<Pending> pending_;
  int refusals_ = 0;
};

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

// Reads one whole message of an `expected` kind, blocking until the deadline; nullopt when the peer closed
// the connection first. Error(usage) when the frame is not one of them or announces more than it may hold.
std::optional<std::pair<rendezvous::Frame, std::vector<std::byte>>> read_message(
    int fd, Clock::time_point deadline, std::span<const rendezvous::Expected> expected) {
  std::array<std::byte, rendezvous::kFrameSize> frame_bytes{};
  if (!read_all(fd, frame_bytes.data(), frame_bytes.size(), deadline)) return std::nullopt;
  const rendezvous::Frame frame = rendezvous::decode_frame(frame_bytes, expected);
  std::vector<std::byte> body(frame.body_size);
  if (!read_all(fd, body.data(), body.size(), deadline)) return std::nullopt;
  return std::pair{frame, std::move(body)};
}

// Best effort, without waiting: the refusal fits the socket's buffer, and a peer that does not read it loses
// nothing it could use.
void send_refusal(int fd, rendezvous::RefusalReason reason, const std::string& text) {
  const std::vector<std::byte> bytes = rendezvous::encode_refusal({reason, text});
  [[maybe_unused]] const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

class TcpProcessGroup final : public ProcessGroup {
 public:
  TcpProcessGroup(int rank, int size, const std::string& master_addr, int master_port, const JoinOptions& o)
      : ProcessGroup(rank, size, {}), message_timeout_s_(o.message_timeout_s) {
    using rendezvous::Kind;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o.rendezvous_timeout_s));
    rendezvous::check_host_name(master_addr, "MASTER_ADDR");
    // What every rank proves before anything it says is believed (rendezvous_protocol.h).
    const rendezvous::Proof proof = rendezvous::job_proof(
        o.job_identity.empty() ? "port " + std::to_string(master_port) : o.job_identity);
    const std::string host = host_name().substr(0, rendezvous::kMaxHostName);
    const std::string master =
        "rank 0 (MASTER_ADDR " + master_addr + ", MASTER_PORT " + std::to_string(master_port) + ")";
    std::vector<rendezvous::Peer> peers;
    UniqueFd ring_listener;
    if (rank == 0) {
      in_addr bound{};
      UniqueFd listener = listen_at_master(master_addr, master_port, bound);
      // The ring listener too listens only where rank 0 is reached.
      ring_listener = try_listen(bound, 0);
      if (!ring_listener)
        throw Error(ErrorKind::io, "the ring: cannot listen on " + ip_text(bound) + ": " + errno_text(errno));
      peers.resize(static_cast<std::size_t>(size));
      peers[0] = {ip_text(bound), port_of(ring_listener.get()), host};
      std::vector<UniqueFd> joined(static_cast<std::size_t>(size));
      int come = 1;
      const std::vector<rendezvous::Expected> hello{{Kind::hello, rendezvous::kMaxHelloBody}};
      Doorkeeper door(listener.get(), hello, o.hello_timeout_s, o.on_refused);
      door.run(
          deadline, [&] { return come == size; },
          [&](Pending& p, const rendezvous::Frame&,
              std::span<const std::byte> body) -> std::optional<std::string> {
            const rendezvous::Hello h = rendezvous::decode_hello(body);
            if (h.proof != proof) {
              send_refusal(
                  p.fd.get(), rendezvous::RefusalReason::wrong_job,
                  "rank 0 refused this process: it did not prove it is a rank of rank 0's job; every "
                  "rank of a run needs the same UNET_JOB_TOKEN (unset on all, or the same on all)");
              return "did not prove it is a rank of this job (another UNET_JOB_TOKEN, or another program)";
            }
            // Proven: a rank of this job, whose mistakes end the run as they would with any rank.
            const std::string who = "rank " + std::to_string(h.rank) + " (" + h.host + ", " + p.peer + ")";
            if (h.size != size) {
              const std::string why = who + " was told " + std::to_string(h.size) +
                                      " processes (WORLD_SIZE), rank 0 " + std::to_string(size);
              send_refusal(p.fd.get(), rendezvous::RefusalReason::wrong_size, why);
              throw Error(ErrorKind::config, why);
            }
            const auto at = static_cast<std::size_t>(h.rank);
            if (h.rank == 0 || joined[at]) {
              const std::string why = "two processes say they are rank " + std::to_string(h.rank) +
                                      " (one is " + who + "): each needs its own RANK";
              send_refusal(p.fd.get(), rendezvous::RefusalReason::duplicate_rank, why);
              throw Error(ErrorKind::config, why);
            }
            sockaddr_in addr{};
            socklen_t len = sizeof addr;
            if (::getpeername(p.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
              return "vanished: " + errno_text(errno);
            peers[at] = {ip_text(addr.sin_addr), h.ring_port, h.host};
            set_blocking(p.fd.get(), true);
            joined[at] = std::move(p.fd);
            ++come;
            return std::nullopt;
          },
          [&] {
            std::vector<int> missing;
            for (int r = 1; r < size; ++r)
              if (!joined[static_cast<std::size_t>(r)]) missing.push_back(r);
            return std::string(missing.size() == 1 ? "rank " : "ranks ") +
                   rendezvous::rank_list_text(missing) + " to join rank 0 at " + master_addr + ":" +
                   std::to_string(master_port);
          });
      const std::vector<std::byte> table = rendezvous::encode_peer_table(peers);
      for (int r = 1; r < size; ++r)
        if (!write_all(joined[static_cast<std::size_t>(r)].get(), table.data(), table.size(), deadline))
          throw Error(ErrorKind::cancelled, "rank " + std::to_string(r) + " left during the rendezvous");
    } else {
      UniqueFd fd = connect_to(master_addr, master_port, deadline, master);
      // This rank's ring listener: on the address it reaches rank 0 from, which is where rank 0 tells the
      // previous rank to connect.
      const in_addr local = local_address_of(fd.get());
      ring_listener = try_listen(local, 0);
      if (!ring_listener)
        throw Error(ErrorKind::io, "the ring: cannot listen on " + ip_text(local) + ": " + errno_text(errno));
      const std::vector<std::byte> hello =
          rendezvous::encode_hello({proof, rank, size, port_of(ring_listener.get()), host});
      const std::vector<rendezvous::Expected> reply{{Kind::peer_table, rendezvous::max_peer_table_body(size)},
                                                    {Kind::refusal, rendezvous::kMaxRefusalBody}};
      std::optional<std::pair<rendezvous::Frame, std::vector<std::byte>>> answer;
      try {
        if (write_all(fd.get(), hello.data(), hello.size(), deadline))
          answer = read_message(fd.get(), deadline, reply);
      } catch (const Error& e) {
        throw Error(e.kind(), master + ": " + e.message());
      }
      if (!answer)
        throw Error(ErrorKind::cancelled, master + " closed the rendezvous: see its output for why");
      if (answer->first.kind == Kind::refusal) {
        const rendezvous::Refusal refusal = rendezvous::decode_refusal(answer->second);
        if (refusal.reason == rendezvous::RefusalReason::wrong_job)
          throw ConfigError("UNET_JOB_TOKEN", master + ": " + refusal.text);
        throw Error(ErrorKind::config, master + " refused this rank: " + refusal.text);
      }
      peers = rendezvous::decode_peer_table(answer->second, size);
    }
    std::vector<std::string> hosts;
    hosts.reserve(peers.size());
    for (const rendezvous::Peer& p : peers) hosts.push_back(p.host);
    set_hosts(std::move(hosts));

    // The ring: every rank connects to the next and proves itself there (the next one's listener queues the
    // connection), then admits the previous one's, which must prove the same.
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    const rendezvous::Peer& to = peers[static_cast<std::size_t>(next)];
    next_ = connect_to(to.address, to.ring_port, deadline, describe(next));
    const std::vector<std::byte> ring_hello = rendezvous::encode_ring_hello({proof, rank});
    if (!write_all(next_.get(), ring_hello.data(), ring_hello.size(), deadline))
      throw Error(ErrorKind::cancelled, describe(next) + " left while the ring formed");
    const std::vector<rendezvous::Expected> expected{{Kind::ring_hello, rendezvous::kRingHelloBody}};
    Doorkeeper door(ring_listener.get(), expected, o.hello_timeout_s, o.on_refused);
    door.run(
        deadline, [&] { return static_cast<bool>(prev_); },
        [&](Pending& p, const rendezvous::Frame&,
            std::span<const std::byte> body) -> std::optional<std::string> {
          const rendezvous::RingHello h = rendezvous::decode_ring_hello(body, size);
          if (h.proof != proof) return "did not prove it is a rank of this job (on the ring's listener)";
          if (h.rank != prev)
            return "says it is rank " + std::to_string(h.rank) + ", but this rank's ring link comes from " +
                   describe(prev);
          set_blocking(p.fd.get(), true);
          prev_ = std::move(p.fd);
          return std::nullopt;
        },
        [&] { return describe(prev) + " to connect to this rank's ring listener"; });
    tune_link(next_.get());
    tune_link(prev_.get());
  }

  ~TcpProcessGroup() override = default;

  void send_next(MessageTag tag, std::span<const std::byte> bytes) override {
    throw_if_aborted();
    const int next = (rank() + 1) % size();
    const auto header =
        rendezvous::encode_message_header({kMessageMagic, static_cast<std::uint32_t>(tag), bytes.size()});
    const auto deadline = message_deadline();
    try {
      if (write_all(next_.get(), header.data(), header.size(), deadline) &&
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

  void recv_prev(MessageTag tag, std::vector<std::byte>& bytes, std::uint64_t max_bytes) override {
    throw_if_aborted();
    const int prev = (rank() + size() - 1) % size();
    const auto closed = [&] {
      throw_if_aborted();
      return Error(ErrorKind::cancelled, describe(prev) + " closed its connection: it failed or was killed");
    };
    std::array<std::byte, rendezvous::kMessageHeaderSize> header{};
    const auto deadline = message_deadline();
    try {
      if (!read_all(prev_.get(), header.data(), header.size(), deadline)) throw closed();
      check_header(prev, rendezvous::decode_message_header(header), tag, max_bytes);
      bytes.resize(static_cast<std::size_t>(rendezvous::decode_message_header(header).size));
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
