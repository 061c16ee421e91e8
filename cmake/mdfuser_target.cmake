# SPDX-License-Identifier: MIT
# Shared settings for mdfuser's own targets.

set(MDFUSER_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow=local -Wno-unused-parameter)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports false positives inside std::string and std::vector at -O3
  # (GCC PRs 105329, 107852).
  list(APPEND MDFUSER_WARNING_FLAGS -Wno-restrict -Wno-array-bounds -Wno-stringop-overflow)
endif()
if(MDFUSER_WARNINGS_AS_ERRORS)
  list(APPEND MDFUSER_WARNING_FLAGS -Werror)
endif()

# mdfuser_apply_settings(<target> [SANITIZE])
#   Warnings for every target; sanitizers only where SANITIZE is given (the
#   compiler stages and their tests, which do not load torch).
function(mdfuser_apply_settings target)
  cmake_parse_arguments(ARG "SANITIZE" "" "" ${ARGN})
  target_compile_options(${target} PRIVATE ${MDFUSER_WARNING_FLAGS})
  if(ARG_SANITIZE AND MDFUSER_SANITIZE)
    target_compile_options(${target} PUBLIC -fsanitize=${MDFUSER_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PUBLIC -fsanitize=${MDFUSER_SANITIZE})
  endif()
endfunction()

# mdfuser_stage(<name> SOURCES ... [DEPENDS ...] [TORCH])
#   A static library for one pipeline stage, with csrc/ on its include path.
function(mdfuser_stage name)
  cmake_parse_arguments(ARG "TORCH" "" "SOURCES;DEPENDS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/csrc)
  target_link_libraries(${name} PUBLIC ${ARG_DEPENDS})
  if(ARG_TORCH)
    mdfuser_apply_settings(${name})
  else()
    mdfuser_apply_settings(${name} SANITIZE)
  endif()
endfunction()
