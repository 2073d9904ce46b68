# Warning flags shared by every dtsuite target; DTS_WERROR makes them fatal (CI).
add_library(dts_warnings INTERFACE)
target_compile_options(dts_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>)
# GCC 12 at -O2/-O3 reports std::string concatenation as an overlapping memcpy (GCC bug 105651,
# fixed in 13); the false positive would fail every Release build with warnings as errors.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(dts_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
if(DTS_WERROR)
  target_compile_options(dts_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
