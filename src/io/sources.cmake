# Files: the file interfaces' defaults, the POSIX and in-memory file systems,
# atomic replacement and the choice of file system by URL.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/io/atomic_write.cc
  ${RCKPT_SRC}/io/file.cc
  ${RCKPT_SRC}/io/url_file_system.cc
  ${RCKPT_SRC}/io/mem_file.cc
  ${RCKPT_SRC}/io/posix_file.cc)
