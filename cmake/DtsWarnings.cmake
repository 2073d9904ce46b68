# Warning flags shared by every dtsuite target; DTS_WERROR makes them fatal (CI).
add_library(dts_warnings INTERFACE)
target_compile_options(dts_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>)
if(DTS_WERROR)
  target_compile_options(dts_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
