// The stand-in CUDA driver's controls: a C API the tests reach by dlopen'ing
// the stand-in (the same handle rckpt's CUDA runtime loads it by).
//
// The stand-in (libcuda_standin.so) exports the part of the driver API rckpt
// resolves, over host memory, so rckpt's real CUDA runtime runs on machines
// without a GPU. It behaves like a device where that catches bugs, and is
// no kinder than a driver: copies complete late on each stream's own
// thread; cuMemFree and cuMemFreeHost do not wait for them (a real driver
// need not), so memory freed while a queued copy still reads or writes it
// is a violation (the memory itself is kept, so the copy does no harm
// here); a stream made without CU_STREAM_NON_BLOCKING waits for the legacy
// default stream and the default stream for it, as on a driver; a failed
// copy ends its context for good (a sticky error: every later call in it
// fails the same way until its last retain is released or the device is
// reset); copies from and to pageable host memory are counted apart from
// those of pinned memory. A host buffer changed while a copy from it is
// pending, a stream, event or pointer used with another device, a call
// without a current context, a context left pushed, a free of an unknown
// pointer, and an event made without CU_EVENT_BLOCKING_SYNC (its waiters
// would spin) are each recorded as a violation; it counts what is live
// (primary context retains per device too) and the calls that cost a real
// device dearly, and injects the faults below. In a child forked after cuInit,
// every call is CUDA_ERROR_NOT_INITIALIZED, as on a real driver. Each process starts from the
// environment (RCKPT_STANDIN_DEVICES, RCKPT_STANDIN_DRIVER_VERSION,
// RCKPT_STANDIN_INIT_ERROR, RCKPT_STANDIN_KERNEL_ERROR, RCKPT_STANDIN_MIG,
// RCKPT_STANDIN_MEMORY) and, at exit, fails (exit status 97) printing every
// violation and leak it saw; with RCKPT_STANDIN_COUNTS=FILE it first writes
// the counts of the calls a real device makes costly (pinned and device
// allocations and frees, stream and event creations, synchronisations,
// copies from or to pageable host memory).
#ifndef RCKPT_TESTS_CUDA_STANDIN_STANDIN_CONTROL_H_
#define RCKPT_TESTS_CUDA_STANDIN_STANDIN_CONTROL_H_

#include <cstdint>

extern "C" {

struct RckptStandinConfig {
  int devices = 2;
  int driver_version = 13000;           // cuDriverGetVersion
  uint64_t memory_bytes = 1ull << 30;   // per device
  int init_error = 0;                   // cuInit's result (0: success)
  int kernel_load_error = 0;            // cuModuleLoadData's result
  int retain_error = 0;                 // cuDevicePrimaryCtxRetain's result
  int oom_after_allocs = 0;             // the n-th cuMemAlloc is out of memory (0: never)
  int pinned_error = 0;                 // cuMemHostAlloc's result
  int fail_copy = 0;                    // the n-th copy faults its context for good (LAUNCH_FAILED)
  int sticky_copy = 0;                  // the n-th copy faults its context for good (ILLEGAL_ADDRESS)
  int mig = 0;                          // devices are MIG instances of one GPU
  int copy_delay_us = 100;              // each stream operation runs this late
  // From the n-th cuEventRecord on, every record fails with
  // CUDA_ERROR_OUT_OF_MEMORY (0: never); the context stays usable.
  int event_error = 0;
  int stream_sync_error = 0;            // cuStreamSynchronize's result, without waiting (0: it waits)
};

struct RckptStandinStats {
  int live_allocations[8];
  uint64_t live_bytes[8];
  int live_pinned;
  int live_streams;
  int live_events;
  int live_modules;
  int retained_contexts;
  uint64_t copies;
  uint64_t launches;
  int bad_frees;
  int violations;
  int init_calls;  // cuInit calls since the last configure
  // Calls since the last configure (successful or not).
  uint64_t mem_host_allocs;   // cuMemHostAlloc
  uint64_t mem_allocs;        // cuMemAlloc
  uint64_t mem_frees;         // cuMemFree
  uint64_t mem_host_frees;    // cuMemFreeHost
  uint64_t stream_creates;    // cuStreamCreate
  uint64_t event_creates;     // cuEventCreate
  uint64_t ctx_syncs;         // cuCtxSynchronize
  uint64_t stream_syncs;      // cuStreamSynchronize
  // cuDevicePrimaryCtxRetain calls per device since the last configure: the
  // devices a real driver would have made a context on (about 0.5 GiB each),
  // however briefly they were held.
  uint64_t retains_per_device[8];
  // Primary context retains not yet released, per device: 0 everywhere
  // once every user released what it retained.
  int live_retains[8];
  // Copies by the kind of host memory they read (HtoD) or write (DtoH):
  // pinned (cuMemHostAlloc) or pageable, which a real driver stages through
  // its own pinned buffer, synchronously and one copy at a time.
  uint64_t htod_pinned;
  uint64_t htod_pageable;
  uint64_t dtoh_pinned;
  uint64_t dtoh_pageable;
  uint64_t event_records;  // cuEventRecord calls since the last configure
  int pending_ops;         // stream operations queued and not yet run, all streams
};

// Replaces the configuration and clears every counter and violation.
// REQUIRES: nothing the stand-in made is live.
void rckpt_standin_configure(const RckptStandinConfig* config);
RckptStandinStats rckpt_standin_stats();
// Copies the violations' text (one per line) into buf; returns their count.
int rckpt_standin_violations(char* buf, int len);
// The calling thread's context stack depth and current device (-1: none).
int rckpt_standin_context_depth();
int rckpt_standin_current_device();
// Makes the calling thread's current context device `d`'s primary context
// (as cudaSetDevice does), or none for -1.
void rckpt_standin_set_current_device(int d);
// The device whose live allocation holds `p`, or -1.
int rckpt_standin_device_of(const void* p);
// Holds a stream (null: `device`'s default stream): work queued on it from
// now on runs once rckpt_standin_release is called with the returned gate,
// as work behind a long kernel would. cuCtxSynchronize waits for every
// stream of its context's device, so it waits for a held stream too;
// cuMemFree and cuMemFreeHost do not.
void* rckpt_standin_hold_stream(void* stream, int device);
// Holds every stream of `device`, those made later and the default stream
// too: nothing queued on them runs until the gate is released.
void* rckpt_standin_hold_device(int device);
void rckpt_standin_release(void* gate);
// From now on every cuEventRecord fails (CUDA_ERROR_OUT_OF_MEMORY) and
// cuStreamSynchronize returns `error` without waiting: nothing can be
// waited for, while the context stays usable.
void rckpt_standin_fail_waits(int error);
// Ends the injected event and stream synchronisation faults
// (event_error, stream_sync_error) without touching anything else.
void rckpt_standin_lift_faults();
// As cudaDeviceReset of device `d`: its streams, events, modules and memory
// (device memory and pinned memory its context allocated) are gone. Later
// use of them is CUDA_ERROR_INVALID_HANDLE (or INVALID_VALUE for memory),
// not a violation: the caller could not have known.
void rckpt_standin_reset_device(int d);
}

#endif  // RCKPT_TESTS_CUDA_STANDIN_STANDIN_CONTROL_H_
