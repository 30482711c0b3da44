// The zero padding of a .rckpt file (schema/FORMAT.md §1, §4): the bytes of
// the data region that no chunk covers, and those between the data region
// and the manifest. No checksum covers them, so only this check notices
// bytes written there.
#ifndef RCKPT_SRC_FORMAT_PADDING_H_
#define RCKPT_SRC_FORMAT_PADDING_H_

#include <string>

#include "format/meta.h"
#include "rckpt/file.h"

namespace rckpt {

// OK when every padding byte of the file `manifest` describes is zero;
// otherwise Corruption naming `path`, the offset of the first non-zero byte,
// its value and the gap it lies in. IoError when a read fails. Reads only
// the gaps (for a saved file: less than one alignment unit per chunk).
Status VerifyZeroPadding(const RandomAccessFile& file, const Manifest& manifest,
                         const std::string& path);

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_PADDING_H_
