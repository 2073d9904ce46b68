// A stand-in for NVIDIA's management library, for link_counters_test: two GPUs, the first with 4
// NVLinks whose transmit counter grows by 1000 KiB per reading, the second without NVLink
// (NVML_ERROR_NOT_SUPPORTED, 3, in each field). Only the calls read_nvlink_counters makes, and
// for inventory_test those of the inventory (harness/inventory.cpp): the first GPU at PCI address
// 0000:1b:00.0 (NVML spells it 00000000:1B:00.0), an H100 with 80 GiB, clocks 1980 and 2619 MHz;
// driver 550.54.15, CUDA 12.4.
#include <cstdio>
#include <strings.h>

#include "suites/topology/nvml_abi.h"

extern "C" {

using FakeFieldValue = dts::nvml::FieldValue;
using namespace dts::nvml;

static unsigned long long transmitted_kib = 5000;

__attribute__((visibility("default"))) int nvmlInit_v2() { return 0; }
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 2;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  *device = reinterpret_cast<void*>(static_cast<unsigned long>(index) + 1);  // 1, 2: never null
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetFieldValues(void* device, int count, FakeFieldValue* values) {
  const bool nvlink = reinterpret_cast<unsigned long>(device) == 1;
  for (int i = 0; i < count; ++i) {
    FakeFieldValue& v = values[i];
    v.nvml_return = nvlink ? kSuccess : kErrorNotSupported;
    switch (v.field_id) {
      case kNvlinkThroughputDataTx: v.value_type = kValueUnsignedLongLong; v.value.ull = transmitted_kib; break;  // KiB
      case kNvlinkThroughputDataRx: v.value_type = kValueUnsignedLongLong; v.value.ull = 7; break;
      case kNvlinkSpeedMbpsCommon: v.value_type = kValueUnsignedInt; v.value.ui = 25000; break;  // MB/s per link
      case kNvlinkLinkCount: v.value_type = kValueUnsignedInt; v.value.ui = 4; break;
      default: v.nvml_return = kErrorInvalidArgument;
    }
  }
  if (nvlink) transmitted_kib += 1000;
  return 0;
}

__attribute__((visibility("default"))) int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  std::snprintf(version, length, "%s", "550.54.15");
  return 0;
}
__attribute__((visibility("default"))) int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = 12040;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  // NVML reads the address in either spelling and case; the stand-in knows these two.
  if (strcasecmp(bus_id, "00000000:1B:00.0") != 0 && strcasecmp(bus_id, "0000:1b:00.0") != 0) return 6;  // NOT_FOUND
  *device = reinterpret_cast<void*>(1UL);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetName(void*, char* name, unsigned length) {
  std::snprintf(name, length, "%s", "NVIDIA H100 80GB HBM3");
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void*, char* uuid, unsigned length) {
  std::snprintf(uuid, length, "%s", "GPU-00000000-1111-2222-3333-444444444444");
  return 0;
}
struct FakeMemory {
  unsigned long long total, free, used;
};
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void*, FakeMemory* memory) {
  memory->total = 80ULL << 30;
  memory->free = memory->total;
  memory->used = 0;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMaxClockInfo(void*, int type, unsigned* mhz) {
  if (type == 1) *mhz = 1980;  // NVML_CLOCK_SM
  else if (type == 2) *mhz = 2619;  // NVML_CLOCK_MEM
  else return kErrorInvalidArgument;
  return 0;
}

}  // extern "C"
