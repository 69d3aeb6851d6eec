# `cpack -G DEB` in the build folder makes a Debian package of the command line tools, the workbench (when
# built), the reference documents, the example configs and the desktop integration.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION share/doc/unet-workbench FILES_MATCHING PATTERN "*.md")
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
# Depends: dpkg-shlibdeps reads the installed binaries and names the Debian packages (with minimum versions) of
# every library they link, so the list cannot fall behind the code; the fresh-root check installs the package
# with --no-install-recommends to prove it. Added by hand: what no binary links but a user needs, Qt's platform
# plugins (xcb, wayland), without which the workbench cannot open a window on a desktop. The CUDA libraries stay
# optional (loaded at run time, never linked).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "qt6-qpa-plugins")
include(CPack)
