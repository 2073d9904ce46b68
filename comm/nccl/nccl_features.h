// The one place where the nccl backend decides which NCCL features this build has, from the
// nccl.h it is compiled against. Each gate names the release that introduced the feature; the
// code uses the DTS_NCCL_HAS_* macros and falls back (or refuses, as a SKIP) where one is 0.
#pragma once
#include <nccl.h>

// ncclSend/ncclRecv (2.7) carry point-to-point and all_to_all; ncclCommAbort and
// ncclCommGetAsyncError (2.4) carry the timeouts.
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 7, 0), "the nccl backend needs NCCL 2.7 or newer");

namespace dts {
inline constexpr int kNcclHeaderVersion = NCCL_VERSION_CODE;
}  // namespace dts

// ncclAvg: 2.10.3 ("Added ncclAvg operation"). The *_SINCE versions also judge the library that
// runs, which may be older than the header.
#define DTS_NCCL_AVG_SINCE NCCL_VERSION(2, 10, 0)
#define DTS_NCCL_HAS_AVG (NCCL_VERSION_CODE >= DTS_NCCL_AVG_SINCE)

// ncclBfloat16: 2.10.3 ("Added support for bfloat16 type"). Older headers declare it only where
// cuda_bf16.h (CUDA 11+) defined __CUDA_BF16_TYPES_EXIST__.
#define DTS_NCCL_BF16_SINCE NCCL_VERSION(2, 10, 0)
#if NCCL_VERSION_CODE >= DTS_NCCL_BF16_SINCE && defined(__CUDA_BF16_TYPES_EXIST__)
#define DTS_NCCL_HAS_BF16 1
#else
#define DTS_NCCL_HAS_BF16 0
#endif

// ncclFloat8e4m3 / ncclFloat8e5m2: 2.24, declared with cuda_fp8.h (CUDA 11.8+). NCCL runs them on
// sm_90 and newer only: the backend checks the communicator's devices at run time.
#define DTS_NCCL_FP8_SINCE NCCL_VERSION(2, 24, 0)
#if NCCL_VERSION_CODE >= DTS_NCCL_FP8_SINCE && defined(__CUDA_FP8_TYPES_EXIST__)
#define DTS_NCCL_HAS_FP8 1
#else
#define DTS_NCCL_HAS_FP8 0
#endif

// ncclGetLastError: 2.13. Without it an error carries ncclGetErrorString's text only.
#define DTS_NCCL_HAS_GET_LAST_ERROR (NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0))

// Nonblocking communicators (ncclConfig_t, ncclCommInitRankConfig, ncclInProgress,
// ncclCommFinalize): 2.14. Without them init is ncclCommInitRank, which blocks until every rank
// has joined, and a communicator is released with ncclCommDestroy alone.
#define DTS_NCCL_HAS_NONBLOCKING (NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0))

// ncclCommSplit: 2.18.1. Without it split() bootstraps a new communicator over MPI_Comm_split.
#define DTS_NCCL_HAS_COMM_SPLIT (NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 1))
