# Installing kiln: `cmake --install BUILD --prefix DIR` lays out
#
#   bin/kiln                     the planner CLI
#   include/kiln/...             kiln.h (the C API) and the C++ headers of the
#                                runtime, kernels, platform, schema and backends
#   lib/libkiln_*.a              the runtime core, platform, CPU kernels,
#                                C API, and each backend's runtime half
#   lib/cmake/kiln/              find_package(kiln): imported targets kiln::runtime,
#                                kiln::cpu_kernels, kiln::c, kiln::vulkan, ...
#   lib/pkgconfig/kiln.pc        the C API for pkg-config users
#
# A library joins the package with kiln_install_library(target), called
# from the folder that defines it (each backend installs its own), after the
# target is complete. The C++ headers include flatbuffers' headers, which
# must be on the consumer's include path (Debian: libflatbuffers-dev); C
# callers of kiln.h need nothing else.
include(GNUInstallDirs)
set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

# Installs `target` into kiln's export set as kiln::<name without kiln_>.
# Its include directories inside the source or build tree are installed
# under include/ and replaced by include/ in the installed target.
# DEPENDENCIES: packages its installed target needs found first (Vulkan);
# the package looks for them quietly, so a consumer without one can still
# use everything that does not link the backend needing it.
function(kiln_install_library target)
  cmake_parse_arguments(ARG "" "" "DEPENDENCIES" ${ARGN})
  if(CMAKE_CROSSCOMPILING AND NOT KILN_PLATFORM STREQUAL "posix")
    return()  # firmware images link the build tree; nothing to install
  endif()
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(dirs)
    set(wrapped "")
    foreach(dir IN LISTS dirs)
      if(dir MATCHES "^\\$<")
        list(APPEND wrapped "${dir}")
        continue()
      endif()
      list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
      if(dir MATCHES "^${PROJECT_SOURCE_DIR}/" OR dir MATCHES "^${PROJECT_BINARY_DIR}/")
        install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
                FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
      endif()
    endforeach()
    list(APPEND wrapped "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${wrapped}")
  endif()
  string(REGEX REPLACE "^kiln_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  install(TARGETS ${target} EXPORT kilnTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  foreach(dependency IN LISTS ARG_DEPENDENCIES)
    set_property(GLOBAL APPEND PROPERTY KILN_INSTALL_DEPENDENCIES ${dependency})
  endforeach()
endfunction()

# The package files; called once, after every library was added.
function(kiln_install_package)
  if(CMAKE_CROSSCOMPILING AND NOT KILN_PLATFORM STREQUAL "posix")
    return()
  endif()
  get_property(dependencies GLOBAL PROPERTY KILN_INSTALL_DEPENDENCIES)
  list(REMOVE_DUPLICATES dependencies)
  set(KILN_FIND_DEPENDENCIES "")
  foreach(dependency IN LISTS dependencies)
    string(APPEND KILN_FIND_DEPENDENCIES "find_package(${dependency} QUIET)\n")
  endforeach()
  install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR})
  include(CMakePackageConfigHelpers)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR}
                                PATH_VARS CMAKE_INSTALL_BINDIR)
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
          DESTINATION ${KILN_INSTALL_CMAKEDIR})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
