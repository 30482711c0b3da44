// rckpt._core.pack_folder / unpack_folder: the files of a checkpoint folder
// (a Hugging Face Trainer's checkpoint-N, for rckpt.hf) in one .rckpt, and
// back. rckpt.hf decides what each file is; this does the reading, the
// bundling (convert/bundle.h) and the writing.
//
// The .rckpt's tree maps each converted file's key to its tree, and "files"
// to {relative path: uint8 tensor} for the files carried as bytes; its
// metadata "rckpt.folder" is the JSON {"version": 1, "files": [[relative
// path, how, key], ...]} that unpack_folder follows ("pytorch",
// "safetensors", "tree" or "bytes").
#ifndef RCKPT_PYTHON_SRC_FOLDER_BINDING_H_
#define RCKPT_PYTHON_SRC_FOLDER_BINDING_H_

#include <nanobind/nanobind.h>

namespace rckpt::python {

// pack_folder(dst, entries, options: SaveOptions) -> dict
//   entries: [(relative path, how, key, section, payload)], how one of
//     "pytorch", "safetensors" (payload: the file's path; imported, its tree
//       put under key, its tensors in section; a file whose import fails or
//       holds objects the export cannot write back is carried as bytes
//       instead, with the reason),
//     "tree" (payload: a plain Python value, a parsed JSON file's),
//     "bytes" (payload: the file's path).
//   Returns {"files": [(relative path, how, reason)], "tensors": n,
//   "bytes": n}: how each file went in ("" reason when as asked).
// unpack_folder(src, dst_dir) -> [(relative path, value)]
//   Writes every file but the "tree" ones under dst_dir (creating
//   subdirectories), returning those as Python values for the caller to
//   write. InvalidArgument for an .rckpt without "rckpt.folder".
void RegisterFolder(nanobind::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_FOLDER_BINDING_H_
