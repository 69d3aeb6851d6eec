// unet-workbench: the desktop front end. `unet-workbench [--demo] [CONFIG.json]`: opens the last config (or
// the built-in demo with --demo, or the given file). --help and --version print and exit before a
// QApplication exists: they need no display (a QApplication without one aborts).
#include <QApplication>
#include <QCommandLineParser>

#include <string_view>

#include "gui/main_window.h"
#include "gui/termination_signals.h"
#include "unet/backend/address_space.h"

namespace {

// Whether the arguments ask for the help or the version, which QCommandLineParser prints and exits on.
// --help-all is not among them: it also lists QApplication's own options (-platform, -style), which only a
// QApplication knows.
bool asks_for_help_or_version(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    for (const std::string_view flag : {"-h", "--help", "-v", "--version"})
      if (argv[i] == flag) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  unet::fit_malloc_to_address_space_limit();  // before any thread allocates
  QCoreApplication::setOrganizationName("UNet Workbench");
  QCoreApplication::setApplicationName("unet-workbench");
  QCoreApplication::setApplicationVersion(UNET_VERSION);

  QCommandLineParser parser;
  parser.setApplicationDescription("Train U-Net segmentation models and see what fits in memory.");
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption demo("demo",
                                "Open on the built-in demo config (synthetic cells), not the last one.");
  parser.addOption(demo);
  parser.addPositionalArgument("config", "A JSON config to open.", "[config.json]");
  if (asks_for_help_or_version(argc, argv)) {
    const QCoreApplication text_only(argc, argv);
    parser.process(text_only);  // prints the text and exits
  }

  QApplication app(argc, argv);
  Q_INIT_RESOURCE(resources);  // the icons and the guide, compiled into the unet_gui static library
  QApplication::setWindowIcon(QIcon(":/unet-workbench-256.png"));
  parser.process(app);

  unet::gui::WindowOptions options;
  options.demo = parser.isSet(demo);
  if (!parser.positionalArguments().isEmpty()) options.config_file = parser.positionalArguments().front();
  unet::gui::MainWindow window(options);
  // Ctrl-C in the terminal, kill, a logout: stop and save the run, then close, rather than die unsaved.
  unet::gui::TerminationSignals termination;
  QObject::connect(&termination, &unet::gui::TerminationSignals::received, &window,
                   &unet::gui::MainWindow::close_on_signal);
  window.show();
  if (!window.show_guide_on_first_launch() && options.config_file.isEmpty())
    window.offer_to_resume_unfinished_run();
  return QApplication::exec();
}
