#include "format/host_load.h"

#include "util/thread_pool.h"

namespace rckpt {

Status DecodeChunksToHost(const FileReader& reader, const std::vector<ChunkTask>& tasks,
                          bool verify, int threads, const ProgressCallback& progress) {
  uint64_t total = 0;
  for (const auto& t : tasks) total += t.tensor->chunks[t.chunk].raw_size;
  ThreadPool pool(std::max(1, ResolveThreads(threads) - 1));
  // Batches bound the work between progress reports and cancellation checks.
  const size_t batch = static_cast<size_t>(pool.size() + 1) * 8;
  uint64_t done = 0;
  for (size_t begin = 0; begin < tasks.size(); begin += batch) {
    const size_t end = std::min(tasks.size(), begin + batch);
    std::vector<Status> results(end - begin);
    pool.ParallelFor(end - begin, [&](size_t k) {
      thread_local std::vector<std::byte> stored, scratch;
      const ChunkTask& task = tasks[begin + k];
      const ChunkMeta& c = task.tensor->chunks[task.chunk];
      std::span<std::byte> out(task.dst + c.tensor_offset, c.raw_size);
      Status s;
      if (c.codec == Codec::kNone && c.shuffle_elem == 0) {
        s = reader.ReadStored(c, out);
        if (s.ok()) s = reader.DecodeChunk(*task.tensor, task.chunk, out, out, scratch, verify);
      } else {
        stored.resize(c.stored_size);
        s = reader.ReadStored(c, stored);
        if (s.ok()) s = reader.DecodeChunk(*task.tensor, task.chunk, stored, out, scratch, verify);
      }
      results[k] = s;
    });
    for (size_t k = 0; k < results.size(); ++k) {
      if (!results[k].ok()) return results[k];
      done += tasks[begin + k].tensor->chunks[tasks[begin + k].chunk].raw_size;
    }
    if (progress && !progress(done, total)) return Status::IoError("load cancelled by the progress callback");
  }
  return Status::Ok();
}

Result<Checkpoint> CheckpointSkeleton(const Manifest& m) {
  Checkpoint ck;
  for (const auto& s : m.sections) RCKPT_RETURN_IF_ERROR(ck.AddSection(s.name, s.role));
  for (const auto& r : m.rng) RCKPT_RETURN_IF_ERROR(ck.AddRng(r.name, r.kind, r.bytes, r.origin));
  ck.Tree() = m.tree;
  ck.Metadata() = m.metadata;
  return ck;
}

Result<Checkpoint> LoadTensorsToHost(const FileReader& reader, const std::vector<size_t>& indices,
                                     bool verify, int threads, const ProgressCallback& progress) {
  const Manifest& m = reader.manifest();
  RCKPT_ASSIGN_OR_RETURN(Checkpoint ck, CheckpointSkeleton(m));
  std::vector<Tensor> tensors;
  std::vector<ChunkTask> tasks;
  tensors.reserve(indices.size());
  for (size_t i : indices) {
    const TensorMeta& tm = m.tensors[i];
    RCKPT_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(tm.dtype, tm.shape));
    for (size_t c = 0; c < tm.chunks.size(); ++c) {
      tasks.push_back(ChunkTask{&tm, c, static_cast<std::byte*>(t.data())});
    }
    tensors.push_back(std::move(t));
  }
  RCKPT_RETURN_IF_ERROR(DecodeChunksToHost(reader, tasks, verify, threads, progress));
  for (size_t k = 0; k < indices.size(); ++k) {
    const TensorMeta& tm = m.tensors[indices[k]];
    RCKPT_RETURN_IF_ERROR(ck.AddTensor(tm.section, tm.name, std::move(tensors[k]), tm.role));
    ck.mutable_tensors().back().origin = tm.origin;
  }
  return ck;
}

}  // namespace rckpt
