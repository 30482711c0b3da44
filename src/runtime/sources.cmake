target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/runtime/doctor.cc
  ${RCKPT_SRC}/runtime/device_pool.cc
  ${RCKPT_SRC}/runtime/emulated_runtime.cc
  ${RCKPT_SRC}/runtime/host_runtime.cc
  ${RCKPT_SRC}/runtime/runtime_select.cc)
