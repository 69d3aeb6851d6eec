#include "gui/termination_signals.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace unet::gui {

namespace {

constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};

// The write end of the live TerminationSignals' pair (-1: none), and whether a signal came already.
std::atomic<int> handler_fd{-1};
std::atomic<bool> signalled{false};

extern "C" void on_termination_signal(int signal_number) {
  if (signalled.exchange(true)) {
    // Only async-signal-safe calls here: write() and _Exit().
    static constexpr char kQuit[] =
        "\nunet-workbench: second interrupt: quitting at once; the steps since the last checkpoint are "
        "lost\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kQuit, sizeof kQuit - 1);
    std::_Exit(130);
  }
  const auto byte = static_cast<char>(signal_number);
  [[maybe_unused]] const ssize_t n = ::write(handler_fd.load(), &byte, 1);
}

}  // namespace

QString signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return QString("signal %1").arg(signal_number);
  }
}

TerminationSignals::TerminationSignals(QObject* parent) : QObject(parent) {
  if (handler_fd.load() != -1 ||
      ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair_.data()) != 0)
    return;
  handler_fd = pair_[1];
  signalled = false;
  notifier_ = std::make_unique<QSocketNotifier>(pair_[0], QSocketNotifier::Read);
  connect(notifier_.get(), &QSocketNotifier::activated, this, &TerminationSignals::read_signal);
  struct sigaction action {};
  action.sa_handler = on_termination_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
}

TerminationSignals::~TerminationSignals() {
  if (!installed()) return;
  for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  notifier_.reset();
  handler_fd = -1;
  signalled = false;
  for (const int fd : pair_) ::close(fd);
}

void TerminationSignals::read_signal() {
  char byte = 0;
  while (::read(pair_[0], &byte, 1) == 1) emit received(static_cast<unsigned char>(byte));
}

}  // namespace unet::gui
