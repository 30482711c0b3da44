target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/codec/codec.cc
  # rng.cc belongs to src/core; it is listed here so that src/core/sources.cmake
  # keeps a single owner. Move it there when convenient.
  ${RCKPT_SRC}/core/rng.cc)
