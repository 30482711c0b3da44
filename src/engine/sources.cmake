target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/engine/async_save.cc
  ${RCKPT_SRC}/engine/block_read.cc
  ${RCKPT_SRC}/engine/load.cc
  ${RCKPT_SRC}/engine/map_location.cc
  ${RCKPT_SRC}/engine/pipeline.cc
  ${RCKPT_SRC}/engine/placement.cc
  ${RCKPT_SRC}/engine/report.cc
  ${RCKPT_SRC}/engine/staging_ring.cc)
