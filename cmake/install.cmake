# `cmake --install`: the tpusim executable, the libraries and their headers with a CMake package
# config for C++ programs (find_package(tpusim): tpusim::isa, tpusim::sim_core, tpusim::sim,
# tpusim::compiler; docs/python.md, "From C++"), and the Python module (python/CMakeLists.txt).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(TPUSIM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tpusim)

install(TARGETS tpusim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The headers use C++20; tpusim_warnings is private to our targets but, as a link-only
# dependency of static libraries, must be in the export set too (it carries compile options only).
foreach(lib isa sim_core sim compiler)
  set_property(TARGET ${lib} APPEND PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_20)
endforeach()
install(TARGETS isa sim_core sim compiler tpusim_warnings EXPORT tpusimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tpusim)
install(DIRECTORY isa sim compiler DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tpusim FILES_MATCHING PATTERN "*.h")
install(EXPORT tpusimTargets NAMESPACE tpusim:: DESTINATION ${TPUSIM_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tpusimConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tpusimConfig.cmake INSTALL_DESTINATION ${TPUSIM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tpusimConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tpusimConfig.cmake ${PROJECT_BINARY_DIR}/tpusimConfigVersion.cmake
        DESTINATION ${TPUSIM_CMAKE_DIR})
