# rckpt::rckpt as another build of this tree made it (RCKPT_LIBRARY_FROM: that
# build's folder), instead of building the library here: the Python extension
# for a second interpreter (scripts/gpu-prepare.sh: the GPU machine's
# CPython 3.12) compiles only its own sources. That build must be of the same
# sources, on this machine (its dependencies are found here).
set(prebuilt ${RCKPT_LIBRARY_FROM}/src/librckpt.a)
if(NOT EXISTS ${prebuilt})
  message(FATAL_ERROR "RCKPT_LIBRARY_FROM=${RCKPT_LIBRARY_FROM}: no ${prebuilt} (build the "
                      "library there first)")
endif()
add_library(rckpt STATIC IMPORTED GLOBAL)
set_target_properties(rckpt PROPERTIES
  IMPORTED_LOCATION ${prebuilt}
  INTERFACE_INCLUDE_DIRECTORIES "${PROJECT_SOURCE_DIR}/include;${RCKPT_LIBRARY_FROM}/generated")
target_link_libraries(rckpt INTERFACE zstd::libzstd_shared rckpt::xxhash flatbuffers::flatbuffers
                      Threads::Threads ${CMAKE_DL_LIBS})
if(RCKPT_HAVE_S3)
  target_link_libraries(rckpt INTERFACE CURL::libcurl OpenSSL::Crypto pugixml::pugixml)
endif()
add_library(rckpt::rckpt ALIAS rckpt)
message(STATUS "rckpt: the library from ${prebuilt}")
