# The core types: Status, DType, Device, Tensor, Tree, Checkpoint, RNG
# records and their byte layouts, shard geometry.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/core/status.cc
  ${RCKPT_SRC}/core/dtype.cc
  ${RCKPT_SRC}/core/device.cc
  ${RCKPT_SRC}/core/tensor.cc
  ${RCKPT_SRC}/core/tree.cc
  ${RCKPT_SRC}/core/checkpoint.cc
  ${RCKPT_SRC}/core/rng.cc
  ${RCKPT_SRC}/core/mt_state.cc
  ${RCKPT_SRC}/core/shard_geometry.cc)
