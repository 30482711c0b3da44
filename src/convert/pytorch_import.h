// The PyTorch importer over any RandomAccessFile (a byte range of a larger
// file, as DCP's .distcp items are), for the other importers.
#ifndef RCKPT_SRC_CONVERT_PYTORCH_IMPORT_H_
#define RCKPT_SRC_CONVERT_PYTORCH_IMPORT_H_

#include "rckpt/checkpoint.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"

namespace rckpt::convert {

// ImportPyTorch of the torch.save archive `file` holds.
Result<Checkpoint> ImportPyTorchFile(const RandomAccessFile& file, const ImportOptions& options,
                                     ImportReport* report);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_PYTORCH_IMPORT_H_
