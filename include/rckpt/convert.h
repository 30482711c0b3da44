// Conversion between rckpt checkpoints and PyTorch (.pt/.pth/.bin zip
// archives written by torch.save) and safetensors files.
//
// PyTorch import never executes anything from the file. A restricted
// unpickler turns the pickled object into the checkpoint's state tree:
// tensors become tensor references (named by their key path joined with
// '.'), RNG states become RNG records, recognised values (OrderedDict with
// its _metadata, torch.Size, torch.device, dtypes, sets, bytes, big ints) are
// kept as data, and any other class becomes an inert object node (class path
// and fields) that is listed in the ImportReport; ImportOptions::strict
// refuses such files instead. docs/CONVERT.md has the section table, the RNG
// detection rules, the pickle limits and the safetensors metadata layout.
//
// Error codes: NotFound (missing file); Corruption (a damaged archive, pickle
// or header: the message names what and where); Unsupported (legacy pre-1.6
// and TorchScript archives, compressed zip entries, globals that would call a
// function such as os.system, unknown classes under strict, dtypes rckpt
// cannot hold, inert objects on export); InvalidArgument (bad options);
// IoError (the file system).
//
// Writes are atomic like rckpt::Save: a temporary file in the same directory,
// fsync, rename over the path, fsync of the directory; a failed export leaves
// any previous file at the path untouched.
//
// Thread-safety: all functions may be called concurrently.
#ifndef RCKPT_CONVERT_H_
#define RCKPT_CONVERT_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/options.h"
#include "rckpt/status.h"

