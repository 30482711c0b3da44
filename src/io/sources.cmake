# Files: the POSIX and in-memory file systems and atomic replacement.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/io/atomic_write.cc
  ${RCKPT_SRC}/io/mem_file.cc
  ${RCKPT_SRC}/io/posix_file.cc)
