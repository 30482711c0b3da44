# The .rckpt byte layout (schema/FORMAT.md): header and footer, manifest,
# state-tree codec, the verify-then-trust reader and the byte writer.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/format/layout.cc
  ${RCKPT_SRC}/format/chunk_codec.cc
  ${RCKPT_SRC}/format/tree_codec.cc
  ${RCKPT_SRC}/format/manifest.cc
  ${RCKPT_SRC}/format/file_reader.cc
  ${RCKPT_SRC}/format/padding.cc
  ${RCKPT_SRC}/format/skeleton.cc
  ${RCKPT_SRC}/format/writer.cc)
