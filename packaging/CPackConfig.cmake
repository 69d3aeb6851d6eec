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

# The CUDA module (lib/unet-workbench/libunet_cuda.so, where the loader looks beside bin/) links cuDNN, which is
# optional: without it the engine says how to install it and trains on the CPU. dpkg-shlibdeps would turn the
# module's NEEDED libcudnn.so.9 into "Depends: libcudnn9-cuda-13" on a machine that has NVIDIA's package, and
# fail on one without cuDNN at all. So it is shown a placeholder with that soname first (-l, searched before the
# system's folders), which no package owns: CPack runs it with --ignore-missing-info, so cuDNN adds no dependency
# and the package installs without NVIDIA's packages. The placeholder is never installed.
if(TARGET unet_cuda)
  set(_unet_placeholder_dir ${PROJECT_BINARY_DIR}/packaging/shlibdeps-placeholders)
  add_library(unet_cudnn_placeholder SHARED ${CMAKE_CURRENT_LIST_DIR}/cudnn_placeholder.c)
  set_target_properties(unet_cudnn_placeholder PROPERTIES
    PREFIX "" OUTPUT_NAME libcudnn SUFFIX ".so.9" NO_SONAME ON LIBRARY_OUTPUT_DIRECTORY ${_unet_placeholder_dir})
  target_link_options(unet_cudnn_placeholder PRIVATE -Wl,-soname,libcudnn.so.9)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_unet_placeholder_dir})
  set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libcudnn9-cuda-13, libnccl2")
endif()
include(CPack)
