target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/format/layout.cc
  ${RCKPT_SRC}/format/tree_codec.cc
  ${RCKPT_SRC}/format/manifest.cc
  ${RCKPT_SRC}/format/file_reader.cc
  ${RCKPT_SRC}/format/padding.cc
  ${RCKPT_SRC}/format/skeleton.cc
  ${RCKPT_SRC}/format/shard_layout.cc
  ${RCKPT_SRC}/format/writer.cc)
