include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS rckpt EXPORT rckptTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/rckpt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET rckpt_cli)
  install(TARGETS rckpt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT rckptTargets NAMESPACE rckpt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rckpt)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rckptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rckptConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rckpt)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rckptConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rckptConfig.cmake ${PROJECT_BINARY_DIR}/rckptConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rckpt)
configure_file(${PROJECT_SOURCE_DIR}/cmake/rckpt.pc.in ${PROJECT_BINARY_DIR}/rckpt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rckpt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
