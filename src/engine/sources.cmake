# Saving and loading: the save, its encoder and the asynchronous save, placement, the load pipeline
# and staging ring, block reads, inspect/verify and diff.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/engine/async_save.cc
  ${RCKPT_SRC}/engine/block_read.cc
  ${RCKPT_SRC}/engine/caller_streams.cc
  ${RCKPT_SRC}/engine/device_alloc.cc
  ${RCKPT_SRC}/engine/diff.cc
  ${RCKPT_SRC}/engine/encode.cc
  ${RCKPT_SRC}/engine/inspect.cc
  ${RCKPT_SRC}/engine/load.cc
  ${RCKPT_SRC}/engine/map_location.cc
  ${RCKPT_SRC}/engine/pipeline.cc
  ${RCKPT_SRC}/engine/placement.cc
  ${RCKPT_SRC}/engine/save.cc
  ${RCKPT_SRC}/engine/save_options.cc
  ${RCKPT_SRC}/engine/staging_ring.cc)
