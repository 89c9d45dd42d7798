// Hand-built CUPTI activity records of the real structs from cupti_activity.h (the layout CUPTI 13 fills
// in), for the host-only tests of record conversion and of the joins downstream of it. Kineto tests its
// profiler the same way: synthetic records replayed through the real conversion code.
#pragma once

#include <cupti.h>

#include <cstdint>

namespace strata::test {

inline CUpti_ActivityKernel10 kernel_record(const char* name, uint64_t start, uint64_t end, uint32_t correlation,
                                            uint64_t queued = CUPTI_TIMESTAMP_UNKNOWN,
                                            uint64_t submitted = CUPTI_TIMESTAMP_UNKNOWN) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start;
  k.end = end;
  k.queued = queued;
  k.submitted = submitted;
  k.correlationId = correlation;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = 13;
  k.gridX = 8, k.gridY = 4, k.gridZ = 1;
  k.blockX = 256, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 96;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 49152;
  return k;
}

inline CUpti_ActivityAPI api_record(CUpti_ActivityKind kind, CUpti_CallbackId cbid, uint64_t start, uint64_t end,
                                    uint32_t correlation, uint32_t thread = 4242) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.processId = 1;
  a.threadId = thread;
  a.correlationId = correlation;
  a.returnValue = 0;
  return a;
}

inline CUpti_ActivityAPI runtime_record(CUpti_CallbackId cbid, uint64_t start, uint64_t end, uint32_t correlation,
                                        uint32_t thread = 4242) {
  return api_record(CUPTI_ACTIVITY_KIND_RUNTIME, cbid, start, end, correlation, thread);
}

inline CUpti_ActivityAPI driver_record(CUpti_CallbackId cbid, uint64_t start, uint64_t end, uint32_t correlation,
                                       uint32_t thread = 4242) {
  return api_record(CUPTI_ACTIVITY_KIND_DRIVER, cbid, start, end, correlation, thread);
}

inline CUpti_ActivityExternalCorrelation external_record(uint32_t correlation, uint64_t op,
                                                         CUpti_ExternalCorrelationKind kind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
  CUpti_ActivityExternalCorrelation e{};
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = kind;
  e.externalId = op;
  e.correlationId = correlation;
  return e;
}

}  // namespace strata::test
