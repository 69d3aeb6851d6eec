# Warnings on, everywhere in the project (third-party headers are included as SYSTEM and stay quiet).
add_library(unet_warnings INTERFACE)
target_compile_options(unet_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
                            -Wcast-align -Wmissing-declarations -Wformat=2 -Wimplicit-fallthrough>
  # GCC 12 reports a false -Wrestrict inside libstdc++'s string concatenation at -O2/-O3 (GCC bug 105329).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>)

if(UNET_SANITIZE)
  # Undefined behaviour stops the program (as a fuzzer needs it to) instead of printing and going on.
  add_compile_options(-fsanitize=${UNET_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${UNET_SANITIZE})
endif()
