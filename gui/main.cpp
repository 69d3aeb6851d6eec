// unet-workbench: the desktop front end. `unet-workbench [--demo] [CONFIG.json]`: opens the last config (or
// the built-in demo with --demo, or the given file).
#include <QApplication>
#include <QCommandLineParser>

#include "gui/main_window.h"
#include "gui/termination_signals.h"
#include "unet/backend/address_space.h"

int main(int argc, char** argv) {
  unet::fit_malloc_to_address_space_limit();  // before any thread allocates
  QApplication app(argc, argv);
  Q_INIT_RESOURCE(resources);  // the icons and the guide, compiled into the unet_gui static library
  QApplication::setOrganizationName("UNet Workbench");
  QApplication::setApplicationName("unet-workbench");
  QApplication::setApplicationVersion(UNET_VERSION);
  QApplication::setWindowIcon(QIcon(":/unet-workbench-256.png"));

  QCommandLineParser parser;
  parser.setApplicationDescription("Train U-Net segmentation models and see what fits in memory.");
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption demo("demo",
                                "Open on the built-in demo config (synthetic cells), not the last one.");
  parser.addOption(demo);
  parser.addPositionalArgument("config", "A JSON config to open.", "[config.json]");
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
