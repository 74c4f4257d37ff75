#pragma once
/// \file
/// Portability macros shared by host and device code.

#if defined(__CUDACC__) || defined(__HIPCC__)
#define DDL_HOST_DEVICE __host__ __device__
#else
#define DDL_HOST_DEVICE
#endif

#if defined(__GNUC__) || defined(__clang__)
#define DDL_RESTRICT __restrict__
#define DDL_LIKELY(x) __builtin_expect(!!(x), 1)
#define DDL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define DDL_RESTRICT
#define DDL_LIKELY(x) (x)
#define DDL_UNLIKELY(x) (x)
#endif
