# Whether to build libunet_cuda.so, the CUDA backend module the engine loads at run time (docs/CUDA_BACKEND.md
# section 1). Included from UNetDependencies.cmake after cuDNN is looked for. Without nvcc or cuDNN the project
# still configures and builds: the engine then says "this build has no CUDA backend (why)" at run time.
#
# Sets UNET_HAVE_CUDA_BACKEND (ON/OFF) and UNET_CUDA_NOT_BUILT_BECAUSE (the why, when OFF).
set(UNET_WITH_CUDA AUTO CACHE STRING "Build the CUDA backend module: AUTO (when nvcc and cuDNN are found), ON, OFF")
set_property(CACHE UNET_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
# SASS for Ampere, Ada and Hopper, and PTX for newer GPUs. Each target costs ~1.5 s per .cu file: while iterating
# on one GPU, pass -DUNET_CUDA_ARCHITECTURES=90-real (or that GPU's). Not all-major: CMake 3.25 predates CUDA 13
# dropping sm_50..72.
set(UNET_CUDA_ARCHITECTURES "80-real;86-real;89-real;90-real;90-virtual" CACHE STRING
    "CUDA architectures of libunet_cuda.so (CMAKE_CUDA_ARCHITECTURES syntax)")
if(NOT UNET_WITH_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "UNET_WITH_CUDA must be AUTO, ON or OFF, got \"${UNET_WITH_CUDA}\"")
endif()

set(UNET_HAVE_CUDA_BACKEND OFF)
set(UNET_CUDA_NOT_BUILT_BECAUSE "")
if(UNET_WITH_CUDA STREQUAL "OFF")
  set(UNET_CUDA_NOT_BUILT_BECAUSE "it was configured with UNET_WITH_CUDA=OFF")
else()
  include(CheckLanguage)
  check_language(CUDA)  # honours CUDACXX and CMAKE_CUDA_COMPILER; a path given there is not checked, so check it
  if(NOT CMAKE_CUDA_COMPILER OR NOT EXISTS "${CMAKE_CUDA_COMPILER}")
    set(UNET_CUDA_NOT_BUILT_BECAUSE "nvcc was not found at configure time")
  elseif(NOT UNET_HAVE_CUDNN)
    set(UNET_CUDA_NOT_BUILT_BECAUSE "cuDNN was not found at configure time")
  endif()
endif()

if(UNET_CUDA_NOT_BUILT_BECAUSE STREQUAL "")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${UNET_CUDA_ARCHITECTURES})  # must be set before enable_language
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
  # CMake 3.25 knows no CUDA20 dialect for nvcc (CMAKE_CUDA_STANDARD 20 fails), so the flag is given by hand.
  add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)
  # It also falls back to CXX_STANDARD (20) for CUDA sources and then fails ("requires the language dialect
  # CUDA20"), or adds its own -std=c++17 after ours: tell it nvcc's C++20 flag.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(UNET_HAVE_CUDA_BACKEND ON)
  # "80-real;86-real;90-virtual" -> "sm_80,86,90+PTX" for the summary.
  set(_unet_sass "")
  set(_unet_ptx "")
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX REPLACE "-(real|virtual)$" "" number "${arch}")
    if(arch MATCHES "-virtual$")
      set(_unet_ptx "+PTX")
    else()
      list(APPEND _unet_sass ${number})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _unet_sass)
  list(JOIN _unet_sass "," _unet_sass)
  _unet_summary(UNET_HAVE_CUDA_BACKEND "CUDA backend module" "(sm_${_unet_sass}${_unet_ptx})")
else()
  if(UNET_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "UNET_WITH_CUDA=ON, but ${UNET_CUDA_NOT_BUILT_BECAUSE}: set CUDACXX=/usr/local/cuda/bin/nvcc "
                        "and UNET_CUDNN_ROOT, or configure with UNET_WITH_CUDA=AUTO")
  endif()
  _unet_summary(UNET_HAVE_CUDA_BACKEND "CUDA backend module" "${UNET_CUDA_NOT_BUILT_BECAUSE}")
endif()
