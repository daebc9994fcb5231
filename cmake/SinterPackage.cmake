# SinterPackage.cmake - install rules and the package files users find Sinter with.
#
# `cmake --install build --prefix P` puts the public headers in P/include/sinter, libsinter.so in
# P/lib (or lib/<multiarch>), a CMake package in P/lib/cmake/Sinter (find_package(Sinter) gives
# Sinter::sinter for C and Rust-style users and Sinter::sinter_cpp for the C++ API), pkg-config
# files sinter.pc (C ABI) and sinter-cpp.pc (C++ API), and the commands sinter-run, sinter-bench,
# sinter-dump and sinter-opt in P/bin.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The C++ API: libsinter.so plus the Abseil headers and libraries its public headers use.
add_library(sinter_cpp INTERFACE)
target_link_libraries(sinter_cpp INTERFACE sinter absl::status absl::statusor absl::span)
target_compile_features(sinter_cpp INTERFACE cxx_std_17)

install(TARGETS sinter sinter_cpp EXPORT SinterTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/sinter DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

set(SINTER_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Sinter)
install(EXPORT SinterTargets NAMESPACE Sinter:: DESTINATION ${SINTER_CMAKE_INSTALL_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SinterConfig.cmake.in
  ${PROJECT_BINARY_DIR}/SinterConfig.cmake INSTALL_DESTINATION ${SINTER_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SinterConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SinterConfig.cmake
  ${PROJECT_BINARY_DIR}/SinterConfigVersion.cmake DESTINATION ${SINTER_CMAKE_INSTALL_DIR})

# pkg-config: the prefix is found from the .pc file's own place (${pcfiledir}), so the files hold
# no absolute path and `cmake --install --prefix` anywhere gives working files.
file(RELATIVE_PATH SINTER_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" SINTER_PC_TO_PREFIX "${SINTER_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/sinter.pc.in ${PROJECT_BINARY_DIR}/sinter.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/sinter-cpp.pc.in ${PROJECT_BINARY_DIR}/sinter-cpp.pc
  @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/sinter.pc ${PROJECT_BINARY_DIR}/sinter-cpp.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The commands. They link Sinter's libraries statically; their run path is the library folder next
# to them ($ORIGIN/../lib, so a relocated prefix still works) and the folders of the shared
# libraries they link outside the system's (LLVM 19's and MLIR 19's), so P/bin/sinter-run runs
# without LD_LIBRARY_PATH.
set(SINTER_TOOLS sinter-run sinter-bench sinter-dump sinter-opt)
file(RELATIVE_PATH SINTER_BIN_TO_LIB "/prefix/${CMAKE_INSTALL_BINDIR}"
  "/prefix/${CMAKE_INSTALL_LIBDIR}")
set_target_properties(${SINTER_TOOLS} PROPERTIES INSTALL_RPATH "$ORIGIN/${SINTER_BIN_TO_LIB}"
  INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS ${SINTER_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
