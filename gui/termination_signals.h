// SIGINT, SIGTERM and SIGHUP (Ctrl-C in the launching terminal, `kill`, a logout) as a Qt signal on the GUI
// thread, so that the workbench stops a run at its next step boundary, saves last.safetensors and closes,
// instead of dying with the steps since the last checkpoint. A second one while the first is handled ends
// the process at once (exit code 130), saying first what that loses, as unet-train does.
//
// Signal dispositions belong to the process: one TerminationSignals may exist at a time. The handler only
// write()s a byte to a socket pair (async-signal-safe); a QSocketNotifier reads it on the GUI thread.
#pragma once

#include <QObject>
#include <QSocketNotifier>

#include <QString>
#include <array>
#include <csignal>
#include <memory>

namespace unet::gui {

class TerminationSignals : public QObject {
  Q_OBJECT
 public:
  // Installs the handlers; when another TerminationSignals exists or the socket pair cannot be made, it
  // installs none (installed() is false) and the signals keep their previous dispositions.
  explicit TerminationSignals(QObject* parent = nullptr);
  ~TerminationSignals() override;  // restores the dispositions it replaced
  TerminationSignals(const TerminationSignals&) = delete;
  TerminationSignals& operator=(const TerminationSignals&) = delete;
  bool installed() const { return notifier_ != nullptr; }

 signals:
  // The signal's number (SIGINT, SIGTERM or SIGHUP), on the thread this object lives on.
  void received(int signal_number);

 private:
  void read_signal();

  std::array<int, 2> pair_{-1, -1};  // [0] read here, [1] written by the handler
  std::unique_ptr<QSocketNotifier> notifier_;
  std::array<struct sigaction, 3> previous_{};
};

// "SIGINT", "SIGTERM", "SIGHUP"; "signal N" for others.
QString signal_name(int signal_number);

}  // namespace unet::gui
