# zstd, the byte-shuffle filter and XXH3-64 checksums.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/codec/codec.cc
  ${RCKPT_SRC}/codec/codec_name.cc)

# XXH3 built for AVX2 in its own file, selected at run time (codec.cc), so the
# library still runs on any x86-64 CPU.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND
   CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_sources(rckpt PRIVATE ${RCKPT_SRC}/codec/xxh3_avx2.cc)
  set_source_files_properties(${RCKPT_SRC}/codec/xxh3_avx2.cc PROPERTIES COMPILE_OPTIONS "-mavx2")
  target_compile_definitions(rckpt PRIVATE RCKPT_HAVE_XXH3_AVX2=1)
endif()
