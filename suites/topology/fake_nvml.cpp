// A stand-in for NVIDIA's management library, for link_counters_test: two GPUs, the first with 4
// NVLinks whose transmit counter grows by 1000 KiB per reading, the second without NVLink
// (NVML_ERROR_NOT_SUPPORTED, 3, in each field). Only the calls read_nvlink_counters makes.
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

}  // extern "C"
