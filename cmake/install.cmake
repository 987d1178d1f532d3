# Install rules and the exported CMake package, so that another project can write
#
#   find_package(fmha 0.1 REQUIRED)                  # CMAKE_PREFIX_PATH or fmha_DIR points at the install
#   target_link_libraries(app PRIVATE fmha::fmha)    # static library + headers + the CUDA runtime and include path
#
# Installed: include/fmha/*.h, lib/libfmha.a, lib/libfmha_c.so (C entry points), lib/cmake/fmha/ (fmhaConfig.cmake,
# fmhaConfigVersion.cmake, fmhaTargets*.cmake), share/doc/fmha/LICENSE. tests/install/ checks it (label cpu).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FMHA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/fmha CACHE STRING "Where the fmha CMake package is installed")

install(TARGETS fmha fmha_c EXPORT fmhaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fmha DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(EXPORT fmhaTargets NAMESPACE fmha:: DESTINATION ${FMHA_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fmhaConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/fmhaConfig.cmake INSTALL_DESTINATION ${FMHA_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fmhaConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fmhaConfig.cmake ${PROJECT_BINARY_DIR}/fmhaConfigVersion.cmake
        DESTINATION ${FMHA_INSTALL_CMAKEDIR})