namespace rckpt {

class FileSystem;

// Resource limits of the unpickler. A pickle that exceeds one is refused with
// Corruption naming the limit; raise them for unusually large files.
struct PickleLimits {
  uint64_t max_pickle_bytes = 1ull << 30;  // size of data.pkl
  uint64_t max_memo_entries = 1ull << 24;
  uint64_t max_stack_depth = 1ull << 24;   // values and marks on the VM stack
  // Nodes the object graph may expand to in the state tree (a graph that
  // shares containers many times over is refused rather than exploded).
  uint64_t max_tree_nodes = 1ull << 26;
  uint32_t max_nesting = 2000;             // container nesting in the tree
};

struct ImportOptions {
  // Refuse (Unsupported) files holding classes outside the recognised set
  // instead of keeping them as inert objects.
  bool strict = false;
  // More keys whose uint8 1-D tensors are RNG states (matched against a
  // tensor's full name or its last key); the kind comes from the size
  // (5056: torch_cpu, 16: torch_cuda), opaque otherwise.
  std::vector<std::string> rng_keys;
  // Top-level key -> section, overriding the default table.
  std::map<std::string, std::string> section_overrides;
  // CRC-32 mismatches of PyTorch records are a warning when false (torch can
  // write files without CRCs), Corruption when true.
  bool require_crc32 = false;
  PickleLimits limits;
  // Map the file (copy-on-write) and let contiguous tensors point into the
  // mapping instead of copying them (PyTorch and safetensors files). The
  // tensors keep the mapping alive; as with a mapped rckpt::Load, the file
  // must not be truncated or rewritten in place while they live (replacing it
  // by a rename, as every rckpt and torch writer does, is fine). Falls back
  // to reading where the file cannot be mapped.
  bool map_file = true;
  // ImportDcp only: a directory (the output's, say) where each tensor is
  // staged, one at a time, in a scratch file that is then mapped back and
  // removed, so memory holds one tensor (and one chunk) rather than the whole
  // checkpoint. Empty: tensors are held in memory.
  std::string scratch_dir;
  FileSystem* fs = nullptr;  // nullptr: DefaultFileSystem() (file.h)
};

struct ImportReport {
  std::string format;  // "pytorch", "safetensors", "rckpt" or "dcp"
  // What the file records by itself rather than the importer derived: all of
  // it for .rckpt files and for .pt and .safetensors files rckpt wrote (they
  // carry its layout); less for other files (docs/CONVERT.md, "What each
  // format records"). DiffOptions::a_records / b_records take it, so that
  // `rckpt diff` compares what both files record.
  Recorded recorded;
  // Class paths kept as inert objects, sorted, without duplicates.
  std::vector<std::string> inert_classes;
  std::vector<std::string> warnings;
};

// What an export could not keep of a checkpoint, and where its parts went.
struct ExportReport {
  // One line per thing the written file does not hold (an inert object
  // written as None under drop_objects, ...). Empty: a re-import gives the
  // checkpoint back whole (`rckpt diff --strict` says identical).
  std::vector<std::string> not_kept;
  // Parts the file keeps only for rckpt: readers of the format other than
  // rckpt do not see them (user metadata in a .pt, the state tree of a
  // .safetensors, ...).
  std::vector<std::string> notes;
};

struct ExportOptions {
  // Replace inert objects by None (PyTorch) or drop them from the tree
  // metadata check (safetensors keeps them in JSON regardless) instead of
  // refusing the export.
  bool drop_objects = false;
  // Where each PyTorch record's data starts (a power of two, 1..4096; torch
  // writes 64, GPUDirect Storage wants 4096).
  uint32_t pytorch_alignment = 64;
  FileSystem* fs = nullptr;  // nullptr: DefaultFileSystem() (file.h)
  // Receives what the export could not keep and where the rest went
  // (optional; filled on success).
  ExportReport* report = nullptr;
};

// Imports a torch.save zip archive (.pt, .pth, .bin, any extension).
// `report` (optional) receives the inert classes and warnings.
Result<Checkpoint> ImportPyTorch(const std::string& path, const ImportOptions& options = {},
                                 ImportReport* report = nullptr);
// The same over bytes in memory (also the fuzz entry point of the importer).
Result<Checkpoint> ImportPyTorchFromBytes(std::span<const std::byte> bytes,
                                          const ImportOptions& options = {},
                                          ImportReport* report = nullptr);

// Writes `ck` as a torch.save-compatible zip archive that
// torch.load(weights_only=True) reads: the tree as dicts/lists/tuples/sets/
// scalars (an OrderedDict with its _metadata where imported so), tensors as
// _rebuild_tensor_v2/v3 views tagged with their origin device ('cpu',
// 'cuda:N'), RNG records as uint8 tensors tagged 'cpu' (python records as
// random.getstate()'s tuple). Tensors or RNG records the tree does not
// reference are added to a top-level dict under their names (InvalidArgument
// when the tree is not a dict and some are unreferenced). What torch.load has
// no place for (sections, roles, tensor names, RNG kinds and origins, user
// metadata, the added keys) goes to the record .data/rckpt.json, which
// ImportPyTorch reads back: export then import gives `ck` back whole.
// Unsupported for inert objects unless drop_objects (then each is reported
// in ExportReport::not_kept).
Status ExportPyTorch(const Checkpoint& ck, const std::string& path,
                     const ExportOptions& options = {});

// Imports a .safetensors file, validating it exactly as the reference reader
// does (header size and limit, JSON, dtype/shape/size consistency, no gaps,
// no overlaps, no trailing bytes). A file written by ExportSafetensors comes
// back identical (sections, roles, origin devices, RNG records, tree, user
// metadata); any other file becomes a flat map of name -> tensor with
// sections from the same table as PyTorch import, and its __metadata__ as the
// checkpoint's metadata.
Result<Checkpoint> ImportSafetensors(const std::string& path,
                                     const ImportOptions& options = {},
                                     ImportReport* report = nullptr);
Result<Checkpoint> ImportSafetensorsFromBytes(std::span<const std::byte> bytes,
                                              const ImportOptions& options = {},
                                              ImportReport* report = nullptr);

// Writes `ck` as safetensors: tensors (device tensors are refused with
// InvalidArgument; load them to host first) and RNG records as U8 tensors, the
// tree, sections, roles, origins and RNG kinds as JSON under "rckpt.*" keys of
// __metadata__, user metadata as the other keys (InvalidArgument for a user
// key starting with "rckpt."). Unsupported for c128 (no safetensors dtype).
Status ExportSafetensors(const Checkpoint& ck, const std::string& path,
                         const ExportOptions& options = {});

// Imports a torch.distributed.checkpoint (DCP) directory as DCP's
// FileSystemWriter leaves it: `dir`/.metadata (a pickle read by the
// restricted unpickler with DCP's metadata classes on an allow-list, never
// executed) and the __<rank>_<n>.distcp files holding each item as a
// torch.save archive. The tree is the original nested state dict rebuilt
// from the planner's key paths; each tensor sits at its path, named by the
// path's components joined with '.' (DCP's fqn), in the section of its first
// component, assembled whole from its chunks when it was saved sharded;
// other values are tree values. Metadata "rckpt.dcp.version" is DCP's
// metadata version. NotFound for a missing .metadata or .distcp file;
// Corruption for damaged metadata, byte ranges past a file's end, chunks
// whose dtype or shape disagree with .metadata or that do not tile their
// tensor; Unsupported for globals off the allow-list, stream transforms
// (DCP extensions), items that are not torch.save archives (DCP's
// safetensors serialization) and values rckpt cannot hold.
Result<Checkpoint> ImportDcp(const std::string& dir, const ImportOptions& options = {},
                             ImportReport* report = nullptr);

enum class CheckpointFormat { kUnknown, kRckpt, kPyTorch, kSafetensors, kDcp };
std::string_view CheckpointFormatName(CheckpointFormat f);  // "rckpt" "pytorch" ... "dcp"

// The format by file name: .rckpt; .pt .pth .bin .ckpt .tar (pytorch);
// .safetensors. kUnknown otherwise.
CheckpointFormat FormatFromExtension(const std::string& path);

// The format by content: the rckpt magic, a zip local header (pytorch), a
// plausible safetensors header, or a directory holding .metadata (dcp; a
// directory without one is InvalidArgument). Also recognises, and refuses with an
// Unsupported message saying what they are and how to re-save them, legacy
// pre-1.6 torch files, tar-format torch files and the preview format.
Result<CheckpointFormat> DetectFormat(const std::string& path, FileSystem* fs = nullptr);

// True when `path` can be read and is none of the formats by its content
// (DetectFormat), and its name has no known extension either: a reader must
// be told its format. False when it cannot be read (the read says why).
bool FormatUnknownByContentAndName(const std::string& path);

// Reads any supported checkpoint: by content (DetectFormat), falling back to
// the extension. .rckpt files are loaded to host memory with their origin
// devices kept (rckpt::Load with MapLocation::To(cpu)).
Result<Checkpoint> ReadAnyCheckpoint(const std::string& path,
                                     const ImportOptions& options = {},
                                     ImportReport* report = nullptr);

// Writes `ck` in the format named by `path`'s extension (.rckpt via
// rckpt::Save with `save_options`). InvalidArgument for an unknown extension.
Status WriteAnyCheckpoint(const Checkpoint& ck, const std::string& path,
                          const ExportOptions& options = {},
                          const SaveOptions& save_options = {});

// The format names every front end takes (`rckpt convert --from/--to`,
// rckpt.convert's from_format / to_format): "rckpt"; "pt", "pth" or
// "pytorch"; "safetensors"; "dcp" (read only). InvalidArgument naming them
// otherwise.
Result<CheckpointFormat> ParseCheckpointFormat(std::string_view name);

// ReadAnyCheckpoint with the format named rather than detected (kUnknown:
// detected, as ReadAnyCheckpoint).
Result<Checkpoint> ReadCheckpointAs(CheckpointFormat format, const std::string& path,
                                    const ImportOptions& options = {},
                                    ImportReport* report = nullptr);

// WriteAnyCheckpoint with the format named rather than taken from the
// extension (kUnknown: by extension). InvalidArgument for kDcp, which rckpt
// reads but does not write.
Status WriteCheckpointAs(CheckpointFormat format, const Checkpoint& ck, const std::string& path,
                         const ExportOptions& options = {},
                         const SaveOptions& save_options = {});

// rckpt::Load of a checkpoint of any format, with the same options and
// rules: an .rckpt (or a file of no known format, which Load refuses saying
// what is wrong) is loaded as it is; a PyTorch, safetensors or DCP file is
// imported (`import`: strict, rng_keys, ...; its fs defaults to
// options.fs) into a private .rckpt copy in a new directory under the
// system's temporary directory (TMPDIR), saved raw and without fsync, and
// loaded from there with `options`, so map_location, model_device,
// sections and the RNG rules apply to it unchanged. The directory is
// removed before LoadAny returns (a mapped load keeps the copy's pages).
// The load options are checked before anything is read. Errors are Load's
// and the importer's, naming `path`, never the copy. `report` (optional)
// receives the format ("rckpt" for an .rckpt), inert classes and warnings.
Result<Checkpoint> LoadAny(const std::string& path, const LoadOptions& options,
                           const ImportOptions& import = {}, ImportReport* report = nullptr);

// What `rckpt convert` and rckpt.convert do, with their options.
struct ConvertOptions {
  // The input's format (kUnknown: by content, then by extension) and the
  // output's (kUnknown: by extension); ParseCheckpointFormat reads the names.
  CheckpointFormat from = CheckpointFormat::kUnknown;
  CheckpointFormat to = CheckpointFormat::kUnknown;
  // How the input is read. An empty scratch_dir stages a DCP directory's
  // tensors beside the output (in the system's temporary directory for an
  // object-storage output).
  ImportOptions import;
  // How the output is written: `save` for an .rckpt, `exporter` for the
  // other formats (its report is ConvertReport::written).
  SaveOptions save;
  ExportOptions exporter;
  // Rewrites the origin devices the output records (bytes stay as they
  // are), in MapLocation::Parse's syntax: one device for every origin, or a
  // tag map "cuda:1=cuda:0,cpu=cuda:1" (a bare "cuda" is cuda:0, as a
  // recorded origin). Unset: origins kept.
  MapLocation set_device;
  // Reads the input and writes the output (import, save and exporter's fs
  // when those are null); nullptr: DefaultFileSystem() (file.h).
  FileSystem* fs = nullptr;
};

struct ConvertReport {
  ImportReport read;     // the input's format, inert classes, warnings
  ExportReport written;  // what the output does not keep, and notes
  size_t tensors = 0;
  size_t rng_records = 0;
  uint64_t tensor_bytes = 0;
  double seconds = 0;
  // "SRC -> DST: N tensors, M RNG records, X MiB in T s (R/s)"
  std::string summary;
};

// Converts `src` into `dst`. `dst` is checked before `src` is read:
// InvalidArgument for a directory, a name without a known extension and no
// `to`, or a malformed object-storage URL; NotFound for a path in a
// directory that does not exist. Unsupported for an input that is none of
// the formats by content or by name. Then the input is read, its recorded
// origins rewritten by `set_device`, and the output written atomically
// (a failed conversion leaves a previous file intact). Other errors are the
// reader's and the writer's. `report` (optional) is filled on success.
Status Convert(const std::string& src, const std::string& dst, const ConvertOptions& options,
               ConvertReport* report = nullptr);

}  // namespace rckpt

#endif  // RCKPT_CONVERT_H_
