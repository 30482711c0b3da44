# Sharded saves and loads over a Communicator (rckpt/distributed.h): the
# agreement on outcomes, the shared file each rank writes its extent of, the
# collective save (save.cc: its checks and shared steps; save_file.cc and
# save_object.cc: its two protocols) and load. No MPI here: rckpt/mpi.h is library rckpt_mpi.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/distributed/collective.cc
  ${RCKPT_SRC}/distributed/load.cc
  ${RCKPT_SRC}/distributed/part_layout.cc
  ${RCKPT_SRC}/distributed/save.cc
  ${RCKPT_SRC}/distributed/save_file.cc
  ${RCKPT_SRC}/distributed/save_object.cc
  ${RCKPT_SRC}/distributed/shared_file.cc)
