# The CUDA backend's own kernels (the .cu files of this folder) as an OBJECT library, unet_cuda_kernels, for
# the unet_cuda module to link. The module's wiring (cmake/UNetCuda.cmake, the folder's CMakeLists.txt)
# includes this file; it does nothing unless the CUDA backend is being built, i.e. the CUDA language is
# enabled. Host code sees only kernels.h (launchers with plain arguments).
if((TARGET unet_cuda OR UNET_HAVE_CUDA_BACKEND) AND CMAKE_CUDA_COMPILER)
  file(GLOB UNET_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cu)
  add_library(unet_cuda_kernels OBJECT ${UNET_CUDA_KERNEL_SOURCES})
  # engine/ for "unet/backend/cuda/kernel_math.h"; no engine library: the kernels need none of it.
  get_filename_component(UNET_CUDA_KERNELS_ENGINE_DIR ${CMAKE_CURRENT_LIST_DIR}/../../.. ABSOLUTE)
  target_include_directories(unet_cuda_kernels PUBLIC ${UNET_CUDA_KERNELS_ENGINE_DIR})
  # C++20 (templated lambdas): CMAKE_CUDA_STANDARD, with the flag cmake/UNetCuda.cmake teaches CMake 3.25.
  # In a shared module; one translation unit per kernel family, no device linking.
  set_target_properties(unet_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_SEPARABLE_COMPILATION OFF)
  if(UNET_CUDA_ARCHITECTURES)
    set_target_properties(unet_cuda_kernels PROPERTIES CUDA_ARCHITECTURES "${UNET_CUDA_ARCHITECTURES}")
  endif()
  target_compile_options(unet_cuda_kernels PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(TARGET CUDA::toolkit)  # headers (cuda_runtime_api.h) for whoever includes kernels.h
    target_link_libraries(unet_cuda_kernels PUBLIC CUDA::toolkit)
  endif()
endif()
