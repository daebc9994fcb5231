# SinterMLIR.cmake - finds LLVM/MLIR 19 (Debian's llvm-19-dev, libmlir-19-dev) and defines
# sinter_mlir_deps, the one interface target that MLIR-using libraries link: the MLIR and LLVM
# dylibs, their headers as SYSTEM includes, and tablegen support for ODS.
find_package(MLIR REQUIRED CONFIG
  HINTS /usr/lib/llvm-19/lib/cmake/mlir /usr/lib/llvm-19/lib/cmake/llvm)
if(NOT MLIR_VERSION MATCHES "^19\\.")
  message(FATAL_ERROR "Sinter needs MLIR 19, found ${MLIR_VERSION} (run tools/setup.sh)")
endif()
message(STATUS "Using MLIR ${MLIR_VERSION} from ${MLIR_DIR}")
list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
# MLIR's CMake config names mlir-tblgen without a path, and Debian does not put it on PATH.
if(NOT IS_ABSOLUTE "${MLIR_TABLEGEN_EXE}")
  find_program(SINTER_MLIR_TBLGEN mlir-tblgen HINTS "${LLVM_TOOLS_BINARY_DIR}" REQUIRED)
  set(MLIR_TABLEGEN_EXE "${SINTER_MLIR_TBLGEN}")
endif()
include(AddLLVM)
include(AddMLIR)

set(SINTER_LLVM_TOOLS_DIR "${LLVM_TOOLS_BINARY_DIR}")
set(SINTER_LIT "${LLVM_BUILD_MAIN_SRC_DIR}/utils/lit/lit.py")
if(NOT EXISTS "${SINTER_LIT}")
  set(SINTER_LIT "/usr/lib/llvm-19/build/utils/lit/lit.py")
endif()

add_library(sinter_mlir_deps INTERFACE)
target_include_directories(sinter_mlir_deps SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
target_compile_definitions(sinter_mlir_deps INTERFACE ${LLVM_DEFINITIONS})
# LLVM is built without RTTI; code that subclasses its types must match.
target_compile_options(sinter_mlir_deps INTERFACE -fno-rtti)
target_link_libraries(sinter_mlir_deps INTERFACE MLIR LLVM)
