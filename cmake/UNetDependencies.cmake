# Finds what the project builds against and remembers one summary line per part, printed at the end of
# configuration: a ✓ with the version and where it was found, or a ✗ with what is missing and how to fix it.
set(_unet_summary_lines "")
macro(_unet_summary ok what detail)
  if(${ok})
    list(APPEND _unet_summary_lines "  ✓ ${what} ${detail}")
  else()
    list(APPEND _unet_summary_lines "  ✗ ${what}: ${detail}")
  endif()
endmacro()

set(_unet_apt_hint "run scripts/setup-debian.sh (installs Debian's packages)")

# --- required: oneDNN, nlohmann-json, libpng, libjpeg, libtiff, OpenSSL, {fmt}, ONNX, OpenCV imgproc, threads, OpenMP
find_package(dnnl CONFIG QUIET)
if(NOT dnnl_FOUND)
  message(FATAL_ERROR "oneDNN (libdnnl-dev) not found: ${_unet_apt_hint}")
endif()
_unet_summary(dnnl_FOUND "oneDNN ${dnnl_VERSION}" "(CPU backend)")

find_package(nlohmann_json 3.9 CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "nlohmann-json (nlohmann-json3-dev) not found: ${_unet_apt_hint}")
endif()
_unet_summary(nlohmann_json_FOUND "nlohmann-json ${nlohmann_json_VERSION}" "(configs, metrics, checkpoints)")

find_package(PNG QUIET)
find_package(JPEG QUIET)
if(NOT PNG_FOUND OR NOT JPEG_FOUND)
  message(FATAL_ERROR "libpng/libjpeg (libpng-dev, libjpeg62-turbo-dev) not found: ${_unet_apt_hint}")
endif()
_unet_summary(PNG_FOUND "libpng ${PNG_VERSION_STRING}, libjpeg ${JPEG_VERSION}" "(image decoding and writing)")

# TIFF through libtiff 4.5 or newer: its per-handle error handlers (TIFFOpenOptionsSetErrorHandlerExtR) keep
# every message off stderr without touching the process-global handler.
find_package(TIFF 4.5 QUIET)
if(NOT TIFF_FOUND)
  message(FATAL_ERROR "libtiff 4.5 or newer (libtiff-dev) not found: ${_unet_apt_hint}")
endif()
_unet_summary(TIFF_FOUND "libtiff ${TIFF_VERSION_STRING}" "(TIFF decoding: 8/16/32-bit and float samples)")

find_package(OpenSSL 3 QUIET COMPONENTS Crypto)
if(NOT OpenSSL_FOUND)
  message(FATAL_ERROR "OpenSSL 3 libcrypto (libssl-dev) not found: ${_unet_apt_hint}")
endif()
_unet_summary(OpenSSL_FOUND "OpenSSL ${OPENSSL_VERSION} libcrypto" "(checkpoint checksums)")

find_package(fmt 9 QUIET CONFIG)
if(NOT fmt_FOUND)
  message(FATAL_ERROR "{fmt} 9 or newer (libfmt-dev) not found: ${_unet_apt_hint}")
endif()
_unet_summary(fmt_FOUND "{fmt} ${fmt_VERSION}" "(checkpoint name templates)")

# ONNX export writes the model with the protobuf classes of Debian's libonnx-dev. Its CMake package links
# protobuf::libprotobuf without finding it, and the package does not pull in protobuf's headers
# (libprotobuf-dev): both are looked for here, protobuf first so that the target exists.
find_package(Protobuf QUIET)
if(NOT Protobuf_FOUND OR NOT TARGET protobuf::libprotobuf)
  message(FATAL_ERROR "protobuf (libprotobuf-dev) not found, needed by ONNX export: ${_unet_apt_hint}")
endif()
find_package(ONNX CONFIG QUIET)
if(NOT ONNX_FOUND OR NOT TARGET onnx_proto)
  message(FATAL_ERROR "ONNX (libonnx-dev) not found, needed by ONNX export: ${_unet_apt_hint}")
