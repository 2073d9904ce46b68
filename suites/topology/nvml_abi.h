// The few NVML declarations the link counters use, as nvml.h states them (NVML's C ABI has kept
// them since its field-value API appeared): the library is opened at run time (dlopen), so a build
// needs no header of its own, and a machine without the driver reads no NVLinks.
#pragma once
#include <string>

namespace dts::nvml {

// The management library, opened (dlopen) and initialized (nvmlInit_v2) once per process and
// path: `library`, else $DTS_NVML_LIBRARY, else libnvidia-ml.so.1. nullptr when none loads or it
// fails to initialize (no driver). Callers take the calls they use with dlsym.
void* open_library(const std::string& library);

// nvmlFieldValue_t
struct FieldValue {
  unsigned int field_id, scope_id;
  long long timestamp, latency_usec;
  int value_type, nvml_return;  // nvmlValueType_t, nvmlReturn_t
  union {
    double d;
    unsigned int ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
  } value;
};
static_assert(sizeof(FieldValue) == 40, "nvmlFieldValue_t is 40 bytes");

// nvml.h's NVML_FI_DEV_* field ids and nvmlValueType_t values used here.
constexpr unsigned kNvlinkSpeedMbpsCommon = 90, kNvlinkLinkCount = 91;
constexpr unsigned kNvlinkThroughputDataTx = 138, kNvlinkThroughputDataRx = 139;
constexpr int kValueUnsignedInt = 1, kValueUnsignedLongLong = 3;
constexpr int kSuccess = 0, kErrorInvalidArgument = 2, kErrorNotSupported = 3;  // nvmlReturn_t

}  // namespace dts::nvml
