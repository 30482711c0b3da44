target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/core/status.cc
  ${RCKPT_SRC}/core/dtype.cc
  ${RCKPT_SRC}/core/device.cc
  ${RCKPT_SRC}/core/tensor.cc
  ${RCKPT_SRC}/core/tree.cc
  ${RCKPT_SRC}/core/checkpoint.cc
  ${RCKPT_SRC}/core/codec_name.cc)