endif()
_unet_summary(ONNX_FOUND "ONNX ${ONNX_VERSION}, protobuf ${Protobuf_VERSION}" "(ONNX export)")

# Training-time augmentation warps and filters with OpenCV's imgproc (unet/data/augment_warp.cpp). Debian's
# libopencv-imgproc-dev and libopencv-core-dev ship no OpenCVConfig.cmake (only the whole libopencv-dev does), so
# the headers and the two libraries are looked for here and made one imported target, unet::opencv_imgproc, whose
# headers are system headers (OpenCV 4.6's trip C++20's enum-conversion warnings).
find_path(UNET_OPENCV_INCLUDE_DIR opencv2/imgproc.hpp PATH_SUFFIXES opencv4)
find_library(UNET_OPENCV_IMGPROC_LIBRARY opencv_imgproc)
find_library(UNET_OPENCV_CORE_LIBRARY opencv_core)
if(NOT UNET_OPENCV_INCLUDE_DIR OR NOT UNET_OPENCV_IMGPROC_LIBRARY OR NOT UNET_OPENCV_CORE_LIBRARY)
  message(FATAL_ERROR "OpenCV's imgproc (libopencv-imgproc-dev) not found, needed by augmentation: ${_unet_apt_hint}")
endif()
add_library(unet::opencv_imgproc INTERFACE IMPORTED)
set_target_properties(unet::opencv_imgproc PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${UNET_OPENCV_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${UNET_OPENCV_IMGPROC_LIBRARY};${UNET_OPENCV_CORE_LIBRARY}")
file(STRINGS "${UNET_OPENCV_INCLUDE_DIR}/opencv2/core/version.hpp" _unet_opencv_version_lines
     REGEX "#define CV_VERSION_(MAJOR|MINOR|REVISION) ")
string(REGEX REPLACE ".*MAJOR +([0-9]+).*MINOR +([0-9]+).*REVISION +([0-9]+).*" "\\1.\\2.\\3"
       _unet_opencv_version "${_unet_opencv_version_lines}")
set(_unet_opencv_found TRUE)
_unet_summary(_unet_opencv_found "OpenCV imgproc ${_unet_opencv_version}" "(augmentation warps and filters)")

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)

# --- optional: Open MPI (multi-process runs under mpirun; the engine loads libunet_mpi.so only then) ------------------
find_package(MPI QUIET COMPONENTS C)
set(UNET_HAVE_MPI ${MPI_C_FOUND})
if(MPI_C_FOUND)
  _unet_summary(UNET_HAVE_MPI "MPI ${MPI_C_VERSION}" "(${MPI_C_LIBRARIES}; mpirun launches)")
else()
  _unet_summary(UNET_HAVE_MPI "MPI" "not found: mpirun cannot launch runs (torchrun-style variables still can): ${_unet_apt_hint}")
endif()

# --- optional: CUDA toolkit, cuDNN, NCCL (the CUDA backend) -------------------------------------------------------
# Nothing about CUDA may stop a build. Debian 12's stock CMake 3.25.1 FindCUDAToolkit marks CUDA::nvToolsExt as
# deprecated whenever the project's minimum version is >= 3.25, without checking that the target exists; CUDA 13
# ships no libnvToolsExt, so configure dies there. The module reads only CMAKE_MINIMUM_REQUIRED_VERSION for that
# warning, so it is lowered for this one call (policies are not affected).
set(_unet_minimum_version "${CMAKE_MINIMUM_REQUIRED_VERSION}")
set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
find_package(CUDAToolkit QUIET)
set(CMAKE_MINIMUM_REQUIRED_VERSION "${_unet_minimum_version}")
set(UNET_HAVE_CUDA_TOOLKIT ${CUDAToolkit_FOUND})
if(CUDAToolkit_FOUND)
  _unet_summary(CUDAToolkit_FOUND "CUDA toolkit ${CUDAToolkit_VERSION}" "(${CUDAToolkit_BIN_DIR})")
else()
  _unet_summary(CUDAToolkit_FOUND "CUDA toolkit" "not found; set CUDAToolkit_ROOT=/usr/local/cuda to build the CUDA backend")
endif()

set(UNET_CUDNN_ROOT "" CACHE PATH "Where cuDNN is installed (include/ and lib/), if not beside the CUDA toolkit")
find_path(CUDNN_INCLUDE_DIR cudnn_version.h
  HINTS ${UNET_CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn HINTS ${UNET_CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
set(UNET_HAVE_CUDNN OFF)
if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_v REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
  string(REGEX REPLACE ".*CUDNN_MAJOR +([0-9]+).*CUDNN_MINOR +([0-9]+).*CUDNN_PATCHLEVEL +([0-9]+).*" "\\1.\\2.\\3"
         CUDNN_VERSION "${_cudnn_v}")
  set(UNET_HAVE_CUDNN ON)
  _unet_summary(UNET_HAVE_CUDNN "cuDNN ${CUDNN_VERSION}" "(${CUDNN_LIBRARY})")
else()
  _unet_summary(UNET_HAVE_CUDNN "cuDNN" "not found; set UNET_CUDNN_ROOT to the folder holding include/cudnn.h")
endif()

set(UNET_NCCL_ROOT "" CACHE PATH "Where NCCL is installed (include/ and lib/), if not beside the CUDA toolkit")
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${UNET_NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl HINTS ${UNET_NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
set(UNET_HAVE_NCCL OFF)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_v REGEX "#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*NCCL_MINOR +([0-9]+).*NCCL_PATCH +([0-9]+).*" "\\1.\\2.\\3"
         NCCL_VERSION "${_nccl_v}")
  set(UNET_HAVE_NCCL ON)
  _unet_summary(UNET_HAVE_NCCL "NCCL ${NCCL_VERSION}" "(${NCCL_LIBRARY})")
else()
  _unet_summary(UNET_HAVE_NCCL "NCCL" "not found; set UNET_NCCL_ROOT to the folder holding include/nccl.h")
endif()

include(UNetCuda)

# --- optional: Qt 6 (GUI and tests) and QCustomPlot ----------------------------------------------------------------
find_package(Qt6 QUIET COMPONENTS Core Test)
set(UNET_HAVE_QT_TEST ${Qt6Test_FOUND})
if(Qt6Test_FOUND)
  _unet_summary(UNET_HAVE_QT_TEST "Qt ${Qt6_VERSION} Test" "(test suites)")
else()
  _unet_summary(UNET_HAVE_QT_TEST "Qt 6 Test" "not found, tests are not built; ${_unet_apt_hint}")
endif()

# QCustomPlotQt6's CMake package needs Qt6::PrintSupport to exist before it is loaded.
find_package(Qt6 QUIET COMPONENTS Widgets PrintSupport)
if(Qt6Widgets_FOUND AND Qt6PrintSupport_FOUND)
  find_package(QCustomPlotQt6 QUIET)
endif()
if(Qt6Widgets_FOUND AND Qt6PrintSupport_FOUND AND QCustomPlotQt6_FOUND)
  set(UNET_HAVE_GUI_DEPS ON)
  _unet_summary(UNET_HAVE_GUI_DEPS "Qt ${Qt6_VERSION} Widgets + QCustomPlotQt6" "(desktop workbench)")
else()
  set(UNET_HAVE_GUI_DEPS OFF)
  _unet_summary(UNET_HAVE_GUI_DEPS "Qt 6 Widgets + QCustomPlotQt6" "not found, the workbench is not built; ${_unet_apt_hint}")
endif()

function(unet_print_configuration_summary)
  message(STATUS "")
  message(STATUS "UNet Workbench ${PROJECT_VERSION} (${CMAKE_BUILD_TYPE}):")
  foreach(line IN LISTS _unet_summary_lines)
    message(STATUS "${line}")
  endforeach()
  message(STATUS "")
endfunction()
