# xxHash (libxxhash) as the imported target rckpt::xxhash: its header and
# library on the search path (CMAKE_PREFIX_PATH first, so a prefix given
# there wins over the system's), else through pkg-config.
if(TARGET rckpt::xxhash)
  return()
endif()
find_path(XXHASH_INCLUDE_DIR xxhash.h)
find_library(XXHASH_LIBRARY NAMES xxhash)
add_library(rckpt::xxhash INTERFACE IMPORTED)
if(XXHASH_INCLUDE_DIR AND XXHASH_LIBRARY)
  target_include_directories(rckpt::xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
  target_link_libraries(rckpt::xxhash INTERFACE ${XXHASH_LIBRARY})
else()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(XXHASH QUIET IMPORTED_TARGET libxxhash)
  endif()
  if(NOT TARGET PkgConfig::XXHASH)
    message(FATAL_ERROR "xxHash not found: install libxxhash-dev (Debian), or put xxhash.h and "
                        "libxxhash on CMAKE_PREFIX_PATH")
  endif()
  target_link_libraries(rckpt::xxhash INTERFACE PkgConfig::XXHASH)
endif()
set(Xxhash_FOUND TRUE)
