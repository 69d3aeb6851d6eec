# `cpack -G DEB` in the build folder makes a Debian package of the command line tools, the workbench (when
# built), the example configs and the desktop integration.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/configs/ DESTINATION share/unet-workbench/configs
        FILES_MATCHING PATTERN "*.json")
if(EXISTS ${PROJECT_SOURCE_DIR}/resources/unet-workbench.desktop)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/unet-workbench.desktop DESTINATION share/applications)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/unet-workbench.svg DESTINATION share/icons/hicolor/scalable/apps)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/unet-workbench-256.png DESTINATION share/icons/hicolor/256x256/apps
          RENAME unet-workbench.png)
endif()

set(CPACK_PACKAGE_NAME "unet-workbench")
set(CPACK_PACKAGE_VENDOR "UNet Workbench")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "UNet Workbench developers")
set(CPACK_GENERATOR "DEB")
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Debian 12's libraries the binaries link against; the CUDA libraries stay optional (loaded at run time).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libdnnl2, libpng16-16, libjpeg62-turbo, libgomp1, libssl3, libfmt9, libqt6core6, libqt6gui6, libqt6widgets6, libqt6printsupport6, libqcustomplot2.1-qt6")
include(CPack)
