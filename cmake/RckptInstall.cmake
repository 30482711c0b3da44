include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS rckpt EXPORT rckptTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET rckpt_mpi)
  # rckpt::mpi for consumers, exported beside rckpt::rckpt.
  set_target_properties(rckpt_mpi PROPERTIES EXPORT_NAME mpi)
  install(TARGETS rckpt_mpi EXPORT rckptTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set(RCKPT_EXPORTS_MPI ON)
else()
  set(RCKPT_EXPORTS_MPI OFF)
  # Without MPI the header would name a library that is not installed.
  set(rckpt_header_exclude PATTERN mpi.h EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/rckpt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  ${rckpt_header_exclude})
if(TARGET rckpt_cli)
  install(TARGETS rckpt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT rckptTargets NAMESPACE rckpt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rckpt)
# The C++ ABI the library is built with, which rckpt::torch checks libtorch's
# against when it is built on its own against this installation (torch/).
include(${PROJECT_SOURCE_DIR}/cmake/RckptTorch.cmake)
rckpt_cxx11_abi(RCKPT_CXX11_ABI)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rckptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rckptConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rckpt)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rckptConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rckptConfig.cmake ${PROJECT_BINARY_DIR}/rckptConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindXxhash.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rckpt)
set(RCKPT_PC_REQUIRES_PRIVATE "libzstd libxxhash")
if(RCKPT_HAVE_S3)
  string(APPEND RCKPT_PC_REQUIRES_PRIVATE " libcurl libcrypto pugixml")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/rckpt.pc.in ${PROJECT_BINARY_DIR}/rckpt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rckpt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
