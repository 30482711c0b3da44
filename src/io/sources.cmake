target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/io/atomic_path.cc
  ${RCKPT_SRC}/io/mem_file.cc
  ${RCKPT_SRC}/io/posix_file.cc)
