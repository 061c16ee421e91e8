# SPDX-License-Identifier: MIT
# Finds CUTLASS's headers in the nvidia-cutlass package of the Python
# interpreter the build uses (requirements-gpu.txt), or in
# MDFUSER_CUTLASS_DIR (the folder holding include/cutlass and
# tools/util/include). Sets MDFUSER_CUTLASS_INCLUDE_DIRS, empty if not found.
#
# The package is found without importing it: importing it needs its Python
# dependencies, which the headers do not.

set(MDFUSER_CUTLASS_DIR "" CACHE PATH
  "CUTLASS sources (include/ and tools/util/include/); default: the nvidia-cutlass package")
if(NOT MDFUSER_CUTLASS_DIR)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c
      "import importlib.util as u, os; s = u.find_spec('cutlass_library'); print(os.path.join(os.path.dirname(s.origin), 'source'))"
    OUTPUT_VARIABLE _cutlass_dir
    RESULT_VARIABLE _cutlass_result
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET)
  if(_cutlass_result EQUAL 0)
    set(MDFUSER_CUTLASS_DIR "${_cutlass_dir}")
  endif()
endif()
set(MDFUSER_CUTLASS_INCLUDE_DIRS "")
if(MDFUSER_CUTLASS_DIR AND EXISTS "${MDFUSER_CUTLASS_DIR}/include/cutlass/cutlass.h")
  set(MDFUSER_CUTLASS_INCLUDE_DIRS
    "${MDFUSER_CUTLASS_DIR}/include" "${MDFUSER_CUTLASS_DIR}/tools/util/include")
endif()
